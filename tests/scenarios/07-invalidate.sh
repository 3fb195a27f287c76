# shellcheck shell=sh
# cudaFree under a live registration: NVIDIA's free callback invalidates through ib_core and the
# NIC loses access. With the extended client (5.x/24.x, PEER_MEM_INVALIDATE_UNMAPS) the client
# unmaps and unpins by itself; MLNX_OFED 4.9 calls dma_unmap and put_pages inside the
# invalidation. Either way nothing is left in nvidia, and the deregistration finds nothing to do.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x100000 shuffled"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x100000"
dma_check 1 0x20000 "$GPU_VA + 0x20000"
check "cudaFree with the registration live" ctl_nv "free $GPU_VA"
check "free callback ran" test "$(nv_stat callbacks)" = 1
check "ib_core got the invalidation" test "$(ib_stat invalidations)" = 1
check "ib_core counts the free callback" test "$(peer_counter nv_mem num_free_callbacks)" = 1
check "nv_peer_mem counts 1 invalidation, nothing live" \
	test "$(nvpm_stat nv_mem invalidations):$(nvpm_stat nv_mem live_registrations)" = 1:0
if core_is_49; then
	check "ib_core (4.9) unmapped inside the invalidation" test "$(ib_stat unmaps_in_invalidate)" = 1
else
	check "ib_core did not unmap (UNMAPS client)" test "$(ib_stat unmaps_in_invalidate)" = 0
	check "the registration shows invalidated" grep -q "id=1 .*invalidated=1" $IBC/regs
	expect_write_error "Input/output error" "NIC DMA refused after invalidation" $IBC/ctl "read 1 0 4096"
fi
expect_nv_clean "right after the callback"
ctl_ib "dereg 1" 2>/dev/null # 4.9 released it inside the invalidation already
check "no registration left" test -z "$(cat $IBC/regs)"
check "module reference dropped" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "after deregistration"
check "unload" unload_world
finish
