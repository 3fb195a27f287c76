#!/bin/bash
# The upgrade world (issue 34): this project's two debs installed with apt over Mellanox's
# nv_peer_mem 1.3 packages (their double, mellanox-1.3-debs.sh), on the stock Debian 13 root
# (tests/stock/) with the doubles of the NVIDIA driver and MLNX_OFED packaged as theirs are:
#   - the upgrade itself, with an administrator's edited /etc/infiniband/nv_peer_mem.conf: apt
#     exits 0, DKMS keeps only nv_peer_mem/<ours> on every kernel, the edit is kept, the upstart
#     job is gone, the unit and the init script work, and one boot loads our module at boot;
#   - bad input, each in its own copy: a 1.3 configuration file edited into garbage, and a 1.3
#     left half-configured (its postinst failed) before the upgrade;
#   - the RPM side: the spec's scriptlets run by rpm -U over a double of the nvidia_peer_memory
#     1.3 rpm's files, in a copy of the root (the host's rpm, --root).
# The copies are overlays, one over the other: the root with the driver's and MLNX_OFED's
# doubles, then with 1.3 (a copy of the previous where overlays cannot be mounted).
# usage: upgrade-world.sh PACKAGES   (build-packages.sh's OUTDIR, holding deb/ and rpm/)
# Prints "PASS upgrade:<check>" / "FAIL upgrade:<check>: <why>" lines; logs in
# $NVPM_WORK/upgrade (upgrade.log, one log per apt run).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
stock=$top/tests/stock
. "$top/tests/kernel/env.sh"
[ $# = 1 ] || { echo "usage: $0 PACKAGES" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	exec sudo NVPM_CACHE="$NVPM_CACHE" NVPM_WORK="${NVPM_WORK:-}" \
		NVPM_DEBIAN_MIRROR="${NVPM_DEBIAN_MIRROR:-}" "$0" "$1"
fi
packages=$(cd "$1" && pwd)
work=${NVPM_WORK:-$NVPM_CACHE/work}/upgrade
log=$work/upgrade.log
t0=$SECONDS
# shellcheck source=../stock/machine.sh
. "$stock/machine.sh"
world_begin upgrade
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$top/dkms.conf")
say "upgrade world: Debian's $kver, 1.3 -> $version"
debs=("$packages"/deb/nvidia-peer-memory-dkms_*_all.deb "$packages"/deb/nvidia-peer-memory_*_all.deb)
[ -f "${debs[0]}" ] && [ -f "${debs[1]}" ] || fatal install "no packages in $packages/deb"
mkdir -p "$work/debs"
{ "$stock/doubles-debs.sh" "$work/doubles" && "$here/mellanox-1.3-debs.sh" "$work/m13"; } >>"$log" 2>&1 ||
	fatal doubles "building the doubles' packages failed; see $log"
cp "${debs[@]}" "$work"/doubles/*.deb "$work"/m13/*.deb "$work/debs/"
ours=("/tmp/debs/${debs[0]##*/}" "/tmp/debs/${debs[1]##*/}")

# --- the copies: overlays stacked on the prepared root ----------------------------------------
# stage NAME PARENT: $work/NAME/root, PARENT's root (or the prepared root: "base") as it was left,
# with /proc, /sys, the debs and the Rust tree cache; PARENT's own mount is gone by then.
overlays=1
stage() {
	local d=$work/$1 p=$work/$2 lower=$base
	[ "$2" = base ] || lower=$(cat "$p/lowers")
	[ "$2" = base ] || umount "$p/root" 2>/dev/null
	[ "$2" = base ] || lower="$p/upper:$lower"
	mkdir -p "$d/upper" "$d/over" "$d/root"
	echo "$lower" >"$d/lowers"
	if [ $overlays = 0 ] || ! mount -t overlay overlay -o "lowerdir=$lower,upperdir=$d/upper,workdir=$d/over" \
		"$d/root" 2>>"$log"; then
		overlays=0
		if [ "$2" = base ]; then cp -a "$base/." "$d/root/"; else cp -a "$p/root/." "$d/root/"; fi
	fi
	mkdir -p "$d/root/tmp/debs" "$d/root/var/cache/nv_peer_mem"
	mount --bind "$work/debs" "$d/root/tmp/debs"
	mount --bind "$work/rust-cache" "$d/root/var/cache/nv_peer_mem"
	mount -t proc proc "$d/root/proc"
	mount -t sysfs sysfs "$d/root/sys"
}
unstage() { # unstage NAME: its mounts, keeping its upper layer for the stages above it
	unmount_under "$work/$1/root/tmp"
	unmount_under "$work/$1/root/var"
	umount "$work/$1/root/proc" "$work/$1/root/sys" 2>/dev/null
}
# The Rust tree the stock world completed and kept (its seed_tree), shared by the copies: each
# DKMS build of ours judges it by its stamp, as on any machine, and completes it if stale.
mkdir -p "$work/rust-cache/rust-trees"
tree=$NVPM_CACHE/stock/rust-trees/$kver
[ ! -d "$tree" ] || [ "$(cat "$tree.key" 2>/dev/null)" != "$(sha256sum "$top/scripts/rust-tree.sh" | cut -c1-16)" ] ||
	cp -a "$tree" "$work/rust-cache/rust-trees/$kver"

apt_in() { # apt_in STAGE LOGNAME PACKAGE...: apt-get install in that stage's root; its exit status
	local s=$1 name=$2
	shift 2
	echo "=== $s: apt-get install $*" >>"$log"
	in_chroot "$work/$s/root" apt-get install -y -q --no-install-recommends "$@" >"$work/$name.log" 2>&1
	local rc=$?
	cat "$work/$name.log" >>"$log"
	return $rc
}
CONF=/etc/infiniband/nv_peer_mem.conf

# --- the machine before the upgrade: the driver and MLNX_OFED, then Mellanox's 1.3 ------------
stage drivers base
apt_in drivers drivers /tmp/debs/nvidia-kernel-dkms_double_all.deb /tmp/debs/mlnx-ofed-kernel-dkms_double_all.deb ||
	fatal old-installed "apt-get install of the driver's and MLNX_OFED's doubles failed; see $work/drivers.log"
unstage drivers
stage old drivers
r=$work/old/root
apt_in old old-1.3 /tmp/debs/nvidia-peer-memory_1.3-0_all.deb /tmp/debs/nvidia-peer-memory-dkms_1.3-0_all.deb
rc=$?
st=$(in_chroot "$r" dkms status -m nv_peer_mem 2>&1)
cf=$(in_chroot "$r" dpkg-query -W -f='${Conffiles}' nvidia-peer-memory 2>&1 | awk 'NF { print $1 }' | sort | paste -sd ' ')
if [ $rc = 0 ] && grep -qx "nv_peer_mem/1.3, $kver, x86_64: installed" <<<"$st" &&
	[ "$cf" = "/etc/infiniband/nv_peer_mem.conf /etc/init.d/nv_peer_mem /etc/init/nv_peer_mem.conf" ] &&
	[ -n "$(ls "$r/lib/modules/$kver/updates/"*/nv_peer_mem.ko* "$r/lib/modules/$kver/updates/"nv_peer_mem.ko* 2>/dev/null)" ]; then
	result PASS old-installed
	echo "  1.3 double: dkms '$st'; conffiles $cf; $((SECONDS - t0)) s so far"
else fatal old-installed "apt exit $rc; dkms status '$(paste -sd ';' <<<"$st")'; conffiles '$cf'; see $work/old-1.3.log"; fi
unstage old

# --- what every upgrade must leave --------------------------------------------------------
# only_ours ROOT [KEEP-SRC]: "" when DKMS knows nv_peer_mem only as <ours>, installed on every
# kernel with Rust and headers, and no 1.3 module file (nor, without KEEP-SRC, 1.3's source) is
# left; else what is wrong
only_ours() {
	local root=$1 st k
	local -a wrong=()
	st=$(in_chroot "$root" dkms status -m nv_peer_mem 2>&1)
	grep -v "^nv_peer_mem/${version}[,:]" <<<"$st" | grep -q . && wrong+=("dkms status: $(paste -sd ';' <<<"$st")")
	for k in $(cd "$root/lib/modules" && ls); do
		[ -e "$root/lib/modules/$k/build" ] && grep -qx CONFIG_RUST=y "$root/boot/config-$k" 2>/dev/null || continue
		grep -qx "nv_peer_mem/$version, $k, x86_64: installed" <<<"$st" || wrong+=("not installed for $k")
	done
	[ -z "$(ls "$root"/lib/modules/*/updates/nv_peer_mem.ko* 2>/dev/null)" ] || wrong+=("1.3's updates/nv_peer_mem.ko left")
	[ -n "${2:-}" ] || [ ! -e "$root/usr/src/nv_peer_mem-1.3" ] || wrong+=("/usr/src/nv_peer_mem-1.3 left")
	(IFS=';'; echo "${wrong[*]}")
}
# configured ROOT: "" when both packages are ours and configured and dpkg --audit is empty
configured() {
	local s a
	s=$(in_chroot "$1" dpkg-query -W -f='${db:Status-Abbrev}${Version} ' nvidia-peer-memory nvidia-peer-memory-dkms)
	a=$(in_chroot "$1" dpkg --audit 2>&1)
	local -a off=()
	[ "$s" = "ii ${version}-1 ii ${version}-1 " ] || off+=("dpkg says '$s'")
	[ -z "$a" ] || off+=("dpkg --audit: $(grep '^ ' <<<"$a" | sed 's/^ *//' | paste -sd ' ')")
	(IFS=';'; echo "${off[*]}")
}

# --- the upgrade: an edited ONBOOT, then apt-get install of the two debs --------------------
stage main old
r=$work/main/root
printf '# nv_peer_mem 1.3 (test double): load the module at boot\n# edited: keep it loading, after openibd\nONBOOT=yes  # admin, 2026-11\n' \
	>"$r$CONF"
edited=$(sha256sum <"$r$CONF")
start=$SECONDS
apt_in main upgrade-apt "${ours[@]}"
rc=$?
took=$((SECONDS - start))
bad=$(configured "$r")
if [ $rc = 0 ] && [ -z "$bad" ]; then result PASS apt-exits-0
else result FAIL apt-exits-0 "apt-get install exit $rc; ${bad:-}; see $work/upgrade-apt.log"; fi
echo "  apt-get install of the two debs over 1.3 (DKMS removing 1.3, building $version): $took s"
bad=$(only_ours "$r")
if [ -z "$bad" ]; then result PASS dkms-only-ours
else result FAIL dkms-only-ours "$bad"; fi
kept=()
[ "$(sha256sum <"$r$CONF")" = "$edited" ] ||
	kept+=("$CONF is not the edited file: $(head -c 300 "$r$CONF" 2>&1 | paste -sd '|')")
[ ! -e "$r$CONF.nvpm-kept" ] || kept+=("$CONF.nvpm-kept left")
left=$(ls "$r$CONF".dpkg-* 2>/dev/null | sed "s|^$r||" | paste -sd ' ')
[ -z "$left" ] || kept+=("dpkg left $left")
if [ ${#kept[@]} = 0 ]; then result PASS onboot-kept
else result FAIL onboot-kept "$(IFS=';'; echo "${kept[*]}")"; fi
cf=$(in_chroot "$r" dpkg-query -W -f='${Conffiles}' nvidia-peer-memory | awk 'NF { print $1 }' | sort | paste -sd ' ')
if [ ! -e "$r/etc/init/nv_peer_mem.conf" ] && [ ! -e "$r/etc/init/nv_peer_mem.conf.dpkg-bak" ] &&
	[ "$cf" = "/etc/infiniband/nv_peer_mem.conf /etc/init.d/nv_peer_mem" ]; then
	result PASS upstart-job-removed
else result FAIL upstart-job-removed "$(ls "$r"/etc/init/nv_peer_mem.conf* 2>/dev/null | sed "s|^$r||" | paste -sd ' ') left; conffiles '$cf'"; fi
# The unit: systemd-analyze verify in the root, enabled; the init script: ours, and its status
# in a chroot (where the host's /sys has no nv_peer_mem) says so in one line, LSB's 3.
verify=$(in_chroot "$r" systemd-analyze verify /lib/systemd/system/nv_peer_mem.service 2>&1)
vrc=$?
enabled=$(in_chroot "$r" systemctl is-enabled nv_peer_mem.service 2>&1)
if [ $vrc = 0 ] && [ "$enabled" = enabled ]; then result PASS unit-verifies
else result FAIL unit-verifies "systemd-analyze verify exit $vrc ($(paste -sd ' ' <<<"$verify")); is-enabled '$enabled'"; fi
status=$(in_chroot "$r" /etc/init.d/nv_peer_mem status 2>&1)
src=$?
changed=$(in_chroot "$r" dpkg --verify nvidia-peer-memory 2>&1 | grep -v " c $CONF\$")
links=$(find "$r/etc/rc2.d" "$r/etc/rc3.d" -name 'S*nv_peer_mem' | wc -l)
if [ $src = 3 ] && [ "$(wc -l <<<"$status")" = 1 ] && grep -q '^nv_peer_mem: ' <<<"$status" &&
	[ -z "$changed" ] && [ "$links" = 2 ]; then
	result PASS init-script
else result FAIL init-script "status exit $src, said '$(paste -sd '|' <<<"$status")'; dpkg --verify '$changed'; $links rc2/rc3 links"; fi

# --- one boot of the upgraded machine: our module at boot ----------------------------------
unstage main
t=$r/usr/lib/nvpm-stock
mkdir -p "$t/scenarios" "$r/etc/nvpm"
install -m 755 "$stock/stock-vm.sh" "$t/stock-vm.sh"
install -m 644 "$top/tests/vm/lib.py" "$top/tests/vm/cleanup.py" "$t/"
install -m 644 "$here/scenarios/upgrade-boot.py" "$t/scenarios/"
install -m 644 "$stock/nvpm-stock.service" "$r/etc/systemd/system/"
ln -sf /etc/systemd/system/nvpm-stock.service "$r/etc/systemd/system/multi-user.target.wants/"
ln -sf /dev/null "$r/etc/systemd/system/serial-getty@ttyS0.service"
echo "/dev/vda / ext4 defaults 0 0" >"$r/etc/fstab"
mkdir -p "$work/bars"
for g in 0 1; do
	python3 "$top/tests/vm/mkbar.py" $((g + 1)) 16 "$work/bars/gpu$g.img" "$work/bars/gpu$g.sha256"
	cp "$work/bars/gpu$g.sha256" "$r/etc/nvpm/"
done
cp "$r/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$r/boot/initrd.img-$kver" "$work/initrd.img"
disk=$work/disk.img
if mke2fs -q -F -t ext4 -L stock -d "$r" "$disk" "$(($(du -sm "$r" | cut -f1) + 512))M" >>"$log" 2>&1; then
	start=$SECONDS
	NVPM_VM_TIMEOUT=900 NVPM_VM_DISK=$disk NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x" \
		"$top/tests/vm/run-vm.sh" "$work/vmlinuz" "$work/initrd.img" "$work/boot" upgrade-boot 2>>"$log" |
		sed 's/^\(PASS\|FAIL\) /\1 upgrade:/' >"$work/boot.out"
	echo "  boot: $((SECONDS - start)) s (TCG)" >>"$work/boot.out"
	rm -f "$disk"
else echo "FAIL upgrade:upgrade-boot: mke2fs failed; see $log" >"$work/boot.out"; fi &
boot=$!

# --- bad input: a garbage 1.3 configuration file --------------------------------------------
# The administrator's file is kept byte for byte, apt exits 0, and the service names the file
# and what it accepts in one line at boot (PREVLEVEL=N: as sysvinit starts it; the unit's
# ExecCondition runs the same check).
stage broken old
r=$work/broken/root
printf 'ONBOOT=yes please {{\n]] %%%% $(false)\n\001\002 not a setting\n' >"$r$CONF"
garbage=$(sha256sum <"$r$CONF")
apt_in broken broken-conffile "${ours[@]}"
rc=$?
bad=$(configured "$r")
more=$(only_ours "$r")
said=$(in_chroot "$r" env PREVLEVEL=N /usr/libexec/nv_peer_mem/nv_peer_mem-service onboot-check 2>&1)
orc=$?
want="nv_peer_mem: ONBOOT=yes please {{ in $CONF is not valid; use ONBOOT=yes or ONBOOT=no"
if [ $rc = 0 ] && [ -z "$bad$more" ] && [ "$(sha256sum <"$r$CONF")" = "$garbage" ] &&
	[ $orc = 6 ] && [ "$said" = "$want" ]; then
	result PASS broken-conffile
	echo "  garbage kept; the service says: $said (exit $orc)"
else result FAIL broken-conffile "apt exit $rc; ${bad:-}${more:+; $more}; kept: $([ "$(sha256sum <"$r$CONF")" = "$garbage" ] && echo yes || echo no); onboot-check exit $orc: '$(paste -sd '|' <<<"$said")'"; fi
unstage broken
drop() { unmount_under "$work/$1"; rm -rf --one-file-system "${work:?}/$1"; }
drop broken

# --- bad input: 1.3 half-configured (its postinst failed), then the upgrade ----------------
stage half drivers
r=$work/half/root
apt_in half half-1.3 /tmp/debs/nvidia-peer-memory_1.3-0_all.deb /tmp/debs/nvidia-peer-memory-dkms_1.3-0-postinst-fails_all.deb
rc1=$?
s1=$(in_chroot "$r" dpkg-query -W -f='${db:Status-Abbrev}' nvidia-peer-memory-dkms)
st1=$(in_chroot "$r" dkms status -m nv_peer_mem 2>&1 | paste -sd ';')
sed -i 's/^ONBOOT=.*/ONBOOT=no/' "$r$CONF"
apt_in half half-upgrade "${ours[@]}"
rc=$?
bad=$(configured "$r")
more=$(only_ours "$r")
if [ $rc1 != 0 ] && [ "$s1" = "iF " ] && [ $rc = 0 ] && [ -z "$bad$more" ] &&
	[ "$(grep -v '^#' "$r$CONF")" = ONBOOT=no ]; then
	result PASS half-configured
	echo "  1.3 left $s1(apt exit $rc1, dkms '$st1'); the upgrade: apt exit $rc, ONBOOT=no kept;" \
		"$(grep -m1 '^nv_peer_mem: removed' "$work/half-upgrade.log" || echo "1.3's own prerm removed its DKMS module")"
else result FAIL half-configured "1.3: apt exit $rc1, state '$s1'; upgrade: apt exit $rc; ${bad:-}${more:+; $more}; ONBOOT: $(grep ONBOOT "$r$CONF" | paste -sd ' ')"; fi
# --- going back: 1.3 over ours (Documentation/install.md's downgrade), in the same copy -------
# dpkg asks about nv_peer_mem.conf (the administrator's, ours recorded): --force-confold keeps it.
apt_in half downgrade --allow-downgrades -o Dpkg::Options::=--force-confold \
	/tmp/debs/nvidia-peer-memory_1.3-0_all.deb /tmp/debs/nvidia-peer-memory-dkms_1.3-0_all.deb
rc=$?
st=$(in_chroot "$r" dkms status -m nv_peer_mem 2>&1)
s=$(in_chroot "$r" dpkg-query -W -f='${db:Status-Abbrev}${Version} ' nvidia-peer-memory nvidia-peer-memory-dkms)
why=()
[ $rc = 0 ] || why+=("apt exit $rc")
[ "$s" = "ii 1.3-0 ii 1.3-0 " ] || why+=("dpkg says '$s'")
[ "$st" = "nv_peer_mem/1.3, $kver, x86_64: installed" ] || why+=("dkms status '$(paste -sd ';' <<<"$st")'")
[ "$(grep -v '^#' "$r$CONF")" = ONBOOT=no ] || why+=("ONBOOT=no not kept")
[ -e "$r/etc/init/nv_peer_mem.conf" ] || why+=("no upstart job")
[ ! -e "$r/lib/systemd/system/nv_peer_mem.service" ] || why+=("our unit left")
[ -z "$(in_chroot "$r" dpkg --audit 2>&1)" ] || why+=("dpkg --audit not empty")
if [ ${#why[@]} = 0 ]; then
	result PASS downgrade
	wants=/etc/systemd/system/multi-user.target.wants/nv_peer_mem.service
	echo "  1.3 back: apt exit 0, dkms '$st', ONBOOT=no kept, upstart job back; $wants:" \
		"$(if [ -L "$r$wants" ]; then echo "left, pointing to $(readlink "$r$wants")"; else echo gone; fi)"
else result FAIL downgrade "$(IFS=';'; echo "${why[*]}"); see $work/downgrade.log"; fi
unstage half
drop half

# --- bad input: 1.3 registered with DKMS by hand, no package whose prerm would remove it -----
# This package's -dkms preinst removes it from every kernel, saying so in one line; the source
# in /usr/src is the administrator's and stays.
stage byhand drivers
r=$work/byhand/root
dpkg-deb -x "$work/m13/nvidia-peer-memory-dkms_1.3-0_all.deb" "$work/byhand/src"
cp -a "$work/byhand/src/usr/src/nv_peer_mem-1.3" "$r/usr/src/"
{ in_chroot "$r" dkms add -m nv_peer_mem -v 1.3 && in_chroot "$r" dkms install -m nv_peer_mem -v 1.3 -k "$kver"; } \
	>"$work/byhand-1.3.log" 2>&1
rc1=$?
st1=$(in_chroot "$r" dkms status -m nv_peer_mem 2>&1 | paste -sd ';')
apt_in byhand byhand-upgrade "${ours[@]}"
rc=$?
bad=$(configured "$r")
more=$(only_ours "$r" keep-src)
line="nv_peer_mem: removed nv_peer_mem/1.3 from DKMS (all kernels)"
if [ $rc1 = 0 ] && [ "$st1" = "nv_peer_mem/1.3, $kver, x86_64: installed" ] && [ $rc = 0 ] &&
	[ -z "$bad$more" ] && [ "$(grep -cxF "$line" "$work/byhand-upgrade.log")" = 1 ]; then
	result PASS dkms-by-hand
	echo "  1.3 added and installed by hand ('$st1'); apt exit $rc, said: $line"
else result FAIL dkms-by-hand "1.3 by hand: exit $rc1, '$st1'; apt exit $rc; ${bad:-}${more:+; $more}; '$line' $(grep -cxF "$line" "$work/byhand-upgrade.log") times; see $work/byhand-upgrade.log"; fi
unstage byhand
drop byhand

# --- the RPM side: rpm -U over the 1.3 rpm's files, in a copy of the prepared root -------------
stage rpm base
"$here/rpm-upgrade.sh" "$work/rpm/root" "$packages/rpm" "$work" "$kver" 2>>"$log" || failed=1
unstage rpm
drop rpm

wait $boot
cat "$work/boot.out"
grep -q '^FAIL' "$work/boot.out" && failed=1
grep -q '^PASS upgrade:upgrade-boot' "$work/boot.out" || failed=1
echo "  upgrade world: $((SECONDS - t0)) s in all"
exit $failed
