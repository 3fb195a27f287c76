#!/bin/bash
# The stock world: this project's packages on an unmodified Debian 13 machine with Debian's
# own 7.x kernel, booted whole (its kernel, its initrd, systemd as PID 1) in QEMU.
#   1. the prepared root (prepare-root.sh: Debian's archive only), copied;
#   2. the doubles registered with DKMS under the names MLNX_OFED's and NVIDIA's packages use
#      (tests/stock/dkms/), so that DKMS builds them against the stock headers, for every kernel;
#   3. apt-get install of the two debs: DKMS builds nv_peer_mem for the stock kernel, completing
#      its headers' Rust build tree by itself (scripts/rust-tree.sh);
#   4. three boots of the machine from one disk: ONBOOT=yes (the service, doctor, registration
#      with DMA, invalidation, the free races), ONBOOT=no then apt purge, and the boot after it.
# usage: stock-world.sh PACKAGES   (build-packages.sh's OUTDIR, holding deb/)
# Prints "PASS stock:<check>" / "FAIL stock:<check>: <why>" lines; logs in $NVPM_CACHE/work/stock.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/../kernel/env.sh"
[ $# = 1 ] || { echo "usage: $0 PACKAGES" >&2; exit 2; }
if [ "$(id -u)" != 0 ]; then
	exec sudo NVPM_CACHE="$NVPM_CACHE" NVPM_DEBIAN_MIRROR="${NVPM_DEBIAN_MIRROR:-}" "$0" "$@"
fi
packages=$(cd "$1" && pwd)
work=${NVPM_WORK:-$NVPM_CACHE/work}/stock
root=$work/root
log=$work/stock.log
failed=0
result() { # result PASS|FAIL check [detail]
	echo "$1 stock:$2${3:+: $3}"
	[ "$1" = PASS ] || failed=1
}
fatal() { result FAIL "$1" "$2"; exit 1; }

unmount_all() {
	local m
	for m in $(awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>>"$log" || true
	done
}
trap unmount_all EXIT
unmount_all
rm -rf --one-file-system "$work"
mkdir -p "$work"
: >"$log"

base=$("$here/prepare-root.sh" 2>>"$log") || fatal root "preparing the Debian 13 root failed: $(tail -n 1 "$log")"
kver=$(cat "$base/.kver")
say "stock world: Debian's $kver"
cp -a "$base" "$root" || fatal root "cannot copy $base"
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
	DEBIAN_FRONTEND=noninteractive "$@" </dev/null; }

# --- the doubles, DKMS modules as MLNX_OFED's and NVIDIA's are, built against Debian's headers
hdr=/usr/src/linux-headers-$kver
doubles_ok=1
for d in nvidia:nvidia ib_core:mlnx-ofed-kernel; do
	src=${d%%:*} name=${d#*:}
	ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$here/dkms/$name.conf")
	mkdir -p "$root/usr/src/$name-$ver"
	cp -r "$top/tests/fakes/$src/." "$root/usr/src/$name-$ver/"
	cp "$here/dkms/$name.conf" "$root/usr/src/$name-$ver/dkms.conf"
	in_root dkms install -m "$name" -v "$ver" -k "$kver" >>"$log" 2>&1 || doubles_ok=0
done
if [ $doubles_ok = 1 ] && [ -s "$root/usr/src/ofa_kernel/x86_64/$kver/Module.symvers" ] &&
	in_root modinfo -k "$kver" -n nvidia ib_core >>"$log" 2>&1; then
	result PASS doubles-dkms
else fatal doubles-dkms "the doubles did not build or install with DKMS for $kver; see $log"; fi

# --- bad input to scripts/rust-tree.sh: one sentence with the fix, and nothing kept ---------
cp "$top/scripts/rust-tree.sh" "$root/tmp/rust-tree.sh"
printf '#!/bin/sh\necho "rustc 1.96.1 (ed61e7d7e 2026-10-01) (built from a source tarball)"\n' >"$root/tmp/other-rustc"
mkdir -p "$root/tmp/linux-7.2.12" "$root/tmp/no-rust/include/config" "$root/mnt/ro" "$root/mnt/small"
printf 'kernelversion:\n\t@echo 7.2.12\n' >"$root/tmp/linux-7.2.12/Makefile"
echo '# CONFIG_RUST is not set' >"$root/tmp/no-rust/.config"
echo 6.12.117+deb13-amd64 >"$root/tmp/no-rust/include/config/kernel.release"
chmod 755 "$root/tmp/other-rustc"
mount -t tmpfs -o ro,size=1m tmpfs "$root/mnt/ro"
mount -t tmpfs -o size=100m tmpfs "$root/mnt/small"
refuses() { # refuses NAME EXPECTED-TEXT [VAR=value...] [-- KDIR]
	local name=$1 want=$2 tree=$hdr out rc cache e left
	shift 2
	local env=()
	while [ $# -gt 0 ]; do
		case $1 in --) tree=$2; shift 2 ;; *) env+=("$1"); shift ;; esac
	done
	out=$(in_root env "${env[@]}" /tmp/rust-tree.sh "$tree" 2>&1)
	rc=$?
	echo "$name: $out" >>"$log"
	# The cache it was given, or the default one, must not exist afterwards.
	cache=/var/cache/nv_peer_mem
	for e in "${env[@]}"; do case $e in NV_PEER_MEM_RUST_CACHE=*) cache=${e#*=} ;; esac; done
	left=$(find "$root$cache" 2>/dev/null | sed "s|^$root||" | paste -sd ' ')
	if [ $rc = 1 ] && grep -qF -- "$want" <<<"$out" && [ -z "$left" ] &&
		[ "$(grep -c '^nv_peer_mem: ' <<<"$out")" = "$(wc -l <<<"$out")" ]; then
		result PASS "rust-tree-refuses-$name"
	else result FAIL "rust-tree-refuses-$name" "exit $rc, left '${left}', said: $(paste -sd ' ' <<<"$out")"; fi
}
src_deb=$(in_root dpkg-query -W -f='${Version}' "linux-source-$(cut -d. -f1,2 <<<"$kver")")
refuses other-source "is Linux 7.2.12, the headers are $kver" NV_PEER_MEM_KERNEL_SOURCE=/tmp/linux-7.2.12
refuses other-rustc "but /tmp/other-rustc is 'rustc 1.96.1" RUSTC=/tmp/other-rustc
refuses other-rustc-fix "apt-get install rustc=1.85.1" RUSTC=/tmp/other-rustc
mv "$root"/usr/src/linux-source-*.tar.xz "$root/tmp/"
refuses no-source "install the source package of the same version (apt-get install linux-source-$(cut -d. -f1,2 <<<"$kver")=$src_deb)"
mv "$root"/tmp/linux-source-*.tar.xz "$root/usr/src/"
refuses no-bindgen "no bindgen ('/nonexistent/bindgen')" BINDGEN=/nonexistent/bindgen
refuses no-rust "was built without Rust (CONFIG_RUST is not set)" -- /tmp/no-rust
refuses read-only-cache "cannot write the cache directory /mnt/ro/trees" NV_PEER_MEM_RUST_CACHE=/mnt/ro/trees
refuses full-cache "/mnt/small/trees has " NV_PEER_MEM_RUST_CACHE=/mnt/small/trees
umount "$root/mnt/ro" "$root/mnt/small"

# --- the packages, with apt, as an administrator installs them -----------------------------
debs=("$packages"/deb/nvidia-peer-memory-dkms_*_all.deb "$packages"/deb/nvidia-peer-memory_*_all.deb)
[ -f "${debs[0]}" ] && [ -f "${debs[1]}" ] || fatal install "no packages in $packages/deb"
mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$root/tmp/debs/"
start=$SECONDS
in_root apt-get install -y -q --no-install-recommends "/tmp/debs/${debs[0]##*/}" "/tmp/debs/${debs[1]##*/}" \
	>"$work/apt-install.log" 2>&1
rc=$?
took=$((SECONDS - start))
cat "$work/apt-install.log" >>"$log"
if [ $rc = 0 ]; then result PASS apt-install
else result FAIL apt-install "apt-get exit $rc; see $work/apt-install.log"; fi
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$top/dkms.conf")
# completion RELEASE: what rust-tree.sh said in DKMS's make.log when it completed that tree
completion() {
	grep -h 'nv_peer_mem: completed' "$root/var/lib/dkms/nv_peer_mem/$version/$1"/*/log/make.log \
		"$root/var/lib/dkms/nv_peer_mem/$version/build/make.log" 2>/dev/null | head -n1
}
status=$(in_root dkms status -m nv_peer_mem -k "$kver" 2>&1)
if grep -q "^nv_peer_mem/$version, $kver, x86_64: installed" <<<"$status"; then
	result PASS dkms-installed
	echo "  apt-get install with the DKMS build for $kver took $took s; $(completion "$kver")"
else
	result FAIL dkms-installed "dkms status: '$status'; $(tail -n 3 "$root/var/lib/dkms/nv_peer_mem/$version/build/make.log" 2>/dev/null | paste -sd ' ')"
fi
ko=$(ls "$root/lib/modules/$kver/updates/dkms/"nv_peer_mem.ko* 2>/dev/null | head -n1)
[ -n "$ko" ] || fatal module "DKMS installed no nv_peer_mem.ko for $kver"
# Every symbol the module imports is exported by the stock kernel or by the doubles: no module
# that cannot load is installed.
deps=$(in_root modinfo -F depends "/lib/modules/$kver/updates/dkms/${ko##*/}" 2>&1)
if [ "$(tr ',' '\n' <<<"$deps" | sort | paste -sd ,)" = ib_core,nvidia ]; then
	result PASS module-depends
else result FAIL module-depends "nv_peer_mem depends on '$deps', wanted ib_core and nvidia"; fi

# --- the machine's disk: the root as it is now, plus the tests and their unit --------------
unmount_all
t=$root/usr/lib/nvpm-stock
mkdir -p "$t/scenarios" "$root/etc/nvpm"
install -m 755 "$here/stock-vm.sh" "$t/stock-vm.sh"
install -m 644 "$top/tests/vm/lib.sh" "$top/tests/vm/cleanup.sh" "$t/"
install -m 644 "$here"/scenarios/*.sh "$top"/tests/scenarios/{03-register-dma,07-invalidate,13-free-races}.sh "$t/scenarios/"
gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$root/usr/local/bin/race" "$top/tests/vm/race.c" >>"$log" 2>&1 ||
	fatal harness "building tests/vm/race.c failed; see $log"
install -m 644 "$here/nvpm-stock.service" "$root/etc/systemd/system/"
ln -sf /etc/systemd/system/nvpm-stock.service "$root/etc/systemd/system/multi-user.target.wants/"
# The serial console is the tests' output, not a login prompt.
ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
echo "/dev/vda / ext4 defaults 0 0" >"$root/etc/fstab"
mkdir -p "$work/bars"
for g in 0 1; do
	python3 "$top/tests/vm/mkbar.py" $((g + 1)) 16 "$work/bars/gpu$g.img" "$work/bars/gpu$g.sha256"
	cp "$work/bars/gpu$g.sha256" "$root/etc/nvpm/"
done
cp "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$root/boot/initrd.img-$kver" "$work/initrd.img"
size=$(($(du -sm "$root" | cut -f1) + 512))
disk=$work/disk.img
mke2fs -q -F -t ext4 -L stock -d "$root" "$disk" "${size}M" >>"$log" 2>&1 || fatal disk "mke2fs failed; see $log"

# --- three boots of the one disk -----------------------------------------------------------
boot() { # boot NAME SCENARIO...
	local name=$1
	shift
	NVPM_VM_DISK=$disk NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x" \
		"$top/tests/vm/run-vm.sh" "$work/vmlinuz" "$work/initrd.img" "$work/boot-$name" "$@" 2>>"$log" |
		sed 's/^\(PASS\|FAIL\) /\1 stock:/'
}
{
	boot 1-onboot-yes stock-boot stock-service stock-doctor 03-register-dma 07-invalidate 13-free-races stock-onboot-off
	boot 2-onboot-no stock-onboot-no stock-purge
	boot 3-purged stock-purged
} >"$work/boots.out" &
boots=$!

# --- meanwhile, in the installed root: kernels installed after the packages ----------------
# Another Debian 7.x kernel whose source package is in the archive: DKMS builds nv_peer_mem for
# it when the kernel is installed. An older one of the same X.Y, whose source version is not the
# installed one: DKMS skips it with nv_peer_mem's reason, apt succeeds. Then trixie's default 6.12, which has no Rust: DKMS skips it with its
# BUILD_EXCLUSIVE message, apt succeeds, and the doctor says why on that kernel.
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
# The symbol check itself: headers whose Module.symvers lists one Rust symbol the kernel's crates
# do not define, as headers of another build would. The rebuild must refuse to keep anything.
cp -a "$root$hdr" "$root/tmp/headers-other-build"
printf '0x00000000\t_RNvCs0000000000_6kernel16nvpm_not_a_symbol\tvmlinux\tEXPORT_SYMBOL_GPL\t\n' \
	>>"$root/tmp/headers-other-build/Module.symvers"
refuses other-build "the rebuilt Rust crates lack 1 of the " NV_PEER_MEM_RUST_CACHE=/mnt/other-build \
	-- /tmp/headers-other-build
# The kernels below are never booted: no initramfs for them.
sed -i 's/^update_initramfs=.*/update_initramfs=no/' "$root/etc/initramfs-tools/update-initramfs.conf"
candidate() { in_root apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ { print $2 }'; }
newest_image() { # newest_image ERE-of-release: the newest linux-image-<release> matching it
	in_root apt-cache search --names-only "^linux-image-$1\$" | sed -n 's/^linux-image-\([^ ]*\) .*/\1/p' |
		grep -vx "$kver" | sort -V | tac
}
kernel_with_source='' kernel_without_source=''
for k in $(newest_image '7\.[0-9.]+\+deb13-amd64'); do
	if [ "$(candidate "linux-source-$(cut -d. -f1,2 <<<"$k")")" = "$(candidate "linux-image-$k")" ]; then
		[ -n "$kernel_with_source" ] || kernel_with_source=$k
	elif [ "$(cut -d. -f1,2 <<<"$k")" = "$(cut -d. -f1,2 <<<"${kernel_with_source:-none}")" ]; then
		[ -n "$kernel_without_source" ] || kernel_without_source=$k
	fi
done
later_kernel() { # later_kernel NAME RELEASE [apt-get option...] PACKAGE...
	local name=$1 k=$2 start rc
	shift 2
	start=$SECONDS
	in_root apt-get install -y -q --no-install-recommends "$@" >"$work/$name.log" 2>&1
	rc=$?
	cat "$work/$name.log" >>"$log"
	if [ $rc = 0 ]; then result PASS "$name-apt"
	else result FAIL "$name-apt" "apt-get install $* exit $rc; see $work/$name.log"; fi
	echo "  apt-get install of $k with its DKMS step took $((SECONDS - start)) s"
}
if [ -n "$kernel_with_source" ]; then
	k=$kernel_with_source
	later_kernel later-rust-kernel "$k" -t trixie-backports "linux-image-$k" "linux-headers-$k" \
		"linux-source-$(cut -d. -f1,2 <<<"$k")"
	ko2=$(ls "$root/lib/modules/$k/updates/dkms/"nv_peer_mem.ko* 2>/dev/null | head -n1)
	vm=${ko2:+$(in_root modinfo -F vermagic "${ko2#"$root"}" 2>&1)}
	if grep -q "^nv_peer_mem/$version, $k, x86_64: installed" <<<"$(in_root dkms status -m nv_peer_mem -k "$k" 2>&1)" &&
		[ "${vm%% *}" = "$k" ]; then
		result PASS later-rust-kernel-dkms
		echo "  $k: $(completion "$k")"
	else result FAIL later-rust-kernel-dkms "no nv_peer_mem.ko built for $k (vermagic '${vm:-}'); see $work/later-rust-kernel.log"; fi
else
	result FAIL later-rust-kernel "no other Debian 7.x kernel with its source package in the archive"
fi
# A 7.x kernel whose linux-source-X.Y is installed in another version (the one above: one
# linux-source-X.Y at a time): nv_peer_mem cannot be built for it, which must not fail apt.
if [ -n "$kernel_without_source" ]; then
	k=$kernel_without_source
	later_kernel nosource-kernel "$k" -t trixie-backports "linux-image-$k" "linux-headers-$k"
	if grep -q "^nv_peer_mem: the kernel source is linux-source-.* but the headers of $k are " "$work/nosource-kernel.log" &&
		grep -q "^nv_peer_mem: 1 problem(s) above: skipped for kernel $k, not failed; once they are fixed: dkms autoinstall -k $k" "$work/nosource-kernel.log" &&
		grep -q "Autoinstall on $k was skipped for module(s) nv_peer_mem" "$work/nosource-kernel.log" &&
		[ -z "$(ls "$root/lib/modules/$k/updates/dkms/"nv_peer_mem.ko* 2>/dev/null)" ]; then
		result PASS nosource-kernel-skipped
	else result FAIL nosource-kernel-skipped "no skip with nv_peer_mem's reason for $k; see $work/nosource-kernel.log"; fi
else
	result FAIL nosource-kernel "no Debian 7.x kernel without its source package in the archive"
fi
k612=$(newest_image '6\.12\.[0-9]+\+deb13-amd64' | head -n1)
later_kernel norust-kernel "$k612" "linux-image-$k612" "linux-headers-$k612"
if [ -z "$(ls "$root/lib/modules/$k612/updates/dkms/"nv_peer_mem.ko* 2>/dev/null)" ] &&
	grep -q 'for module nv_peer_mem/.* includes a BUILD_EXCLUSIVE directive' "$work/norust-kernel.log" &&
	grep -q "Autoinstall on $k612 was skipped for module(s) nv_peer_mem" "$work/norust-kernel.log"; then
	result PASS norust-kernel-skipped
else result FAIL norust-kernel-skipped "a module for $k612, or no BUILD_EXCLUSIVE message; see $work/norust-kernel.log"; fi
# The doctor on that kernel: a root whose /proc says 6.12, with the machine's /boot and modules.
doc=$root/tmp/doctor-612
mkdir -p "$doc/proc/sys/kernel"
echo "$k612" >"$doc/proc/sys/kernel/osrelease"
ln -s /boot "$doc/boot"
mkdir -p "$doc/lib" && ln -s /lib/modules "$doc/lib/modules"
out=$(in_root python3 /usr/libexec/nv_peer_mem/nv_peer_mem-doctor --root /tmp/doctor-612 --kernel-log /dev/null 2>&1)
if grep -q "^FAIL kernel.rust: the running kernel $k612 was built without Rust" <<<"$out"; then
	result PASS norust-kernel-doctor
else result FAIL norust-kernel-doctor "$(grep -m2 'kernel.rust\|installed' <<<"$out" | paste -sd ' ')"; fi
unmount_all
rm -rf --one-file-system "$root"

wait $boots
cat "$work/boots.out"
grep -q '^FAIL' "$work/boots.out" && failed=1
exit $failed
