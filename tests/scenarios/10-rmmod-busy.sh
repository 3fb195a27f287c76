# shellcheck shell=sh
# rmmod while ib_core holds registrations fails with EBUSY and changes nothing.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x20000 contiguous"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x20000"
out=$(rmmod nv_peer_mem 2>&1)
check "rmmod refused" test $? -ne 0
case $out in
*"in use"* | *busy* | *"temporarily unavailable"*) ok "  because it is in use ($out)" ;;
*) not_ok "  unexpected rmmod error: $out" ;;
esac
check "still loaded" grep -q '^nv_peer_mem ' /proc/modules
dma_check 1 0x10000 "$GPU_VA + 0x10000"
check "deregister" ctl_ib "dereg 1"
check "rmmod now works" rmmod nv_peer_mem
expect_nv_clean
check "unload" sh -c 'rmmod ib_core && rmmod nvidia'
finish
