# shellcheck shell=sh
# The test doubles on their own: GPUs and NICs probed, buffers allocated and freed in every
# layout, fault injection accepted, the NIC's DMA engine works, nothing left behind.
check "nvidia (fake) loads" modprobe nvidia
check "ib_core (fake) loads" modprobe ib_core
check "two GPUs share their memory through BARs" test "$(grep -c . $NV/stats)" -gt 0
for layout in contiguous fragmented shuffled; do
	va=$(hex "$GPU_VA + 0x1000000")
	check "alloc 1 MiB $layout" ctl_nv "alloc $va 0x100000 $layout"
	check "$layout buffer has 16 pages" test "$(grep -c "gpu=0" $NV/pages)" -eq 16
	check "free $layout buffer" ctl_nv "free $va"
done
expect_write_error "Invalid argument" "unaligned alloc refused" $NV/ctl "alloc 0x7f0000001000 0x10000"
check "alloc on GPU 1" ctl_nv "alloc $GPU_VA 0x20000 contiguous 1"
expect_write_error "File exists" "overlapping alloc refused" $NV/ctl "alloc $GPU_VA 0x10000"
check "free on GPU 1" ctl_nv "free $GPU_VA"
check "inject accepted" ctl_nv "inject get_pages -12 1"
check "inject clear accepted" ctl_nv "inject clear"
if [ -e $IBC/ctl ]; then
	check "edu NIC DMA self-test" ctl_ib selftest
fi
expect_write_error "Bad address" "no client: registration refused with EFAULT" $IBC/ctl "reg 1 edu0 $GPU_VA 0x10000"
check "no memory_peers without clients" test ! -e $PEERS/nv_mem
expect_nv_clean
check "unload both" sh -c 'rmmod ib_core && rmmod nvidia'
finish
