# shellcheck shell=sh
# What `make demo` shows inside the emulated world.
say() { echo "demo: $*"; }
say "kernel $(uname -r); GPUs: $(grep -c . /sys/bus/pci/drivers/fake_nvidia/*/vendor 2>/dev/null || echo '?') ivshmem BARs, NICs: edu devices"
modprobe nv_peer_mem || { not_ok "modprobe nv_peer_mem failed"; finish; }
say "modprobe nv_peer_mem: loaded; lsmod:"
grep -E '^(nv_peer_mem|ib_core|nvidia) ' /proc/modules | awk '{print "demo:   " $1 " (used by " $3 ")"}'
say "peer memory clients: $(ls $PEERS | tr '\n' ' ')(version $(cat $PEERS/nv_mem/version))"
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
say "nvidia: $(tr '\n' ' ' <$NV/stats)"
say "memory_peers/nv_mem: alloc_mrs=$(peer_counter nv_mem num_alloc_mrs) reg_bytes=$(peer_counter nv_mem num_reg_bytes)"
ctl_nv "free $GPU_VA"
say "cudaFree under the live registration: invalidated=$(sed -n 's/^id=1 .*invalidated=\([01]\).*/\1/p' $IBC/regs), free callbacks=$(peer_counter nv_mem num_free_callbacks)"
ctl_ib "dereg 1"
say "deregistered; pins left in nvidia: $(nv_stat pins), mappings: $(nv_stat mappings)"
rmmod nv_peer_mem && say "rmmod nv_peer_mem: unloaded"
finish
