#!/bin/bash
# Boot the test kernel in QEMU (TCG, q35 + intel-iommu, two ivshmem "GPUs", two edu "NICs",
# optionally one pair behind a PCIe switch)
# with an initramfs, run the named scenarios, and report each one as PASS or FAIL.
# usage: run-vm.sh KBUILD INITRAMFS WORKDIR SCENARIO...
# NVPM_VM_APPEND adds kernel command line words (nvpm.rc=1: boot-time service start;
# nvpm.nvidia=r470|r515|r535|r580 and nvpm.ibcore=4.9|24.x: the emulated driver and core).
# NVPM_VM_DISK boots a whole system instead (the stock world, tests/stock/): that raw disk
# image is /dev/vda and the root file system, KBUILD is then the kernel image to boot and
# INITRAMFS the system's own initrd. NVPM_VM_ROOT names the root file system's device then
# (default /dev/vda).
# NVPM_VM_UEFI=DIR (with NVPM_VM_DISK; the Secure Boot world, tests/secureboot/): the disk boots
# through UEFI firmware and its own boot loader instead of -kernel (KBUILD and INITRAMFS then
# only locate the BARs' directory, as for the stock world). DIR holds code.fd (the firmware,
# read-only), vars.fd (its variables; this boot writes a copy) and set-cmdline, run as
# "set-cmdline DISK CMDLINE" before the boot to put the command line where the boot loader reads it.
# Prints "PASS name" / "FAIL name (reason)" lines; exit status 0 when all passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kbuild=$1 initrd=$2 work=$3
shift 3
scenarios=("$@")
mkdir -p "$work"
log=$work/console.log

# Fresh GPU memory for every boot: scenarios may DMA-write into it. NVPM_GPU_MIB (make bench)
# gives BARs of that size, zero-filled (the host's checksums then do not apply).
bar=16
for g in 0 1; do
	if [ -n "${NVPM_GPU_MIB:-}" ]; then
		bar=$NVPM_GPU_MIB
		rm -f "$work/gpu$g.img"
		truncate -s "${bar}M" "$work/gpu$g.img"
	else
		cp "$(dirname "$initrd")/bars/gpu$g.img" "$work/gpu$g.img"
	fi
done

# Where the devices sit. flat (default): every GPU and NIC on the root complex, the machine the
# registration and race scenarios were validated on. switch (NVPM_VM_TOPOLOGY=switch, used for
# the doctor): gpu1 and edu1 (NIC) behind one PCIe switch (x3130) under root port rp0
# (nvidia-smi topo: PIX), gpu0 and edu0 on the root complex (PHB with every other device).
# server (NVPM_VM_TOPOLOGY=server, the registration and race scenarios of one world a kernel
# line, tests/run.sh): gpu0 and edu0, the pair the scenarios use, behind one PCIe switch under
# root port rp0, gpu1 and edu1 on root ports of their own; gpu0 and edu0 land in IOMMU groups
# of their own (each with its downstream port). The fakes name devices in probe order, bus 0 first, and gpuN
# must be backed by gpuN.img.
# shellcheck disable=SC2054 # commas inside QEMU options
switch_rp0=( # one PCIe switch under root port rp0, downstream ports sw0p0 and sw0p1
	-device pcie-root-port,id=rp0,bus=pcie.0,chassis=1,slot=0,addr=0x4
	-device x3130-upstream,id=sw0,bus=rp0
	-device xio3130-downstream,id=sw0p0,bus=sw0,chassis=2,slot=0
	-device xio3130-downstream,id=sw0p1,bus=sw0,chassis=3,slot=0
)
# shellcheck disable=SC2054 # the same, for the topologies below
case ${NVPM_VM_TOPOLOGY:-flat} in
switch)
	topology=(
		-object "memory-backend-file,id=gpu0,size=${bar}M,share=on,mem-path=$work/gpu0.img"
		-device ivshmem-plain,memdev=gpu0,bus=pcie.0,addr=0x10
		-device edu,dma_mask=0xffffffffffffffff,bus=pcie.0,addr=0x11
		"${switch_rp0[@]}"
		-object "memory-backend-file,id=gpu1,size=${bar}M,share=on,mem-path=$work/gpu1.img"
		-device ivshmem-plain,memdev=gpu1,bus=sw0p0
		-device edu,dma_mask=0xffffffffffffffff,bus=sw0p1
	)
	;;
server)
	topology=(
		"${switch_rp0[@]}"
		-device pcie-root-port,id=rp1,bus=pcie.0,chassis=4,slot=0,addr=0x5
		-device pcie-root-port,id=rp2,bus=pcie.0,chassis=5,slot=0,addr=0x6
		-object "memory-backend-file,id=gpu0,size=${bar}M,share=on,mem-path=$work/gpu0.img"
		-device ivshmem-plain,memdev=gpu0,bus=sw0p0
		-object "memory-backend-file,id=gpu1,size=${bar}M,share=on,mem-path=$work/gpu1.img"
		-device ivshmem-plain,memdev=gpu1,bus=rp1
		-device edu,dma_mask=0xffffffffffffffff,bus=sw0p1
		-device edu,dma_mask=0xffffffffffffffff,bus=rp2
	)
	;;
*)
	topology=(
		-object "memory-backend-file,id=gpu0,size=${bar}M,share=on,mem-path=$work/gpu0.img"
		-device ivshmem-plain,memdev=gpu0
		-object "memory-backend-file,id=gpu1,size=${bar}M,share=on,mem-path=$work/gpu1.img"
		-device ivshmem-plain,memdev=gpu1
		-device edu,dma_mask=0xffffffffffffffff
		-device edu,dma_mask=0xffffffffffffffff
	)
	;;
esac
# A boot's time limit: 300 s to boot, 150 for the kmemleak scan, 90 a scenario, 40 minutes more
# for the in-kernel stress (29) and 60 for the fault-injection sweep (30): about 250 runs, 7 s of
# a core each under a loaded make check (2026-11-25: 20 minutes were not enough beside the stock
# world's boots). The scan had no share until CI of a72cf9b: the switch machine, booting in
# 160 s beside other VMs and running its one scenario in 133 s, was stopped at 390 s in it.
budget=$((450 + 90 * ${#scenarios[@]}))
for s in "${scenarios[@]}"; do
	case $s in
	*-stress) budget=$((budget + 2400)) ;;
	*-sweep) budget=$((budget + 3600)) ;;
	esac
done
timeout_s=${NVPM_VM_TIMEOUT:-$budget}
list=$(IFS=,; echo "${scenarios[*]}")
if [ -n "${NVPM_VM_DISK:-}" ]; then
	kernel=$kbuild
	system=(-drive "file=$NVPM_VM_DISK,format=raw,if=virtio")
	root_args="root=${NVPM_VM_ROOT:-/dev/vda} rw systemd.show_status=0"
else
	kernel=$kbuild/arch/x86/boot/bzImage
	system=()
	# The test kernels: KASAN reports every bug, not only the first (a stock kernel has no
	# KASAN and would hand the word to systemd).
	root_args=kasan_multi_shot
fi
# 4-level paging (la57=off). With 5-level paging the test kernels (Debian's 7.3.4 source) can
# hang in early boot: identify_cpu() zeroes boot_cpu_data's capabilities before reading them
# back from CPUID, so for that moment pgtable_l5_enabled() is false, KASAN's
# addr_has_metadata() takes every direct-map address (0xff11...) for a wild one, and a timer
# interrupt then reports each access it makes; with kasan_multi_shot the reports never end and
# /init is never reached (2026-11-25: 3 boots of about 20 hung until their time limit, 0 of 8
# with la57=off; found with loglevel=8, the stack ends in identify_boot_cpu).
# no_timer_check: on a loaded host a TCG machine can miss the ticks the kernel counts to check
# that the IO-APIC timer works, and panics ("timer doesn't work through Interrupt-remapped
# IO-APIC"; three sessions met it at load 15 on 2026-11-27). The check tests QEMU, not the module.
cmdline="console=ttyS0 panic=-1 loglevel=1 log_buf_len=16M intel_iommu=on iommu.strict=1 kasan.fault=report no_timer_check ${root_args:+$root_args }nvpm.scenarios=$list${NVPM_VM_APPEND:+ $NVPM_VM_APPEND}"
machine=q35,kernel-irqchip=split
iommu=intel-iommu,intremap=on
# shellcheck disable=SC2054 # commas inside QEMU options
if [ -n "${NVPM_VM_UEFI:-}" ]; then
	# Secure Boot firmware needs SMM, and its variable store writable only from SMM.
	machine=$machine,smm=on
	# OVMF puts 64-bit BARs above 512 GiB (the GPUs' at 0xc000000000), beyond the IOMMU's
	# default 39-bit address width: the NIC's DMA through it read zeros (2026-11-27). 48 bits.
	iommu=$iommu,aw-bits=48
	"$NVPM_VM_UEFI/set-cmdline" "$NVPM_VM_DISK" "$cmdline" || { echo "FAIL boot (set-cmdline failed)"; exit 1; }
	boot=(-global driver=cfi.pflash01,property=secure,value=on
		-drive "if=pflash,format=raw,unit=0,readonly=on,file=$NVPM_VM_UEFI/code.fd"
		-drive "if=pflash,format=raw,unit=1,file=$work/vars.fd")
else
	boot=(-kernel "$kernel" -initrd "$initrd" -append "$cmdline")
fi
# -vga none: no display adapter. With QEMU's default VGA the stock kernel binds bochs-drm, whose
# vblank wait times out on a slow TCG machine and WARNs (drm_crtc_wait_one_vblank, CI of bb445d8,
# 2026-11-28, in stock-purge): a report from the machine, not from the module.
# At most NVPM_VM_MAX machines at a time on this host (default: two a core), whoever starts them:
# the runner's boots hold its VM slots, but the worlds (stock, secureboot, upgrade, flavours)
# boot machines of their own beside their chroot work. Unbounded, a warm make check reached six
# QEMUs at load 12 on 2 cores, and the stock world's first boot starved in early boot (udev at
# 980 s, soft lockups, no root disk; make check of 159efe7, 2026-11-29). Each machine holds a
# lock on one of NVPM_VM_MAX files in NVPM_VM_SLOT_DIR while it runs; waiting does not count
# against its time limit.
take_machine_slot() {
	local dir=${NVPM_VM_SLOT_DIR:-/tmp/nv_peer_mem-rs-vm-slots} max=${NVPM_VM_MAX:-$((2 * $(nproc)))} i said=
	if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then
		echo "vm: $dir is not writable: no limit on machines" >&2
		return 0
	fi
	while :; do
		for ((i = 1; i <= max; i++)); do
			exec {slot_fd}>>"$dir/slot-$i"
			if flock -n "$slot_fd"; then
				[ -z "$said" ] || echo "vm: got machine slot $i after $((SECONDS - said)) s" >&2
				return 0
			fi
			exec {slot_fd}>&-
		done
		[ -n "$said" ] || { said=$SECONDS; echo "vm: $max machines running on this host: waiting for one to end" >&2; }
		sleep 3
	done
}
boot_once() {
	[ -z "${NVPM_VM_UEFI:-}" ] || cp "$NVPM_VM_UEFI/vars.fd" "$work/vars.fd"
	start=$SECONDS
	timeout --foreground "$timeout_s" qemu-system-x86_64 \
		-accel tcg -machine "$machine" -cpu max,la57=off -m 1G -smp 2 \
		-device "$iommu" \
		-nographic -vga none -no-reboot -serial stdio -monitor none -nic none \
		"${boot[@]}" "${topology[@]}" "${system[@]}" \
		</dev/null >"$log" 2>&1
	qrc=$?
	echo "vm: ${#scenarios[@]} scenarios in $((SECONDS - start)) s (qemu exit $qrc), log $log" >&2
}
# An "Oops: int3" in early boot, before any module is loaded: Debian's kernels died so right
# after "clocksource: Switched to clocksource tsc" (about 3 s in), in timekeeping code whose
# instruction bytes the kernel patches at that moment (a static key: text_poke_bp plants int3
# while it rewrites): the other vCPU met the breakpoint of a patch under way, which points at
# how TCG's vCPU threads see code modified by one another, not at anything of ours (stock 1 in
# 5 upgrade boots on 2026-11-28, rt once in the flavours world on 2026-11-29; the test kernels
# never). The disk is not yet mounted then. Such a boot is made again, once, said on stderr and
# kept as console-emulator-crash.log; any other crash, or one with a module loaded, is judged
# as it is.
emulator_crash() {
	grep -q 'Oops: int3' "$log" && ! grep 'Modules linked in:' "$log" | grep -q 'in: *[a-z]'
}
take_machine_slot
boot_once
if emulator_crash; then
	mv "$log" "$work/console-emulator-crash.log"
	echo "vm: the kernel met QEMU's int3 during text patching before any module was loaded ($work/console-emulator-crash.log): booting again, once" >&2
	boot_once
fi

python3 "$here/parse-log.py" "$log" "${scenarios[@]}"
