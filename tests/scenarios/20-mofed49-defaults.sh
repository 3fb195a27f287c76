# shellcheck shell=sh
# MLNX_OFED 4.9 LTS, as an admin meets it. With the default parameters nv_mem registers in the
# extended form, which 4.9 does not know: it reads ex_size as a callback pointer and skips the
# client for every registration, so ibv_reg_mr fails with EFAULT. The load log says which
# parameter 4.9 needs. With peerdirect_support=1 registrations work.
check "fake nvidia and an MLNX_OFED 4.9 core" sh -c 'modprobe nvidia && modprobe ib_core core_version=4'
dmesg -c >/dev/null
check "nv_peer_mem with the default parameters" modprobe nv_peer_mem peerdirect_support=0
check "  the load log names the parameter 4.9 needs" sh -c 'dmesg | grep -q "nv_peer_mem: .*MLNX_OFED 4.9 needs peerdirect_support=1"'
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
expect_write_error "Bad address" "ibv_reg_mr fails: 4.9 skips the extended client" $IBC/ctl "reg 1 edu0 $GPU_VA 0x40000"
check "  no context kept" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "rmmod" rmmod nv_peer_mem
check "nv_peer_mem peerdirect_support=1" modprobe nv_peer_mem peerdirect_support=1
check "  nv_mem registered in the legacy form" grep -q 'name=nv_mem .*ex=0 flags=0x0 invalidate=1' $IBC/clients
check "ibv_reg_mr works" ctl_ib "reg 1 edu0 $GPU_VA 0x40000"
dma_check 1 0x30000 "$GPU_VA + 0x30000"
check "cudaFree: 4.9 unmaps and releases inside the invalidation" ctl_nv "free $GPU_VA"
check "  ib_core unmapped inside" test "$(ib_stat unmaps_in_invalidate)" = 1
ctl_ib "dereg 1" 2>/dev/null
check "module reference dropped" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean
check "unload" unload_world
finish
