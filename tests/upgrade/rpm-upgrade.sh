#!/bin/bash
# The RPM side of the upgrade from Mellanox's nv_peer_mem 1.3 (issue 34), as far as a Debian
# host allows: the host's rpm, with --root, upgrades a double of their nvidia_peer_memory 1.3
# rpm to this project's noarch rpm inside ROOT (a copy of the stock Debian root: its /bin/sh,
# dkms and systemctl run the scriptlets, chrooted by rpm). The 1.3 double is written here from
# that rpm's known layout: Name nvidia_peer_memory, 1.3-0, the module built for one kernel in
# /lib/modules/<kernel>/extra/nv_peer_mem.ko, /etc/init.d/nv_peer_mem and
# /etc/infiniband/nv_peer_mem.conf, neither marked %config; %post runs depmod. An administrator's
# DKMS registration of nv_peer_mem 1.3 from its source (dkms add) is there too, and
# /etc/infiniband/nv_peer_mem.conf says ONBOOT=no.
# usage: rpm-upgrade.sh ROOT RPMDIR WORK KERNEL   (ROOT: /proc mounted; RPMDIR: build-packages.sh's
#   rpm/; the 1.3 double's .deb source in WORK/m13, from mellanox-1.3-debs.sh)
# Prints "PASS upgrade:rpm-<check>" / "FAIL upgrade:rpm-<check>: <why>" lines.
set -uo pipefail
. "$(dirname "$0")/../kernel/env.sh"
[ $# = 4 ] || { echo "usage: $0 ROOT RPMDIR WORK KERNEL" >&2; exit 2; }
root=$1 rpmdir=$2 work=$3 kver=$4
log=$work/rpm-upgrade.log
: >"$log"
failed=0
result() { # result PASS|FAIL check [detail]
	echo "$1 upgrade:rpm-$2${3:+: $3}"
	[ "$1" = PASS ] || failed=1
}
version=$(sed -n 's/^Version:[[:space:]]*//p' "$(dirname "$0")/../../packaging/rpm/nvidia_peer_memory.spec")
ours=$(ls "$rpmdir"/nvidia_peer_memory-"$version"-*.noarch.rpm 2>/dev/null | head -n1)
[ -f "$ours" ] || { result FAIL upgrade "no nvidia_peer_memory-$version rpm in $rpmdir"; exit 1; }
CONF=/etc/infiniband/nv_peer_mem.conf

# --- the 1.3 double's rpm ------------------------------------------------------------------
b=$work/rpm13
mkdir -p "$b/SPECS" "$b/files/etc/infiniband" "$b/files/etc/init.d" "$b/files/lib/modules/$kver/extra"
printf '# nv_peer_mem 1.3 (test double): load the module at boot\nONBOOT=yes\n' >"$b/files$CONF"
printf '#!/bin/sh\n# nv_peer_mem 1.3 double: modprobe at start, modprobe -r at stop\ncase "$1" in\nstart) modprobe nv_peer_mem ;;\nstop) modprobe -r nv_peer_mem ;;\nesac\n' \
	>"$b/files/etc/init.d/nv_peer_mem"
echo "nv_peer_mem 1.3 double: not a module" >"$b/files/lib/modules/$kver/extra/nv_peer_mem.ko"
cat >"$b/SPECS/nvidia_peer_memory-1.3.spec" <<EOF
Name: nvidia_peer_memory
Version: 1.3
Release: 0
Summary: nv_peer_mem 1.3 (test double)
License: GPL-2.0-only
BuildArch: x86_64
%description
A test double of the nvidia_peer_memory 1.3 rpm's layout (tests/upgrade/rpm-upgrade.sh).
%install
cp -a $b/files/. %{buildroot}/
%post
depmod -a $kver >/dev/null 2>&1 || :
# what chkconfig --add makes of the init script, where chkconfig is
for l in 2 3 4 5; do mkdir -p /etc/rc\$l.d; ln -sf ../init.d/nv_peer_mem /etc/rc\$l.d/S90nv_peer_mem; done
%preun
# chkconfig --del, on every erase, the upgrade's included
rm -f /etc/rc[2345].d/S90nv_peer_mem
%files
/lib/modules/$kver/extra/nv_peer_mem.ko
%attr(755,root,root) /etc/init.d/nv_peer_mem
/etc/infiniband/nv_peer_mem.conf
EOF
rpmbuild -bb --define "_topdir $b" --define "_build_id_links none" "$b/SPECS/nvidia_peer_memory-1.3.spec" >>"$log" 2>&1
old=$(ls "$b"/RPMS/x86_64/nvidia_peer_memory-1.3-0.x86_64.rpm 2>/dev/null)
[ -f "$old" ] || { result FAIL upgrade "rpmbuild failed for the 1.3 double; see $log"; exit 1; }

# --- the machine with 1.3: its rpm, a DKMS registration of 1.3, ONBOOT=no --------------------
R=(rpm --root "$root" --nodeps)
"${R[@]}" --initdb >>"$log" 2>&1
"${R[@]}" -i "$old" >>"$log" 2>&1 || { result FAIL upgrade "rpm -i of the 1.3 double failed; see $log"; exit 1; }
dpkg-deb -x "$work/m13/nvidia-peer-memory-dkms_1.3-0_all.deb" "$work/m13-src"
cp -a "$work/m13-src/usr/src/nv_peer_mem-1.3" "$root/usr/src/"
in_chroot "$root" dkms add -m nv_peer_mem -v 1.3 >>"$log" 2>&1
sed -i 's/^ONBOOT=.*/ONBOOT=no/' "$root$CONF"
edited=$(sha256sum <"$root$CONF")
before=$(in_chroot "$root" dkms status -m nv_peer_mem 2>&1 | paste -sd ';')

# --- rpm -U: our scriptlets over that ----------------------------------------------------------
start=$SECONDS
out=$("${R[@]}" -Uvh "$ours" 2>&1)
rc=$?
echo "$out" >>"$log"
took=$((SECONDS - start))
q=$(rpm --root "$root" -q nvidia_peer_memory 2>&1 | paste -sd ' ')
bad=()
[ $rc = 0 ] || bad+=("rpm -U exit $rc: $(grep -m1 -i 'error\|warning' <<<"$out")")
[ "$q" = "nvidia_peer_memory-$version-1.noarch" ] || bad+=("rpm -q: $q")
[ ! -e "$root/lib/modules/$kver/extra/nv_peer_mem.ko" ] || bad+=("1.3's extra/nv_peer_mem.ko left")
grep -q nv_peer_mem-service "$root/etc/init.d/nv_peer_mem" || bad+=("/etc/init.d/nv_peer_mem is not ours")
if [ ${#bad[@]} = 0 ]; then
	result PASS upgrade
	echo "  rpm -U of $(basename "$ours") over nvidia_peer_memory-1.3-0: exit 0, $took s (scriptlets chrooted, DKMS for the host's kernel skipped)"
else result FAIL upgrade "$(IFS=';'; echo "${bad[*]}"); see $log"; fi
# %config(noreplace): the administrator's file stays, ours beside it as .rpmnew.
if [ "$(sha256sum <"$root$CONF")" = "$edited" ] && grep -qx ONBOOT=yes "$root$CONF.rpmnew" 2>/dev/null &&
	grep -q 'warning: .*nv_peer_mem.conf created as .*nv_peer_mem.conf.rpmnew' <<<"$out"; then
	result PASS config-kept
else result FAIL config-kept "ONBOOT: '$(grep ONBOOT "$root$CONF" | paste -sd ' ')'; .rpmnew: $(ls "$root$CONF".rpm* 2>&1 | paste -sd ' ')"; fi
# %post removed every other DKMS version and registered ours; the build for the host's kernel
# (uname -r in the chroot) has no headers and is skipped without failing rpm.
after=$(in_chroot "$root" dkms status -m nv_peer_mem 2>&1 | paste -sd ';')
if [ "$after" = "nv_peer_mem/$version: added" ] && [ ! -e "$root/var/lib/dkms/nv_peer_mem/1.3" ]; then
	result PASS dkms
	echo "  DKMS before: '$before'; after: '$after'"
else result FAIL dkms "DKMS before: '$before'; after: '$after'"; fi
# The service: 1.3's init script was enabled (its rc links), so ours is, as a systemd unit: %pre
# saw the links before 1.3's %preun removed them (after our %post). Without that, %post enables
# the unit on a first install only, and systemd ignores an init script a unit of its name replaces.
wants=/etc/systemd/system/multi-user.target.wants/nv_peer_mem.service
if [ -L "$root$wants" ] && [ ! -e "$root/run/nv_peer_mem/enable-after-upgrade" ]; then
	result PASS service-enabled
else result FAIL service-enabled "no $wants after the upgrade from an enabled 1.3"; fi
# ours is the same name, newer: rpm sees an upgrade, not a conflict.
newer=$(rpm --eval "%{lua: print(rpm.vercmp('$version-1', '1.3-0'))}" 2>&1)
prov=$(rpm -qp --provides "$ours" 2>&1)
if [ "$newer" = 1 ] && grep -qx "nvidia_peer_memory = $version-1" <<<"$prov"; then
	result PASS replaces-1.3
else result FAIL replaces-1.3 "rpm.vercmp says '$newer'; provides '$(paste -sd ' ' <<<"$prov")'"; fi
exit $failed
