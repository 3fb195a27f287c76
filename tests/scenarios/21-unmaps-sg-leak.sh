# shellcheck shell=sh
# After an unmap or an invalidation MLNX_OFED 5.x/24.x zeroes its sg_table (REFERENCE §6): a
# client that frees its sg list through ib_core's table frees nothing. Invalidate and deregister
# a few registrations each way, then ask kmemleak: no sg list may be left unreferenced.
check "load" load_world
i=1
while [ $i -le 4 ]; do
	va=$(hex "$GPU_VA + $i * 0x1000000")
	check "cudaMalloc $i" ctl_nv "alloc $va 0x100000 fragmented"
	check "register $i" ctl_ib "reg $i edu$((i % 2)) $(hex "$va + 0x800") 0xf0000"
	if [ $((i % 2)) = 0 ]; then
		check "  cudaFree under it (invalidation)" ctl_nv "free $va"
		ctl_ib "dereg $i" 2>/dev/null
	else
		check "  deregister (unmap)" ctl_ib "dereg $i"
		check "  cudaFree" ctl_nv "free $va"
	fi
	i=$((i + 1))
done
expect_nv_clean
check "unload" unload_world
if [ -e /sys/kernel/debug/kmemleak ]; then
	sleep 6
	echo scan >/sys/kernel/debug/kmemleak
	echo scan >/sys/kernel/debug/kmemleak
	leaks=$(grep -c 'unreferenced object' /sys/kernel/debug/kmemleak)
	check "kmemleak finds no unreferenced object" test "$leaks" = 0
	[ "$leaks" = 0 ] || head -40 /sys/kernel/debug/kmemleak
	echo clear >/sys/kernel/debug/kmemleak
fi
finish
