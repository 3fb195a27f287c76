# shellcheck shell=sh
# Fail the n-th memory allocation of a registration attempt, for n = 1, 2, ... until a run
# reaches no n-th allocation (so every allocation of the path is failed once: fake ib_core,
# nv_peer_mem, fake nvidia, IOMMU): each attempt either succeeds, with nv_mem behind it, or
# fails with an errno, and after each one nothing is left behind (kmemleak checks the rest at
# the end of the run).
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x100000 shuffled"
check "failslab may fail sleeping allocations" sh -c "echo N > /sys/kernel/debug/failslab/ignore-gfp-wait"
echo 0 >/sys/kernel/debug/failslab/verbose
n=1 failures=0 successes=0 dirty=0 injected=1
while [ $injected = 1 ] && [ $n -le 100 ]; do
	# This shell registers (NVIDIA recognises GPU memory only in the process that allocated it).
	if { echo $n >/proc/thread-self/fail-nth && echo "reg 1 edu0 $GPU_VA 0x100000" >$IBC/ctl; } 2>/dev/null; then
		registered=1
	else
		registered=0
	fi
	# Whether the n-th allocation was reached (fail-nth reads 0 once it failed one), then disarm
	# what was not, before this shell forks again. Opening the file allocates too: if that is
	# the n-th, the read fails, and the registration did not reach it either.
	if { read -r left; } 2>/dev/null </proc/thread-self/fail-nth && [ "$left" = 0 ]; then injected=1; else injected=0; fi
	{ echo 0; } 2>/dev/null >/proc/thread-self/fail-nth
	if [ $registered = 1 ]; then
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
	p=$(nv_stat pins) m=$(nv_stat mappings) d=$(nv_stat dead_tables) r=$(cat /sys/module/nv_peer_mem/refcnt)
	if [ "$p$m$d$r" != 0000 ] || [ -n "$(cat $IBC/regs)" ]; then
		not_ok "allocation $n failed and left pins=$p mappings=$m tables=$d refcnt=$r regs='$(cat $IBC/regs)'"
		dirty=1
		break
	fi
	n=$((n + 1))
done
check "the runs failed every allocation of the path (run $((n - 1)) reached none, 100 at most)" test $injected = 0
check "some registrations failed under injection ($failures of $((n - 1)))" test $failures -gt 0
check "some succeeded ($successes of $((n - 1)))" test $successes -gt 0
check "nothing left behind after any failure" test $dirty = 0
check "a registration works afterwards" ctl_ib "reg 1 edu0 $GPU_VA 0x100000"
dma_check 1 0x80000 "$GPU_VA + 0x80000"
check "deregister" ctl_ib "dereg 1"
echo Y >/sys/kernel/debug/failslab/ignore-gfp-wait
check "cudaFree" ctl_nv "free $GPU_VA"
expect_nv_clean
check "unload" unload_world
finish
