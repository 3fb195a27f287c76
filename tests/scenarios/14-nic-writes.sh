# shellcheck shell=sh
# RDMA writes land in GPU memory: the NIC DMA-writes through the registration and reads back.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x20000 fragmented"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x20000"
i=0
while [ $i -lt 256 ]; do printf 'nv_peer_mem-rust'; i=$((i + 1)); done >/tmp/pattern
check "fill the NIC buffer" sh -c "cat /tmp/pattern > $IBC/dma_buf"
check "NIC writes 4 KiB across a GPU page boundary" ctl_ib "write 1 $((0x10000 - 0x800)) 4096"
check "NIC reads it back" ctl_ib "read 1 $((0x10000 - 0x800)) 4096"
check "GPU memory holds what the NIC wrote" cmp -s /tmp/pattern $IBC/dma_buf
check "deregister" ctl_ib "dereg 1"
expect_nv_clean
check "unload" unload_world
finish
