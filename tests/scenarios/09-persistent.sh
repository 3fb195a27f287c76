# shellcheck shell=sh
# Buffers for CQs/QPs go to the persistent client nv_mem_nc: its pins survive cudaFree until
# deregistration. With a driver that only has nvidia_p2p_cap_persistent_pages the client falls
# back to get_pages without a callback; with neither, no nv_mem_nc is registered.
# The nvidia.ko modprobe finds is the full flavour; the others are kept aside.
for flavour in full caponly; do
	ko=/lib/modules/$(uname -r)/extra/nvidia.ko
	[ $flavour = full ] || ko=/opt/fake-nvidia/$flavour/nvidia.ko
	check "load with nvidia ($flavour)" load_world "$ko"
	check "nv_mem_nc registered" grep -q 'name=nv_mem_nc' $IBC/clients
	check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
	check "CQ buffer registered" ctl_ib "reg 5 edu0 $GPU_VA 0x40000 cq"
	check "backed by nv_mem_nc" grep -q 'id=5 .*client=nv_mem_nc' $IBC/regs
	dma_check 5 0x10000 "$GPU_VA + 0x10000"
	check "cudaFree while pinned" ctl_nv "free $GPU_VA"
	check "no free callback for a persistent pin" test "$(nv_stat callbacks)" = 0
	check "memory still there for the NIC" grep -q 'id=5 .*invalidated=0' $IBC/regs
	dma_check 5 0x10000 "$GPU_VA + 0x10000"
	check "deregister" ctl_ib "dereg 5"
	expect_nv_clean "($flavour)"
	check "unload" unload_world
done
check "load with nvidia (no persistent pages)" load_world /opt/fake-nvidia/nopersist/nvidia.ko
check "no nv_mem_nc registered" sh -c "! grep -q nv_mem_nc $IBC/clients"
check "the log says why" sh -c 'dmesg | grep -q "client nv_mem_nc not registered"'
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x10000 contiguous"
expect_write_error "Bad address" "CQ buffer refused without a persistent client" $IBC/ctl "reg 5 edu0 $GPU_VA 0x10000 cq"
check "MR still works" ctl_ib "reg 6 edu0 $GPU_VA 0x10000"
check "deregister" ctl_ib "dereg 6"
expect_nv_clean
check "unload" unload_world
finish
