#!/bin/bash
# Boot the test VM with the nvidia-peer-memory package's files in its root (ONBOOT=no in its
# config file), the module DKMS built in /lib/modules/<release>/updates/dkms and the fakes of
# nvidia, ib_core and nvidia_peermem, start the service at boot as sysvinit would, and run
# tests/service/*.py (or tests/<DIR>/*.py: the conflict job runs tests/conflict).
# usage: service-vm.sh KBUILD WORK SERVICE_DEB DKMS_KO FAKES_BUILD_DIR [DIR]
# Prints run-vm.sh's "PASS name" / "FAIL name ..." lines.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kbuild=$1 work=$2 deb=$3 ko=$4 fakes=$5 dir=${6:-service}
overlay=$work/$dir-root
initrd=$work/initramfs-$dir.cpio.gz

rm -rf "$overlay"
mkdir -p "$overlay/etc/nvpm"
dpkg-deb -x "$deb" "$overlay"
sed -i 's/^ONBOOT=.*/ONBOOT=no/' "$overlay/etc/infiniband/nv_peer_mem.conf"
sha256sum <"$ko" >"$overlay/etc/nvpm/dkms-module.sha256"

"$here/../vm/mkinitramfs.sh" --overlay "$overlay" "$kbuild" "$initrd" "$work/bars" \
	"$fakes/nvidia/nvidia.ko" "$fakes/ib_core/ib_core.ko" "$fakes/nvidia_peermem/nvidia_peermem.ko" \
	"updates/dkms/nv_peer_mem.ko=$ko"

mapfile -t scenarios < <(cd "$here/../$dir" && for f in *.py; do echo "${f%.py}"; done)
NVPM_VM_APPEND=nvpm.rc=1 "$here/../vm/run-vm.sh" "$kbuild" "$initrd" "$work/vm-$dir" "${scenarios[@]}"
