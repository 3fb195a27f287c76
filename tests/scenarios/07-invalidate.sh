# shellcheck shell=sh
# cudaFree under a live registration (extended client, PEER_MEM_INVALIDATE_UNMAPS): NVIDIA's
# free callback invalidates through ib_core, the NIC loses access, and the client unmaps and
# unpins by itself; the later deregistration finds nothing left to do.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x100000 shuffled"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x100000"
dma_check 1 0x20000 "$GPU_VA + 0x20000"
check "cudaFree with the registration live" ctl_nv "free $GPU_VA"
check "free callback ran" test "$(nv_stat callbacks)" = 1
check "ib_core got the invalidation" grep -q "id=1 .*invalidated=1" $IBC/regs
check "memory_peers counts it" test "$(peer_counter nv_mem num_free_callbacks)" = 1
check "ib_core did not unmap (UNMAPS client)" test "$(ib_stat unmaps_in_invalidate)" = 0
expect_write_error "Input/output error" "NIC DMA refused after invalidation" $IBC/ctl "read 1 0 4096"
expect_nv_clean "right after the callback"
check "deregister the invalidated MR" ctl_ib "dereg 1"
check "module reference dropped" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "after deregistration"
check "unload" unload_world
finish
