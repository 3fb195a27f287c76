# shellcheck shell=sh
# Buffers for CQs/QPs go to the persistent client nv_mem_nc: its pins survive cudaFree until
# deregistration. R535+ pins with nvidia_p2p_get_pages_persistent, R515-R530 (only
# nvidia_p2p_cap_persistent_pages) with get_pages and a NULL callback; before R515 there is no
# nv_mem_nc and CQ buffers are refused.
check "load ($NV_GEN)" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
if nv_has_persistent; then
	check "nv_mem_nc registered" grep -q 'name=nv_mem_nc' $IBC/clients
	check "CQ buffer registered" ctl_ib "reg 5 edu0 $GPU_VA 0x40000 cq"
	check "backed by nv_mem_nc" grep -q 'id=5 .*client=nv_mem_nc' $IBC/regs
	dma_check 5 0x10000 "$GPU_VA + 0x10000"
	check "cudaFree while pinned" ctl_nv "free $GPU_VA"
	check "no free callback for a persistent pin" test "$(nv_stat callbacks)" = 0
	check "memory still there for the NIC" grep -q 'id=5 .*invalidated=0' $IBC/regs
	dma_check 5 0x10000 "$GPU_VA + 0x10000"
	check "deregister" ctl_ib "dereg 5"
else
	check "no nv_mem_nc registered" sh -c "! grep -q nv_mem_nc $IBC/clients"
	check "the log says why" sh -c 'dmesg | grep -q "client nv_mem_nc not registered"'
	expect_write_error "Bad address" "CQ buffer refused without a persistent client" $IBC/ctl "reg 5 edu0 $GPU_VA 0x10000 cq"
	check "MR still works" ctl_ib "reg 6 edu0 $GPU_VA 0x10000"
	check "deregister" ctl_ib "dereg 6"
	check "cudaFree" ctl_nv "free $GPU_VA"
fi
expect_nv_clean
check "unload" unload_world
finish
