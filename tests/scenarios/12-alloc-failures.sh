# shellcheck shell=sh
# Fail the n-th memory allocation of a registration attempt, for n = 1..40 (which covers every
# allocation of the path: fake ib_core, nv_peer_mem, fake nvidia, IOMMU): each attempt either
# succeeds, with nv_mem behind it, or fails with an errno, and after each one nothing is left
# behind (kmemleak checks the rest at the end of the run).
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x100000 shuffled"
check "failslab may fail sleeping allocations" sh -c "echo N > /sys/kernel/debug/failslab/ignore-gfp-wait"
echo 0 >/sys/kernel/debug/failslab/verbose
n=1 failures=0 successes=0 dirty=0
while [ $n -le 40 ]; do
	# This shell registers (NVIDIA recognises GPU memory only in the process that allocated it).
	if { echo $n >/proc/thread-self/fail-nth && echo "reg 1 edu0 $GPU_VA 0x100000" >$IBC/ctl; } 2>/dev/null; then
		successes=$((successes + 1))
		# An MR stays nv_mem's whatever failed: were nv_mem to decline after a failed
		# allocation, ib_core would ask nv_mem_nc, and the MR would be pinned persistently,
		# never invalidated by cudaFree (design.md, "Out of memory in acquire").
		grep -q '^id=1 .*client=nv_mem ' $IBC/regs ||
			not_ok "allocation $n failed and the MR went to another client: $(cat $IBC/regs)"
		ctl_ib "dereg 1" || not_ok "dereg after success at n=$n"
	else
		failures=$((failures + 1))
	fi
	echo 0 >/proc/thread-self/fail-nth # disarm what the registration did not reach
	p=$(nv_stat pins) m=$(nv_stat mappings) d=$(nv_stat dead_tables) r=$(cat /sys/module/nv_peer_mem/refcnt)
	if [ "$p$m$d$r" != 0000 ] || [ -n "$(cat $IBC/regs)" ]; then
		not_ok "allocation $n failed and left pins=$p mappings=$m tables=$d refcnt=$r regs='$(cat $IBC/regs)'"
		dirty=1
		break
	fi
	n=$((n + 1))
done
check "some registrations failed under injection ($failures of 40)" test $failures -gt 0
check "some succeeded ($successes of 40)" test $successes -gt 0
check "nothing left behind after any failure" test $dirty = 0
check "a registration works afterwards" ctl_ib "reg 1 edu0 $GPU_VA 0x100000"
dma_check 1 0x80000 "$GPU_VA + 0x80000"
check "deregister" ctl_ib "dereg 1"
echo Y >/sys/kernel/debug/failslab/ignore-gfp-wait
check "cudaFree" ctl_nv "free $GPU_VA"
expect_nv_clean
check "unload" unload_world
finish
