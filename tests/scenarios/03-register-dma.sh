# shellcheck shell=sh
# The main path: register a GPU buffer for a NIC, the NIC DMA-reads it and sees the data the
# host wrote into the GPU's BAR, deregister, and every pin is gone.
check "load" load_world
check "cudaMalloc 2 MiB (shuffled pages)" ctl_nv "alloc $GPU_VA 0x200000 shuffled"
check "ibv_reg_mr on the GPU buffer" ctl_ib "reg 1 edu0 $GPU_VA 0x200000"
check "backed by nv_mem, 32 GPU pages of 64 KiB" grep -q 'id=1 .*client=nv_mem .*page_size=0x10000 .*sg_bytes=0x200000 ' $IBC/regs
n=$(sed -n 's/^id=1 .* nents=\([0-9]*\) .*/\1/p' $IBC/regs)
check "  in 1 to 32 sg entries ($n: runs of contiguous DMA addresses)" test "${n:-0}" -ge 1 -a "${n:-0}" -le 32
check "one pin in nvidia" test "$(nv_stat pins)" = 1
check "one DMA mapping in nvidia" test "$(nv_stat mappings)" = 1
check "registration holds a module reference" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 1
for off in 0 0x1000 0x10000 0xff000 0x100000 0x1f0000 0x1ff000; do
	dma_check 1 $off "$GPU_VA + $off"
done
check "memory_peers counts the registration" test "$(peer_counter nv_mem num_alloc_mrs)" = 1
check "memory_peers counts 2 MiB" test "$(peer_counter nv_mem num_reg_bytes)" = $((0x200000))
check "nv_peer_mem counts it: 1 live, 2 MiB pinned, 1 registered" \
	test "$(nvpm_stat nv_mem live_registrations):$(nvpm_stat nv_mem pinned_bytes):$(nvpm_stat nv_mem registrations)" = "1:$((0x200000)):1"
check "deregister" ctl_ib "dereg 1"
expect_nv_clean "after deregistration"
check "module reference dropped" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "memory_peers counts the deregistration" test "$(peer_counter nv_mem num_dealloc_mrs)" = 1
check "nv_peer_mem counts the deregistration, nothing live" \
	test "$(nvpm_stat nv_mem deregistrations):$(nvpm_stat nv_mem live_registrations):$(nvpm_stat nv_mem pinned_bytes)" = 1:0:0
check "free the buffer: no callback for a released registration" ctl_nv "free $GPU_VA"
check "no free callback ran" test "$(nv_stat callbacks)" = 0
check "unload" unload_world
finish
