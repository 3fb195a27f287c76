# shellcheck shell=sh
# What `make demo` shows inside the emulated world.
say() { echo "demo: $*"; }
# count_pci VENDOR DEVICE: PCI functions with that id.
count_pci() {
	n=0
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor")$(cat "$d/device")" = "$1$2" ] && n=$((n + 1))
	done
	echo $n
}
service() { /etc/init.d/nv_peer_mem "$@" 2>&1 | sed 's/^/demo:   /'; }
say "kernel $(uname -r); GPUs: $(count_pci 0x1af4 0x1110) (ivshmem BARs), NICs: $(count_pci 0x1234 0x11e8) (edu)"
say "service nv_peer_mem start:"
service start
grep -q '^nv_peer_mem ' /proc/modules || { not_ok "the service did not load nv_peer_mem"; finish; }
say "loaded with its dependencies (modprobe):"
grep -E '^(nv_peer_mem|ib_core|nvidia) ' /proc/modules | awk '{print "demo:   " $1 " (used by " $3 ")"}'
say "peer memory clients in ib_core: $(sed -n 's/^name=\([^ ]*\) version=\([^ ]*\).*/\1 (\2)/p' $IBC/clients | tr '\n' ' ')"
ctl_nv "alloc $GPU_VA 0x400000 shuffled"
say "cudaMalloc: 4 MiB of GPU memory at $GPU_VA (64 pages, shuffled in the BAR)"
ctl_ib "reg 1 edu0 $GPU_VA 0x400000" || not_ok "registration failed"
say "ibv_reg_mr for NIC edu0: $(sed -n 's/^id=1 //p' $IBC/regs)"
for off in 0 0x1ff000 0x3ff000; do
	ctl_ib "read 1 $off 4096"
	got=$(sha256sum <$IBC/dma_buf) got=${got%% *}
	want=$(expected_sha "$GPU_VA + $off")
	if [ "$got" = "$want" ]; then say "NIC DMA-read 4 KiB at +$off: matches what the host wrote into the GPU BAR"
	else not_ok "NIC DMA-read at +$off: got $got, host wrote $want"; fi
done
say "service nv_peer_mem status:"
service status
say "nvidia.ko: pins $(nv_stat pins), DMA mappings $(nv_stat mappings)"
ctl_nv "free $GPU_VA"
say "cudaFree under the live registration: invalidated=$(sed -n 's/^id=1 .*invalidated=\([01]\).*/\1/p' $IBC/regs), free callbacks counted by ib_core=$(peer_counter nv_mem num_free_callbacks)"
ctl_ib "dereg 1"
say "deregistered; pins left in nvidia: $(nv_stat pins), mappings: $(nv_stat mappings)"
say "service nv_peer_mem stop:"
service stop
grep -q '^nv_peer_mem ' /proc/modules && not_ok "the service did not unload nv_peer_mem"
finish
