# shellcheck shell=sh
# Several buffers on two GPUs, registered for two NICs at once, some overlapping.
check "load" load_world
check "GPU 0 buffer" ctl_nv "alloc $GPU_VA 0x100000 shuffled 0"
b2=$(hex "$GPU_VA + 0x10000000")
check "GPU 1 buffer" ctl_nv "alloc $b2 0x100000 fragmented 1"
check "MR 1: GPU 0 for edu0" ctl_ib "reg 1 edu0 $GPU_VA 0x100000"
check "MR 2: GPU 0 again for edu1" ctl_ib "reg 2 edu1 $(hex "$GPU_VA + 0x40000") 0x40000"
check "MR 3: GPU 1 for edu0" ctl_ib "reg 3 edu0 $b2 0x100000"
check "MR 4: GPU 1 for edu1" ctl_ib "reg 4 edu1 $b2 0x80000"
check "four pins" test "$(nv_stat pins)" = 4
check "four references" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 4
dma_check 1 0x40000 "$GPU_VA + 0x40000"
dma_check 2 0 "$GPU_VA + 0x40000"
dma_check 3 0x30000 "$b2 + 0x30000"
dma_check 4 0x7f000 "$b2 + 0x7f000"
for id in 2 4 1 3; do check "dereg $id" ctl_ib "dereg $id"; done
expect_nv_clean
check "unload" unload_world
finish
