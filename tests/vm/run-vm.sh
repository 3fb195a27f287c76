#!/bin/bash
# Boot the test kernel in QEMU (TCG, q35 + intel-iommu, two ivshmem "GPUs", two edu "NICs")
# with an initramfs, run the named scenarios, and report each one as PASS or FAIL.
# usage: run-vm.sh KBUILD INITRAMFS WORKDIR SCENARIO...
# NVPM_VM_APPEND adds kernel command line words (nvpm.rc=1: boot-time service start;
# nvpm.nvidia=r470|r515|r535|r580 and nvpm.ibcore=4.9|24.x: the emulated driver and core).
# Prints "PASS name" / "FAIL name (reason)" lines; exit status 0 when all passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kbuild=$1 initrd=$2 work=$3
shift 3
scenarios=("$@")
mkdir -p "$work"
log=$work/console.log

# Fresh GPU memory for every boot: scenarios may DMA-write into it.
for g in 0 1; do
	cp "$(dirname "$initrd")/bars/gpu$g.img" "$work/gpu$g.img"
done

timeout_s=${NVPM_VM_TIMEOUT:-$((300 + 90 * ${#scenarios[@]}))}
list=$(IFS=,; echo "${scenarios[*]}")
start=$SECONDS
timeout --foreground "$timeout_s" qemu-system-x86_64 \
	-accel tcg -machine q35,kernel-irqchip=split -cpu max -m 1G -smp 2 \
	-device intel-iommu,intremap=on \
	-nographic -no-reboot -serial stdio -monitor none -nic none \
	-kernel "$kbuild/arch/x86/boot/bzImage" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 loglevel=1 intel_iommu=on iommu.strict=1 kasan.fault=report nvpm.scenarios=$list${NVPM_VM_APPEND:+ $NVPM_VM_APPEND}" \
	-object memory-backend-file,id=gpu0,size=16M,share=on,mem-path="$work/gpu0.img" \
	-device ivshmem-plain,memdev=gpu0 \
	-object memory-backend-file,id=gpu1,size=16M,share=on,mem-path="$work/gpu1.img" \
	-device ivshmem-plain,memdev=gpu1 \
	-device edu,dma_mask=0xffffffffffffffff \
	-device edu,dma_mask=0xffffffffffffffff \
	</dev/null >"$log" 2>&1
qrc=$?
echo "vm: ${#scenarios[@]} scenarios in $((SECONDS - start)) s (qemu exit $qrc), log $log" >&2

python3 "$here/parse-log.py" "$log" "${scenarios[@]}"
