# shellcheck shell=sh
# Host memory, freed GPU memory and another process's GPU memory are not ours: acquire says so
# quietly and keeps nothing.
check "load" load_world
klog_flush
expect_write_error "Bad address" "host address not claimed (EFAULT)" $IBC/ctl "reg 1 edu0 0x7ffd00001000 0x10000"
expect_write_error "Bad address" "freed GPU range not claimed" $IBC/ctl "reg 2 edu0 $GPU_VA 0x10000"
check "cudaMalloc in this process" ctl_nv "alloc $GPU_VA 0x10000 contiguous"
# NVIDIA finds GPU memory by the calling process: another process's buffer is not its memory.
check "another process's GPU memory not claimed (EFAULT)" \
	sh -c "! echo 'reg 3 edu0 $GPU_VA 0x10000' > $IBC/ctl 2>/dev/null && dmesg | grep -q 'reg 3: no peer client claims'"
check "cudaFree" ctl_nv "free $GPU_VA"
check "no log noise from nv_peer_mem" sh -c '! dmesg | grep -q nv_peer_mem'
check "no context kept (refcount 0)" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "nv_mem counts 3 ranges not its own" test "$(nvpm_stat nv_mem err_not_mine)" = 3
expect_nv_clean
check "unload" unload_world
finish
