# shellcheck shell=sh
# Page tables of this world's driver generation are accepted and DMA-read correctly: version 2.0
# (with the trailing flags word) since driver 580.65.06, 1.2 before. A page table of a major
# version nobody has released yet is refused, with one line that names it.
check "load" load_world
check "nvidia.ko is the $NV_GEN generation" test "$(nv_stat flavour)" = "$NV_GEN"
check "cudaMalloc 1 MiB (fragmented)" ctl_nv "alloc $GPU_VA 0x100000 fragmented"
check "register" ctl_ib "reg 1 edu1 $(hex "$GPU_VA + 0x2000") 0xfc000"
for off in 0 0x7e000 0xfb000; do
	dma_check 1 $off "$GPU_VA + 0x2000 + $off"
done
check "deregister" ctl_ib "dereg 1"
klog_flush
ctl_nv "inject get_pages version 2"
expect_write_error "Invalid argument" "a page table of an unknown major version is refused" $IBC/ctl "reg 2 edu0 $GPU_VA 0x100000"
check "  in one line naming the version" test "$(dmesg | grep -c 'nv_peer_mem: nvidia.ko returned page table version')" = 1
check "  nothing kept" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
ctl_nv "inject clear"
expect_nv_clean
check "cudaFree" ctl_nv "free $GPU_VA"
check "unload" unload_world
finish
