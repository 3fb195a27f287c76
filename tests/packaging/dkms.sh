#!/bin/bash
# DKMS for real: add, build and install the module source that the nvidia-peer-memory-dkms
# package ships, against a test kernel tree, with dkms' trees kept in WORK (nothing is written
# to /var/lib/dkms or /lib/modules). Also: a kernel without Rust is skipped by
# BUILD_EXCLUSIVE_CONFIG, and autoinstall (what runs after a kernel upgrade) rebuilds it.
# usage: dkms.sh DKMS_DEB KBUILD WORK OFA_SYMVERS NV_SYMVERS
# Prints "PASS dkms:<release>:<check>" / "FAIL ..." lines; the installed module ends up in
# WORK/lib-modules/<release>/updates/dkms/nv_peer_mem.ko.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../kernel/env.sh"
deb=$1 kbuild=$2 work=$3 ofa_symvers=$4 nv_symvers=$5
krel=$(cat "$kbuild/include/config/kernel.release")
log=$work/dkms.log
failed=0
result() { # result PASS|FAIL check [detail]
	echo "$1 dkms:$krel:$2${3:+: $3}"
	[ "$1" = PASS ] || failed=1
}

rm -rf "$work"
mkdir -p "$work/pkg" "$work/tree" "$work/lib-modules/$krel"
: >"$log"
dpkg-deb -x "$deb" "$work/pkg"
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$work"/pkg/usr/src/nv_peer_mem-*/dkms.conf)
trees=(--dkmstree "$work/tree" --sourcetree "$work/pkg/usr/src" --installtree "$work/lib-modules")
mod=(-m nv_peer_mem -v "$version")

# What an admin's environment provides on a real host: a clang-built kernel means clang and
# ld.lld on PATH (dkms passes CC=clang LD=ld.lld), and the symbol versions of MLNX_OFED and
# the NVIDIA driver (here: the fakes').
export PATH=$LLVM_DIR/bin:$PATH RUSTC=$HOST_RUSTC LLVM=$LLVM_DIR/bin/ \
	EXTRA_KMAKE="BINDGEN=$BINDGEN" OFA_SYMVERS=$ofa_symvers NV_SYMVERS=$nv_symvers

run() { echo "+ dkms $*" >>"$log"; dkms "$@" "${trees[@]}" >>"$log" 2>&1; }

if run add "${mod[@]}"; then result PASS add; else result FAIL add "see $log"; fi
if run build "${mod[@]}" -k "$krel" --kernelsourcedir "$kbuild"; then result PASS build
else result FAIL build "$(tail -5 "$work/tree/nv_peer_mem/$version/build/make.log" 2>/dev/null)"; fi
ko=$work/lib-modules/$krel/updates/dkms/nv_peer_mem.ko
if run install "${mod[@]}" -k "$krel" --kernelsourcedir "$kbuild" --no-depmod && [ -f "$ko" ]; then
	result PASS install
else result FAIL install "no $ko; see $log"; fi
status=$(dkms status "${trees[@]}" 2>&1)
if grep -q "nv_peer_mem/$version, $krel, .*: installed" <<<"$status"; then result PASS status
else result FAIL status "$status"; fi
if [ "$(modinfo -F version "$ko" 2>/dev/null)" = "$version" ]; then result PASS module-version
else result FAIL module-version "modinfo says '$(modinfo -F version "$ko" 2>&1)', dkms.conf $version"; fi

# A kernel for which the NVIDIA driver is missing: skipped with nv_peer_mem's reason (dkms.conf
# asks make prerequisites), not failed, so that no apt run fails for it.
run uninstall "${mod[@]}" -k "$krel" --no-depmod
rm -rf "$work/tree/nv_peer_mem/$version/$krel"
NV_SYMVERS=$work/no-nvidia.symvers run build "${mod[@]}" -k "$krel" --kernelsourcedir "$kbuild"
rc=$?
if [ $rc = 77 ] && grep -q "^nv_peer_mem: no nvidia.ko with the P2P API .* for kernel $krel" "$log" &&
	grep -q "^nv_peer_mem: 1 problem(s) above: skipped for kernel $krel, not failed; once they are fixed: dkms autoinstall -k $krel" "$log" &&
	[ ! -e "$work/no-nvidia.symvers" ]; then
	result PASS skips-kernel-without-nvidia
else result FAIL skips-kernel-without-nvidia "dkms exit $rc: $(grep '^nv_peer_mem:' "$log" | tail -3 | paste -sd ' ')"; fi

# After a kernel upgrade dkms autoinstall builds every AUTOINSTALL module for the new kernel:
# forget this kernel's build (as for a kernel never seen) and let autoinstall do it.
run uninstall "${mod[@]}" -k "$krel" --no-depmod
rm -rf "$work/tree/nv_peer_mem/$version/$krel"
if [ ! -f "$ko" ] && run autoinstall -k "$krel" --kernelsourcedir "$kbuild" --no-depmod && [ -f "$ko" ]; then
	result PASS autoinstall
else result FAIL autoinstall "see $log"; fi

# A kernel built without Rust: skipped by BUILD_EXCLUSIVE_CONFIG (dkms exit 77), not a failure.
norust=$work/kernel-without-rust
mkdir -p "$norust/include/config"
echo '# CONFIG_RUST is not set' >"$norust/.config"
echo 6.1.0-28-amd64 >"$norust/include/config/kernel.release"
echo 'all:' >"$norust/Makefile"
run build "${mod[@]}" -k 6.1.0-28-amd64 --kernelsourcedir "$norust"
rc=$?
if [ $rc = 77 ] && tail -3 "$log" | grep -q BUILD_EXCLUSIVE; then result PASS skips-kernel-without-rust
else result FAIL skips-kernel-without-rust "dkms exit $rc: $(tail -3 "$log")"; fi

exit $failed
