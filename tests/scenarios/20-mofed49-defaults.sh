# shellcheck shell=sh
# MLNX_OFED 4.9 LTS, as an admin meets it. With the default parameters nv_mem registers in the
# extended form, which 4.9 does not know: it reads ex_size as a callback pointer and skips nv_mem
# for every registration. Where nvidia.ko has persistent pages, nv_mem_nc (legacy form) then
# backs the MR: ibv_reg_mr works, but the GPU memory stays pinned through cudaFree and nothing
# is invalidated. Without persistent pages ibv_reg_mr fails with EFAULT. The load log names the
# parameter 4.9 needs; with peerdirect_support=1 nv_mem backs MRs and invalidates.
check "fake nvidia and an MLNX_OFED 4.9 core" sh -c 'modprobe nvidia && modprobe ib_core core_version=4'
klog_flush
check "nv_peer_mem with the default parameters" modprobe nv_peer_mem peerdirect_support=0
check "  the load log names the parameter 4.9 needs" sh -c 'dmesg | grep -q "nv_peer_mem: .*MLNX_OFED 4.9 needs peerdirect_support=1"'
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
if nv_has_persistent; then
	check "ibv_reg_mr works" ctl_ib "reg 1 edu0 $GPU_VA 0x40000"
	check "  but through nv_mem_nc: 4.9 skipped the extended nv_mem" grep -q 'id=1 .*client=nv_mem_nc' $IBC/regs
	check "cudaFree" ctl_nv "free $GPU_VA"
	check "  no invalidation: the GPU memory stays pinned until deregistration" \
		sh -c "test \"\$(sed -n 's/^pins //p' $NV/stats)\" = 1 && grep -q 'id=1 .*invalidated=0' $IBC/regs"
	check "deregister" ctl_ib "dereg 1"
	check "cudaMalloc again" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
else
	expect_write_error "Bad address" "ibv_reg_mr fails: 4.9 skips the extended nv_mem, and there is no nv_mem_nc" \
		$IBC/ctl "reg 1 edu0 $GPU_VA 0x40000"
fi
check "  no context kept" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "rmmod" rmmod nv_peer_mem
check "nv_peer_mem peerdirect_support=1" modprobe nv_peer_mem peerdirect_support=1
check "  nv_mem registered in the legacy form" grep -q 'name=nv_mem .*ex=0 flags=0x0 invalidate=1' $IBC/clients
check "register" ctl_ib "reg 2 edu0 $GPU_VA 0x40000"
check "  backed by nv_mem" grep -q 'id=2 .*client=nv_mem ' $IBC/regs
dma_check 2 0x30000 "$GPU_VA + 0x30000"
check "cudaFree: 4.9 unmaps and releases inside the invalidation" ctl_nv "free $GPU_VA"
check "  ib_core unmapped inside" test "$(ib_stat unmaps_in_invalidate)" = 1
ctl_ib "dereg 2" 2>/dev/null
check "module reference dropped" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean
check "unload" unload_world
finish
