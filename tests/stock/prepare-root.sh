#!/bin/bash
# The stock world's Debian 13 root, as an administrator sets one up: debootstrap trixie, then
# from Debian's archive only: the newest trixie-backports 7.x kernel (linux-image and
# linux-headers, amd64 flavour), systemd as init, udev, dkms, initramfs-tools, and what
# completing the headers' Rust build tree needs (scripts/nv_peer_mem-rust-tree): trixie's own
# rustc and rust-src (not backports': CONFIG_RUSTC_VERSION_TEXT names trixie's), bindgen, the
# kernel's build tools and the linux-source package of the kernel's version. Plus busybox (the
# scenarios run in its sh, as in the other worlds) and python3 (nv_peer_mem doctor).
# usage: prepare-root.sh   (as root)   prints the prepared root's directory
# The root is cached in $NVPM_CACHE/stock/, keyed by the kernel's version and this script.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../kernel/env.sh"
cache=$NVPM_CACHE/stock
mkdir -p "$cache"
log=$cache/prepare.log
# One preparation at a time (the stock and the Secure Boot worlds start together): the second
# waits, then finds the root cached.
exec 9>"$cache/.prepare.lock"
flock 9

mirror=$(debian_mirror)
[ -n "$mirror" ] || die "no Debian mirror in the host's apt sources; set NVPM_DEBIAN_MIRROR"

# The newest 7.x kernel of trixie-backports, from the private package lists (env.sh).
refresh_lists || [ -f "$apt_dir/sources.list" ] || die "no Debian package lists in $apt_dir"
kver=${NVPM_STOCK_KVER:-$(apt-cache "${apt_opts[@]}" search --names-only '^linux-image-7\.[0-9.]+\+deb13-amd64$' |
	sed -n 's/^linux-image-\([^ ]*\) .*/\1/p' | sort -V | tail -n 1)}
[ -n "$kver" ] || die "no linux-image-7.*-amd64 in trixie-backports"
kline=$(echo "$kver" | cut -d. -f1,2)
# The name says what is in it: change the v number when the preparation below changes.
key=$kver-v1
root=$cache/root-$key
if [ -f "$root/.done" ]; then
	echo "$root"
	exit 0
fi
rm -rf --one-file-system "$cache"/root-*
say "preparing the stock Debian 13 root with $kver (once; cached in $root)"
: >"$log"
mkdir -p "$root"
start=$SECONDS
debootstrap --variant=minbase --components=main trixie "$root" "$mirror" >>"$log" 2>&1 ||
	die "debootstrap failed; see $log"
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror trixie main
deb $mirror trixie-updates main
deb $mirror trixie-backports main
EOF

in_root() { in_chroot "$root" "$@"; }
mount -t proc proc "$root/proc"
trap 'umount -l "$root/proc" 2>/dev/null || true' EXIT
# Nothing may start a service inside the root while it is prepared.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
in_root apt-get update -q >>"$log" 2>&1 || die "apt-get update in the root failed; see $log"
install() { # install [-t SUITE] PACKAGE...
	in_root apt-get install -y -q --no-install-recommends "$@" >>"$log" 2>&1 ||
		die "apt-get install $* failed; see $log"
}
# The kernel the way Debian documents backports: -t trixie-backports, for the kernel alone (it
# needs backports' linux-base and libelf, so libelf-dev must come along). Everything else from
# trixie itself: backports' rustc is not the one that built the kernel.
# The system first: the kernel's initramfs is made by initramfs-tools, for a systemd system.
install systemd-sysv udev kmod initramfs-tools
install -t trixie-backports "linux-image-$kver" "linux-headers-$kver" libelf-dev
install dkms busybox python3 procps \
	rustc rust-src bindgen "linux-source-$kline" make bc bison flex libssl-dev xz-utils
rm -f "$root/usr/sbin/policy-rc.d"
in_root apt-get clean >>"$log" 2>&1

# A machine: its disk is /dev/vda, its console the serial port, root logs in without password
# (the console is only for reading what happened).
echo "/dev/vda / ext4 defaults 0 1" >"$root/etc/fstab"
echo stock >"$root/etc/hostname"
in_root passwd -d root >>"$log" 2>&1
# virtio's disk and ext4 in the initrd whatever the host looked like at install time.
echo "MODULES=most" >"$root/etc/initramfs-tools/conf.d/nvpm-stock"
in_root update-initramfs -u -k "$kver" >>"$log" 2>&1 || die "update-initramfs failed; see $log"
[ -f "$root/boot/vmlinuz-$kver" ] && [ -f "$root/boot/initrd.img-$kver" ] ||
	die "no kernel or initrd in $root/boot"
echo "$kver" >"$root/.kver"
touch "$root/.done"
say "prepared in $((SECONDS - start)) s"
echo "$root"
