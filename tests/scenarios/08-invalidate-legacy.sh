# shellcheck shell=sh
# The same with peerdirect_support=1 (legacy registration for MLNX_OFED 4.9 era cores): ib_core
# calls dma_unmap and put_pages from inside the invalidation, on the callback's thread, where
# they must be no-ops; and with an MLNX_OFED 4.x core that also calls release from there.
for core in 5 4; do
	check "load (core $core, legacy client)" load_world "" "core_version=$core" "peerdirect_support=1"
	check "nv_mem registered in legacy form" grep -q 'name=nv_mem .*ex=0 flags=0x0 invalidate=1' $IBC/clients
	check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x80000 contiguous"
	check "register" ctl_ib "reg 1 edu1 $(hex "$GPU_VA + 0x800") 0x7f000"
	dma_check 1 0x1f800 "$GPU_VA + 0x20000"
	check "cudaFree" ctl_nv "free $GPU_VA"
	check "ib_core unmapped inside the invalidation" test "$(ib_stat unmaps_in_invalidate)" -ge 1
	expect_nv_clean "after the callback (core $core)"
	check "deregister" ctl_ib "dereg 1"
	check "module reference dropped" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
	check "unload" unload_world
done
finish
