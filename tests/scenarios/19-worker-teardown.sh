# shellcheck shell=sh
# ib_core tears a registration down from a kernel worker (device removal, deferred release).
# NVIDIA finds pins by the calling process, so put_pages from the worker would unpin nothing:
# nv_peer_mem says so in one line, keeps the callback armed and the module pinned, and when the
# GPU memory is freed the callback releases everything. Nothing is freed twice or leaked.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x40000"
dma_check 1 0x10000 "$GPU_VA + 0x10000"
klog_flush
check "deregister from a kernel worker" ctl_ib "dereg 1 worker"
check "ib_core has released the registration" test -z "$(cat $IBC/regs)"
check "one line explains the pin nvidia keeps" \
	test "$(dmesg | grep -c 'nv_peer_mem: .*released by another process than the one that pinned it')" = 1
check "nvidia still holds the pin (as the real driver would)" test "$(nv_stat pins)" = 1
check "the pending callback holds a module reference" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 1
if rmmod nv_peer_mem 2>/dev/null; then
	not_ok "rmmod succeeded while NVIDIA can still call back"
	modprobe nv_peer_mem
else
	ok "rmmod refused while NVIDIA can still call back"
fi
check "cudaFree" ctl_nv "free $GPU_VA"
check "the free callback ran" test "$(nv_stat callbacks)" = 1
check "nothing invalidated (ib_core had let go)" test "$(ib_stat invalidations)" = 0
check "module reference dropped" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean
check "unload" unload_world
finish
