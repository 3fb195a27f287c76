#!/bin/bash
# The life of the .deb packages in a throwaway Debian root: install, upgrade to a newer
# revision (a locally changed conffile must survive), remove, purge; afterwards the root must
# hold exactly the files it held before.
# usage: deb-lifecycle.sh OUTDIR   (OUTDIR as given to build-packages.sh, which ran before)
# The prepared root (debootstrap minbase + dkms + systemd, services denied by policy-rc.d) is
# cached as a tarball in ${NVPM_CACHE:-~/.cache/nv_peer_mem-rs}/debootstrap/.
# Prints one "PASS packaging:deb-<check>" or "FAIL packaging:deb-<check>: <detail>" line per
# check; the rest goes to OUTDIR/deb-lifecycle.log. Exits non-zero if a check failed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../kernel/env.sh"
[ $# = 1 ] || { echo "usage: $0 OUTDIR" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	exec sudo NVPM_CACHE="$NVPM_CACHE" NVPM_DEBIAN_MIRROR="${NVPM_DEBIAN_MIRROR:-}" "$0" "$@"
fi
out=$(cd "$1" && pwd)
cache=$NVPM_CACHE/debootstrap
log=$out/deb-lifecycle.log
work=$out/lifecycle
root=$work/root
: >"$log"
failed=0
result() { # result PASS|FAIL check [detail]
	echo "$1 packaging:deb-$2${3:+: $3}"
	[ "$1" = PASS ] || failed=1
}
fatal() { # a step everything after depends on failed
	result FAIL "$1" "$2"
	exit 1
}

"$here/setup.sh" >>"$log" 2>&1 || fatal setup "installing the packaging tools failed; see $log"

# Mounts live only while this script runs; rm --one-file-system never follows one.
unmount_all() {
	local m
	for m in $(awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>>"$log" || true
	done
}
cleanup() {
	unmount_all
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work" "$cache"

in_root() { in_chroot "$root" "$@"; }

# --- the prepared root, from the cache or made now -----------------------------------------
# shellcheck disable=SC1091 # the host's file
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
# The name says what is in it: change it when the preparation below changes.
base=$cache/$codename-minbase-dkms-systemd-v1.tar.gz
if [ ! -s "$base" ]; then
	mirror=$(debian_mirror)
	[ -n "$mirror" ] || fatal root "no Debian mirror in the host's apt sources; set NVPM_DEBIAN_MIRROR"
	echo "[deb-lifecycle] preparing a $codename root from $mirror (once; cached in $base)" >&2
	mkdir -p "$root"
	# systemd: a Debian 12 system has it (and its multi-user.target.wants); dkms: the -dkms
	# package's dependency, preinstalled so that the test needs no network.
	if ! debootstrap --variant=minbase --include=systemd,dkms "$codename" "$root" "$mirror" \
		>>"$log" 2>&1; then
		fatal root "debootstrap failed; see $log"
	fi
	# Nothing may start a service inside the root.
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	in_root apt-get clean >>"$log" 2>&1
	rm -rf "$root"/var/lib/apt/lists/*_* "$root"/var/log/*.log "$root"/var/log/apt/*
	tar -C "$root" --numeric-owner -cf - . | gzip -1 >"$base.tmp" && mv "$base.tmp" "$base"
	rm -rf --one-file-system "$root"
fi
mkdir -p "$root"
tar -C "$root" --numeric-owner -xzf "$base" || fatal root "cannot unpack $base"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"

# --- the packages: the ones built (1.4.0-1) and a newer revision of the same source -------
deb_rev=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$here/../../packaging/debian/changelog")
upstream=${deb_rev%-*}
new_rev=$upstream-$((${deb_rev##*-} + 1))
orig=$out/deb/nvidia-peer-memory_$upstream.orig.tar.gz
old_debs=("$out/deb/nvidia-peer-memory_${deb_rev}_all.deb" "$out/deb/nvidia-peer-memory-dkms_${deb_rev}_all.deb")
for f in "$orig" "${old_debs[@]}"; do
	[ -f "$f" ] || fatal packages "no $f; run build-packages.sh $out first"
done
mkdir -p "$work/new"
tar -xzf "$orig" -C "$work/new"
srcdir=$work/new/nvidia-peer-memory-$upstream
# The new changelog entry: a copy of the first one with the new revision and its own text.
{
	sed -n "1s/($deb_rev)/($new_rev)/p" "$srcdir/debian/changelog"
	printf '\n  * Rebuild, to test upgrades.\n\n'
	grep -m1 '^ -- ' "$srcdir/debian/changelog"
	echo
	cat "$srcdir/debian/changelog"
} >"$work/changelog" && mv "$work/changelog" "$srcdir/debian/changelog"
if ! (cd "$srcdir" && dpkg-buildpackage -us -uc -b) >>"$log" 2>&1; then
	fatal packages "building $new_rev failed; see $log"
fi
new_debs=("$work/new/nvidia-peer-memory_${new_rev}_all.deb" "$work/new/nvidia-peer-memory-dkms_${new_rev}_all.deb")
mkdir -p "$root/tmp/debs"
cp "${old_debs[@]}" "${new_debs[@]}" "$root/tmp/debs/"

# --- what the root holds before ------------------------------------------------------------
# Left out, as places that change whatever is installed or removed:
#   /proc /sys      kernel file systems, mounted for the test
#   /dev            device nodes debootstrap made; no package touches them
#   /run /tmp       run-time state and temporary files (the debs are copied to /tmp)
#   /var/cache      caches (debconf's database, ldconfig's aux cache), rebuilt at will
#   /var/log        logs of dpkg, apt and dkms, which record this test
#   /var/lib/apt    apt's state; /var/lib/dpkg: dpkg's database, whose entries for the
#                   packages are checked separately (dpkg-query must not know them after purge)
snapshot() {
	(cd "$root" && find . \( -path ./proc -o -path ./sys -o -path ./dev -o -path ./run -o \
		-path ./tmp -o -path ./var/cache -o -path ./var/log -o -path ./var/lib/apt -o \
		-path ./var/lib/dpkg \) -prune -o -printf '%p %y %m\n' | LC_ALL=C sort)
}
snapshot >"$work/before"

pkg_state() { # "package version status" ("ii", "rc") of the packages dpkg knows
	in_root dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' \
		nvidia-peer-memory nvidia-peer-memory-dkms 2>/dev/null |
		awk '$3 != "" && $3 != "un" && $3 != "pn" { print $1, $2, $3 }' || true
}
dkms_status() { in_root dkms status -m nv_peer_mem 2>>"$log" || true; }
conf=$root/etc/infiniband/nv_peer_mem.conf

# --- install -------------------------------------------------------------------------------
# (The debs by their paths inside the root: /tmp/debs/NAME.)
if in_root dpkg -i "${old_debs[@]/#*\//\/tmp\/debs\/}" >>"$log" 2>&1 &&
	[ "$(pkg_state | grep -c "$deb_rev ii")" = 2 ]; then
	result PASS install
else result FAIL install "dpkg -i failed or left them unconfigured: $(pkg_state | paste -sd ';'); see $log"; fi

if [ -f "$conf" ] && grep -qx 'ONBOOT=yes' "$conf"; then result PASS conffile
else result FAIL conffile "no ONBOOT=yes in /etc/infiniband/nv_peer_mem.conf"; fi

wants=$root/etc/systemd/system/multi-user.target.wants/nv_peer_mem.service
rc=$(cd "$root/etc" && ls rc2.d/S*nv_peer_mem rc0.d/K*nv_peer_mem 2>/dev/null | paste -sd ' ')
if [ -L "$wants" ] && [ "$(readlink "$wants")" = /lib/systemd/system/nv_peer_mem.service ] &&
	[ "$(wc -w <<<"$rc")" = 2 ]; then
	result PASS enabled
else result FAIL enabled "wants link: $(readlink "$wants" || echo none); rc links: ${rc:-none}"; fi

# No kernel headers in the root: DKMS knows the module but could not build it, and said so.
if grep -q "^nv_peer_mem/$upstream: added" <<<"$(dkms_status)" &&
	[ -L "$root/var/lib/dkms/nv_peer_mem/$upstream/source" ]; then
	result PASS dkms-added
else result FAIL dkms-added "dkms status: '$(dkms_status | paste -sd ';')'"; fi

# --- upgrade, with a local change to the conffile --------------------------------------------
sed -i 's/^ONBOOT=yes/ONBOOT=no/' "$conf"
if in_root dpkg -i "${new_debs[@]/#*\//\/tmp\/debs\/}" >>"$log" 2>&1 &&
	[ "$(pkg_state | grep -c "$new_rev ii")" = 2 ] &&
	grep -q "^nv_peer_mem/$upstream: added" <<<"$(dkms_status)"; then
	result PASS upgrade
else result FAIL upgrade "$(pkg_state | paste -sd ';'); dkms: $(dkms_status | paste -sd ';'); see $log"; fi
if grep -qx 'ONBOOT=no' "$conf" && ! ls "$conf".dpkg-* >/dev/null 2>&1; then
	result PASS conffile-kept
else result FAIL conffile-kept "local ONBOOT=no lost: $(grep ONBOOT "$conf" 2>&1 | paste -sd ' ')"; fi

# --- remove, then purge ----------------------------------------------------------------------
# Both stay in state "rc": the service package for its conffile, the -dkms one for its postrm,
# which dpkg keeps so that a purge can still remove the Rust build-tree cache.
if in_root dpkg -r nvidia-peer-memory nvidia-peer-memory-dkms >>"$log" 2>&1 &&
	[ "$(pkg_state | paste -sd ';')" = "nvidia-peer-memory $new_rev rc;nvidia-peer-memory-dkms $new_rev rc" ] &&
	[ -z "$(dkms_status)" ] &&
	[ ! -e "$root/usr/src/nv_peer_mem-$upstream" ] && [ -f "$conf" ]; then
	result PASS remove
else
	result FAIL remove "state: $(pkg_state | paste -sd ';'); dkms: '$(dkms_status | paste -sd ';')'"
fi
# A completed tree as scripts/rust-tree.sh leaves it: the purge must take the cache away.
mkdir -p "$root/var/cache/nv_peer_mem/rust-trees/0.0.0-test/rust"
if in_root dpkg -P nvidia-peer-memory nvidia-peer-memory-dkms >>"$log" 2>&1 && [ -z "$(pkg_state)" ] &&
	[ ! -e "$root/var/cache/nv_peer_mem" ]; then
	result PASS purge
else
	left=$(ls -d "$root/var/cache/nv_peer_mem" 2>/dev/null || echo none)
	result FAIL purge "state after purge: $(pkg_state | paste -sd ';'); cache left: $left; see $log"
fi

snapshot >"$work/after"
if diff "$work/before" "$work/after" >"$work/diff"; then
	result PASS purge-leaves-nothing
else
	cat "$work/diff" >>"$log"
	result FAIL purge-leaves-nothing "$(grep '^[<>]' "$work/diff" | sed 's/^< /gone: /; s/^> /left: /' | head -n 5 | paste -sd ';')"
fi

exit $failed
