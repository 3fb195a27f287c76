# shellcheck shell=sh
# RDMA writes land in GPU memory: the NIC DMA-writes through the registration and reads back.
# The GPU memory's original content is written back at the end, so later scenarios still find
# the host's pattern in the BAR.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x20000 fragmented"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x20000"
i=0
while [ $i -lt 256 ]; do printf 'nv_peer_mem-rust'; i=$((i + 1)); done >/tmp/pattern
off=$((0x10000 - 0x800))
check "NIC reads the original content" ctl_ib "read 1 $off 4096"
check "save it" cp $IBC/dma_buf /tmp/original
check "fill the NIC buffer" sh -c "cat /tmp/pattern > $IBC/dma_buf"
check "NIC writes 4 KiB across a GPU page boundary" ctl_ib "write 1 $off 4096"
check "NIC reads it back" ctl_ib "read 1 $off 4096"
check "GPU memory holds what the NIC wrote" cmp -s /tmp/pattern $IBC/dma_buf
check "refill the NIC buffer with the original" sh -c "cat /tmp/original > $IBC/dma_buf"
check "NIC writes the original back" ctl_ib "write 1 $off 4096"
check "NIC reads it back" ctl_ib "read 1 $off 4096"
check "GPU memory holds its original content again" cmp -s /tmp/original $IBC/dma_buf
dma_check 1 0xf000 "$GPU_VA + 0xf000"
dma_check 1 0x10000 "$GPU_VA + 0x10000"
check "deregister" ctl_ib "dereg 1"
expect_nv_clean
check "unload" unload_world
finish
