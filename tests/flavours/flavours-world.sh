#!/bin/bash
# The flavours world (issue 36): the stock machine (tests/stock/) with the other flavours of the
# same Debian release, as an administrator gets them from trixie-backports once the packages
# are installed:
#   1. the prepared root (prepare-root.sh), an overlay of it (a copy where overlays cannot be
#      mounted); this project's debs and the doubles installed by apt as the stock world does
#      (install-order.sh, order P N O);
#   2. apt-get install -t trixie-backports of linux-image-<release>-cloud-amd64 and -rt-amd64
#      with their headers, one flavour an apt run: DKMS builds nv_peer_mem, nvidia-current and
#      mlnx-ofed-kernel for each, and rust-tree.sh completes a Rust tree per flavour (its cache
#      is keyed by the kernel's release: /var/cache/nv_peer_mem/rust-trees/<release>);
#   3. what the machine needs of each flavour's config and initrd (the Intel IOMMU, virtio, the
#      serial console), then one disk and two boots under systemd (stock-vm.sh): the cloud
#      kernel, then the rt kernel, each with its own initrd, each running the flavour's check
#      and the stock scenarios; the rt boot runs the in-kernel stress races (29-stress) too, at
#      make check's count, 500 a race, since every spinlock there sleeps;
#   4. with --full (make fullcheck): the newest 7.x of sid whose linux-source is in the archive
#      is installed into the same root from sid (its headers need sid's gcc), with the Rust
#      compiler its .config names, DKMS, a boot and the registration scenario (releases.sh).
# usage: flavours-world.sh [--full] PACKAGES   (build-packages.sh's OUTDIR, holding deb/)
# Prints "PASS flavours:<check>" / "FAIL flavours:<check>: <why>" lines (and releases:<check>
# with --full); logs in $NVPM_CACHE/work/flavours.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
stock=$top/tests/stock
. "$top/tests/kernel/env.sh"
full= # --full or empty
[ "${1:-}" != --full ] || { full=--full; shift; }
[ $# = 1 ] || { echo "usage: $0 [--full] PACKAGES" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	exec sudo NVPM_CACHE="$NVPM_CACHE" NVPM_DEBIAN_MIRROR="${NVPM_DEBIAN_MIRROR:-}" \
		NVPM_STOCK_FRESH_TREES="${NVPM_STOCK_FRESH_TREES:-}" "$0" ${full:+"$full"} "$1"
fi
packages=$(cd "$1" && pwd)
work=${NVPM_WORK:-$NVPM_CACHE/work}/flavours
root=$work/root
log=$work/flavours.log
# shellcheck source=../stock/machine.sh
. "$stock/machine.sh"
start_all=$SECONDS
world_begin flavours
flavours=(cloud rt)
say "flavours world: Debian's ${kver%-amd64}-{cloud,rt}-amd64 beside $kver"
mkdir -p "$work/upper" "$work/over" "$root"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/over" "$root" 2>>"$log" ||
	cp -a "$base/." "$root/" || fatal root "cannot copy $base"
mounts() { mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys"; }
mounts
in_root() { in_chroot "$root" "$@"; }
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$top/dkms.conf")

# --- the packages, as the stock world installs them --------------------------------------
debs=("$packages"/deb/nvidia-peer-memory-dkms_*_all.deb "$packages"/deb/nvidia-peer-memory_*_all.deb)
[ -f "${debs[0]}" ] && [ -f "${debs[1]}" ] || fatal packages "no packages in $packages/deb"
"$stock/doubles-debs.sh" "$work/doubles" >>"$log" 2>&1 || fatal packages "building the doubles' packages failed; see $log"
mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$work"/doubles/*.deb "$root/tmp/debs/"
seed_tree "$kver"
start=$SECONDS
"$stock/install-order.sh" "$root" PNO /tmp/debs "$work/apt-install.log" >"$work/order-PNO.out"
rc=$?
cat "$work/apt-install.log" >>"$log"
if [ $rc = 0 ]; then result PASS packages
else fatal packages "$(head -n 1 "$work/order-PNO.out" | sed 's/^FAIL stock:order-PNO: //')"; fi
echo "  apt-get install of the packages and the doubles, DKMS building for $kver: $((SECONDS - start)) s"
in_root apt-get update -q >>"$log" 2>&1 || fatal packages "apt-get update in the root failed; see $log"

# completion RELEASE: what rust-tree.sh said in DKMS's make.log when it completed that tree, or
# where the tree came from when an earlier run completed it
completion() {
	local line
	line=$(grep -h 'nv_peer_mem: completed' "$root/var/lib/dkms/nv_peer_mem/$version/$1"/*/log/make.log \
		"$root/var/lib/dkms/nv_peer_mem/$version/build/make.log" 2>/dev/null | head -n1)
	[ -n "$line" ] || line="its Rust tree kept from an earlier run: $(cat "$root$root_trees/$1/.nv_peer_mem-rust-tree" 2>&1)"
	echo "$line"
}
# dkms_built NAME RELEASE: the three DKMS modules installed for RELEASE, nv_peer_mem built for
# it with its own Rust tree and depending on the doubles; the detail of what is wrong otherwise
dkms_built() {
	local k=$2 m status ko vm deps bad=()
	for m in nv_peer_mem nvidia-current mlnx-ofed-kernel; do
		status=$(in_root dkms status -m "$m" -k "$k" 2>&1)
		grep -q ", $k, x86_64: installed" <<<"$status" || bad+=("dkms status -m $m: '$(paste -sd ';' <<<"$status")'")
	done
	ko=$(cd "$root" && ls "lib/modules/$k/updates/dkms/"nv_peer_mem.ko* 2>/dev/null | head -n1)
	vm=${ko:+$(in_root modinfo -F vermagic "/$ko" 2>&1)}
	[ "${vm%% *}" = "$k" ] || bad+=("no nv_peer_mem.ko with vermagic $k ('${vm:-no module}')")
	deps=${ko:+$(in_root modinfo -F depends "/$ko" 2>&1)}
	[ "$(tr ',' '\n' <<<"$deps" | sort | paste -sd ,)" = ib_core,nvidia ] || bad+=("nv_peer_mem depends on '$deps'")
	[ -s "$root$root_trees/$k/.nv_peer_mem-rust-tree" ] || bad+=("no Rust tree $root_trees/$k")
	[ ${#bad[@]} = 0 ] || { IFS=';'; echo "${bad[*]}"; return 1; }
}
# machine_pieces RELEASE: what the machine (run-vm.sh) needs of the kernel's .config, built in or
# as modules that the initrd carries; prints what is missing
machine_pieces() {
	local k=$1 cfg=$root/boot/config-$1 o v lack=() mods
	mods=$(in_root lsinitramfs "/boot/initrd.img-$k" 2>/dev/null | sed -n 's|.*/\([^/]*\)\.ko\(\.[a-z]*\)\{0,1\}$|\1|p')
	for o in RUST INTEL_IOMMU IRQ_REMAP PCI_MSI VIRTIO_PCI VIRTIO_BLK EXT4_FS SERIAL_8250_CONSOLE; do
		v=$(sed -n "s/^CONFIG_$o=//p" "$cfg")
		case $o:$v in
		*:y) ;;
		VIRTIO_BLK:m) grep -qx virtio_blk <<<"$mods" || lack+=("virtio_blk.ko not in the initrd") ;;
		EXT4_FS:m) grep -qx ext4 <<<"$mods" || lack+=("ext4.ko not in the initrd") ;;
		*) lack+=("CONFIG_$o=${v:-unset}") ;;
		esac
	done
	[ -s "$root/boot/initrd.img-$k" ] || lack+=("no /boot/initrd.img-$k")
	echo "${lack[*]}"
}

# --- the flavours, installed after the packages, as a new kernel is ------------------------
for f in "${flavours[@]}"; do
	k=${kver%-amd64}-$f-amd64
	seed_tree "$k"
	start=$SECONDS
	in_root apt-get install -y -q --no-install-recommends -t trixie-backports "linux-image-$k" "linux-headers-$k" \
		>"$work/$f-apt.log" 2>&1
	rc=$?
	cat "$work/$f-apt.log" >>"$log"
	took=$((SECONDS - start))
	if [ $rc = 0 ] && [ -z "$(in_root dpkg --audit 2>&1)" ]; then result PASS "$f-apt"
	else result FAIL "$f-apt" "apt-get install -t trixie-backports linux-image-$k linux-headers-$k: exit $rc; see $work/$f-apt.log"; fi
	if why=$(dkms_built "$f" "$k"); then
		result PASS "$f-dkms"
		echo "  apt-get install of $k with DKMS building nv_peer_mem and the doubles: $took s; $(completion "$k")"
		keep_tree "$k"
	else result FAIL "$f-dkms" "$why; see $work/$f-apt.log"; fi
	missing=$(machine_pieces "$k")
	if [ -z "$missing" ]; then result PASS "$f-machine"
	else result FAIL "$f-machine" "$k lacks what the machine needs: $missing"; fi
done
grep -h '^CONFIG_\(PREEMPT_RT\|PROVE_LOCKING\|DEBUG_ATOMIC_SLEEP\|DETECT_HUNG_TASK\)\b\|^# CONFIG_\(PREEMPT_RT\|PROVE_LOCKING\|DEBUG_ATOMIC_SLEEP\)\b' \
	"$root/boot/config-${kver%-amd64}-rt-amd64" 2>/dev/null | paste -sd ' ' | sed 's/^/  rt config: /'

# --- the machine's disk: the root as it is now, plus the tests and their unit -------------
start=$SECONDS
unmount_under "$root/proc"
unmount_under "$root/sys"
machine_harness "$work" "$stock"/scenarios/stock-{boot,service}.py "$here"/scenarios/*.py \
	"$top"/tests/scenarios/{03-register-dma,07-invalidate,13-free-races,29-stress}.py ||
	fatal harness "installing the tests into the root failed; see $log"
echo "/dev/vda / ext4 defaults 0 0" >"$root/etc/fstab"
for f in "${flavours[@]}"; do
	k=${kver%-amd64}-$f-amd64
	cp "$root/boot/vmlinuz-$k" "$work/vmlinuz-$f" && cp "$root/boot/initrd.img-$k" "$work/initrd-$f.img" ||
		fatal disk "no kernel or initrd for $k in /boot"
done
size=$(($(du -sm "$root" | cut -f1) + 512))
disk=$work/disk.img
mke2fs -q -F -t ext4 -L stock -d "$root" "$disk" "${size}M" >>"$log" 2>&1 || fatal disk "mke2fs failed; see $log"
echo "  the machine's disk: $size MiB in $((SECONDS - start)) s"

# --- the boots, one after the other from the one disk --------------------------------------
# A boot's time limit as the stock world's: it catches a hang, it is not a speed target.
boot() { # boot FLAVOUR SCENARIO...: results flavours:FLAVOUR:<scenario>
	local f=$1 start=$SECONDS
	shift
	NVPM_VM_TIMEOUT=$((600 + 300 * $#)) NVPM_VM_DISK=$disk \
		NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x nvpm.flavour=$f" \
		"$top/tests/vm/run-vm.sh" "$work/vmlinuz-$f" "$work/initrd-$f.img" "$work/boot-$f" "$@" 2>>"$log" |
		sed "s/^\(PASS\|FAIL\) /\1 $prefix:$f:/"
	echo "  boot of the $f kernel: $((SECONDS - start)) s (TCG)"
}
# flavour-kernel after the stock-* ones: stock-vm.sh unloads the modules after every scenario
# not named stock-*, and stock-boot judges what the boot loaded.
{
	boot cloud stock-boot stock-service flavour-kernel 03-register-dma 07-invalidate 13-free-races
	boot rt stock-boot stock-service flavour-kernel 03-register-dma 07-invalidate 13-free-races 29-stress
} | tee "$work/boots.out"
grep -q '^FAIL' "$work/boots.out" && failed=1
echo "  flavours world: $((SECONDS - start_all)) s"
[ -n "$full" ] || exit $failed

# --- make fullcheck: the newest 7.x release of sid ------------------------------------------
prefix=releases
start_rel=$SECONDS
# shellcheck source=releases.sh
. "$here/releases.sh"
echo "  releases: $((SECONDS - start_rel)) s"
exit $failed
