# shellcheck shell=sh
# The fault-injection sweep (tests/sweep/README.md). Every phase of the module runs again and
# again, failing one thing each time, until no failure is left to inject:
# - failslab with fail-nth = 1, 2, ... counts only allocations made under module code (the
#   stack filter), so each run fails the next allocation of nv_peer_mem, or of nvidia.ko and
#   ib_core inside a call from it (the real ones allocate there too);
# - nvidia.ko's calls fail one after another with the errno the real one gives (the fake's
#   inject, with skip).
# Each injected failure is attributed to the innermost nv_peer_mem frame of its stack dump: a
# call site that tests/sweep/sites.py lists from the module's code. It is judged: the caller
# got an error it can understand (or the module recovered), nv_peer_mem logged exactly one
# line at warning level or above (at most one when it recovered), and nothing is left: no
# pin, mapping, table, MR, module reference or registered client. One "SWEEP ..." line per
# run; tests/sweep/report.py joins them with the site list (make check prints the sites line).
FS=/sys/kernel/debug/failslab
VA=$GPU_VA LEN=0x40000 MAX_N=400
check "load" load_world
check "the site list is here" test -s /tests/sweep-sites.txt
KO=$(find /lib/modules -name nv_peer_mem.ko | head -n 1)
OPTS=$(sed -n 's/^options nv_peer_mem //p' /etc/modprobe.d/*.conf 2>/dev/null | tr '\n' ' ')
check "failslab has the stack filter" test -e $FS/require-start
# Which allocations fail-nth counts: those with a frame in [require-start, require-end) on
# their stack. Module init and exit run in memory known only once loaded: there, any module
# code (the end of the kernel image to MODULES_END, x86-64). Otherwise nv_peer_mem's .text.
kend=$(awk '$3 == "_end" { print $1; exit }' /proc/kallsyms)
text_size=$(sed -n "s/^# text_size //p" /tests/sweep-sites.txt)
any_module() {
	echo "0x${kend:-ffffffffa0000000}" >$FS/require-start
	echo 0xffffffffff000000 >$FS/require-end
}
this_module() {
	t=$(cat /sys/module/nv_peer_mem/sections/.text)
	echo "$t" >$FS/require-start
	printf '0x%x\n' $((t + text_size)) >$FS/require-end
}
# kmemleak tracks each allocation with an object of its own, allocated in its hook inside the
# allocation (mm/kmemleak.c: __create_object, __alloc_object), so with the module's frames on
# the stack too; when that fails it takes one from its pool, silently. Half the runs failed
# only that. Frames in those two functions are rejected: fail-nth counts the others.
# /proc/kallsyms is sorted by address: the range runs from the first of the two to the symbol
# after the second.
kl=$(awk 'n == 2 { print lo, $1; exit } $3 == "__create_object" || $3 == "__alloc_object" { if (!n++) lo = $1 }' /proc/kallsyms)
if [ -n "$kl" ]; then
	echo "0x${kl% *}" >$FS/reject-start
	echo "0x${kl#* }" >$FS/reject-end
	echo "sweep: kmemleak's own allocations (0x${kl% *}..0x${kl#* }) are not counted"
else
	echo "sweep: no __create_object/__alloc_object in kallsyms: kmemleak's own allocations are counted too"
fi
echo N >$FS/ignore-gfp-wait
# The probability path fails nothing (probability 0) but in twice(), and there only in the
# armed step of the failnth process (task-filter, make-it-fail).
echo 0 >$FS/probability
echo Y >$FS/task-filter
echo 1 >$FS/interval
echo 0 >$FS/space
echo 32 >$FS/stacktrace-depth
echo 2 >$FS/verbose
echo 0 >$FS/verbose_ratelimit_interval_ms
echo 1 >/sys/module/nvidia/parameters/inject_stack
# Hundreds of stack dumps: into the log buffer only (a serial console under TCG is slow).
printk_levels=$(cat /proc/sys/kernel/printk)
echo 1 >/proc/sys/kernel/printk

# What is left that should not be: prints nothing when clean.
leftovers() {
	nv_left
	[ -z "$(cat $IBC/regs)" ] || printf 'mrs,'
	if [ -d /sys/module/nv_peer_mem ]; then
		r=$(cat /sys/module/nv_peer_mem/refcnt)
		[ "$r" = 0 ] || printf 'refcnt=%s,' "$r"
	else
		[ -z "$(cat $IBC/clients)" ] || printf 'clients,'
		[ ! -e /sys/kernel/debug/nv_peer_mem ] || printf 'debugfs,'
	fi
}

# judge PHASE INJECTION N RC OUT: one SWEEP line for a run whose injection was taken.
judge() {
	plant_canary
	dmesg -r -c >/tmp/sweep.log
	# Its kernel reports go to the harness; the frames of the injections' own call traces do not
	# count (they name lockdep's functions).
	# The real driver's hazards go on too: the allowance the scenario declared judges them.
	grep -E "$KERNEL_REPORTS|REAL-DRIVER-HAZARD" /tmp/sweep.log |
		grep -Ev '^<[0-9]+>\[ *[0-9.]+\] +(\? )?[A-Za-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+( \[[a-z_0-9]+\])?$' |
		sed 's/^/KLOG: /'
	# Whether the injection left a report at all: not when the allocation asked for quiet
	# (__GFP_NOWARN).
	traced=$(grep -c 'FAULT_INJECTION: forcing a failure\|fake_nvidia: .*: injected failure' /tmp/sweep.log)
	# The first nv_peer_mem frame after the injection's report (unreliable "?" frames skipped).
	site=$(awk '/FAULT_INJECTION: forcing a failure|fake_nvidia: .*: injected failure/ { f = 1; next }
		f && /\[nv_peer_mem\]/ && !/ \? / {
			if (match($0, /[^ ]+\+0x[0-9a-f]+\/0x[0-9a-f]+ \[nv_peer_mem\]/)) {
				s = substr($0, RSTART, RLENGTH); sub(/\/.*/, "", s); print s; exit } }' /tmp/sweep.log)
	lines=$(grep -c '^<[0-4]>.* nv_peer_mem: ' /tmp/sweep.log)
	# The first failing step's errno, when the armed one succeeded (nvidia.ko's calls).
	rc=$4
	[ "$rc" != 0 ] || rc=$(printf '%s\n' "$5" | sed -n 's/^step=[0-9]* rc=\([0-9]*\)$/\1/p' | head -n 1)
	: "${rc:=0}"
	left=$(leftovers)
	why=
	if [ "$rc" = 0 ] || [ -z "$site" ]; then
		# Recovered, or failed where nv_peer_mem was not on the stack (the fake ib_core's own
		# MR allocation, before or after calling the client): it owes no line then.
		[ "$lines" -le 1 ] || why="${why}$lines log lines;"
	else
		[ "$lines" = 1 ] || why="${why}$lines log lines;"
		# ENOMEM, EIO (what was injected), EFAULT (ib_core's answer when no client claims the
		# range: acquire cannot return an errno), EINVAL (ib_register_peer_memory_client's
		# NULL carries none).
		case $rc in 12 | 5 | 14 | 22) ;; *) why="${why}errno $rc;" ;; esac
	fi
	# A recovered registration is nv_mem's (the run prints the core's MRs after registering):
	# nv_mem declining after a failed allocation would hand the MR to nv_mem_nc, pinned for
	# good (design.md, "Out of memory in acquire").
	mr_client=$(printf '%s\n' "$5" | sed -n 's/^id=1 .*client=\([^ ]*\) .*/\1/p' | head -n 1)
	case ${mr_client:-nv_mem} in nv_mem) ;; *) why="${why}MR on $mr_client;" ;; esac
	[ -z "$left" ] || why="${why}left $left"
	grep -q 'setup-failed' /tmp/sweep.out && why="${why}setup failed;"
	behaved=yes
	[ -z "$why" ] || behaved=no
	echo "SWEEP phase=$1 inject=$2 n=$3 site=${site:-none} rc=$rc lines=$lines behaved=$behaved${why:+ why=$why}"
	[ $behaved = yes ] || { grep ' nv_peer_mem: \|FAKE\|setup' /tmp/sweep.log /tmp/sweep.out | head -5; }
}

# slab PHASE AFTER STEP...: fail-nth n on the armed step (failnth.c), until a run reaches no
# n-th allocation; AFTER runs after each (cleanup of what a success made). One call site may
# allocate many times in a row (sysfs_create_group: a few allocations per file): while runs
# keep landing on the same site n gallops (1, 2, 4, then 8 ahead); when a leap lands on
# another site, or past the end, the gap is bisected back to the first allocation that is not
# the same site's, and the gallop starts again from 1 there. A leap could only miss a site whose
# allocations all lie between two of another site's; report.py would show it not injected.
# run_nth AFTER ENV STEP...: one run of failnth with its $n-th allocation failed (ENV: its
# environment, "" or FAILNTH_TWICE=1), on a log emptied for the judge; then AFTER puts the
# world back. Sets rc (the steps' outcome) and left (fail-nth after the run: 0 once it failed
# one) from failnth's last line; its output is in /tmp/sweep.out.
run_nth() {
	rn_after=$1 rn_env=$2
	shift 2
	klog_flush
	# shellcheck disable=SC2086 # no environment is no word
	env $rn_env /bin/failnth $n "$@" >/tmp/sweep.out 2>&1
	rc=$(sed -n 's/^rc=\([0-9]*\) left=.*/\1/p' /tmp/sweep.out)
	left=$(sed -n 's/^rc=[0-9]* left=\(-*[0-9]*\)$/\1/p' /tmp/sweep.out)
	# No result line (a step before the armed one failed, failnth could not run) or no count
	# (fail-nth unreadable): not the end of the phase, a broken run.
	case $left in '' | -*) left=broken ;; esac
	eval "$rn_after" >/dev/null 2>&1
}

slab() {
	phase=$1 after=$2 n=1 prev=0 step=1 grow=0 hi=0 hi_site='' last='' runs=0
	shift 2
	while [ $n -le $MAX_N ]; do
		run_nth "$after" "" "$@"
		if [ "$left" = broken ]; then
			not_ok "$phase: run $n made no injection and gave no count: $(tr '\n' ' ' </tmp/sweep.out)"
			break
		elif [ "$left" != 0 ]; then
			hi=$n hi_site=END # past the last allocation
		else
			judge "$phase" slab $n "$rc" "$(cat /tmp/sweep.out)"
			runs=$((runs + 1))
			if [ -z "$site" ]; then
				prev=$n grow=0 # none of the module's sites: neither the same nor another
			elif [ "$site" = "$last" ]; then
				prev=$n grow=1
			elif [ $n = $((prev + 1)) ]; then
				last=$site prev=$n step=1 grow=0 # the first run of another site
			else
				hi=$n hi_site=$site # another site after a leap: its first run is in (prev, n]
			fi
			# The n-th failed without a report and the steps went on: fail the next one too.
			[ "$traced" != 0 ] || [ "$rc" != 0 ] || twice "$phase" "$after" "$@"
		fi
		if [ $hi -gt $((prev + 1)) ]; then
			n=$(((prev + hi) / 2))
			continue
		fi
		if [ $hi -gt 0 ]; then
			# The boundary is hi: run (and judged) already, or the end.
			[ "$hi_site" != END ] || break
			last=$hi_site prev=$hi hi=0 step=1 grow=0
		fi
		[ $grow = 0 ] || step=$((step < 8 ? step * 2 : 8))
		n=$((prev + step))
	done
	echo "sweep: $phase: $runs runs, allocations under module code up to n=$((n - 1))"
	check "$phase: the sweep ended (run $n made no allocation it could fail)" test $n -le $MAX_N
	case " $ALLOCATION_FREE " in
	*" $phase "*)
		echo "SWEEP-PHASE phase=$phase injections=$runs"
		# Its first run reached no allocation (not a broken run: that fails above).
		check "$phase: allocates nothing under module code, as meant ($runs injected)" test "$runs" = 0 -a "$n" = 1
		;;
	*) phase_done "$phase" "$runs" ;;
	esac
}

# phase_done PHASE INJECTIONS: the phase's count, for tests/sweep/report.py (which fails a
# planned phase without one); a phase that injected nothing tested nothing and fails.
phase_done() {
	echo "SWEEP-PHASE phase=$1 injections=$2"
	check "$1: $2 injected failures taken" test "$2" -gt 0
}

# twice PHASE AFTER STEP...: run n again, failing the allocation after the n-th as well. For a
# run whose n-th allocation failed without a report (__GFP_NOWARN) and whose steps all went
# on: a callee that tries a quiet allocation first and another when it fails, as the XArray
# does for its nodes (lib/xarray.c: xas_alloc, then __xas_nomem with the caller's flags). One
# injected failure never fails such a call; two in a row do, and the second reports. failslab
# fails the n-th through fail-nth (times 2 -> 1) and the next through its probability path,
# only in the failnth process's armed step (make-it-fail, FAILNTH_TWICE) (times 1 -> 0).
twice() {
	tw_phase=$1 tw_after=$2
	shift 2
	echo 2 >$FS/times
	echo 100 >$FS/probability
	run_nth "$tw_after" FAILNTH_TWICE=1 "$@"
	echo 0 >$FS/probability
	judge "$tw_phase" slab-twice $n "$rc" "$(cat /tmp/sweep.out)"
	runs=$((runs + 1))
}

# nvfail PHASE OP STEP...: the k-th call of nvidia.ko's OP fails, k = 1, 2, ... until the steps
# make no k-th call. With the errno the real driver gives (nv-p2p.c): the puts' -ENOMEM (their
# stack allocation), dma_unmap_pages' -EINVAL, RM's failures as -EIO otherwise.
nvfail() {
	nf_phase=$1 op=$2 k=0 ended=no
	case $op in put_pages*) err=-12 ;; dma_unmap_pages) err=-22 ;; *) err=-5 ;; esac
	shift 2
	while [ $k -lt 50 ]; do
		ctl_nv "inject clear"
		before=$(nv_stat injected)
		if ! ctl_nv "inject $op $err 1 $k"; then
			not_ok "$nf_phase: the fake refused 'inject $op $err 1 $k'"
			ended=refused
			break
		fi
		klog_flush
		/bin/failnth 0 "$@" >/tmp/sweep.out 2>&1
		ctl_nv "inject clear"
		[ "$(nv_stat injected)" != "$before" ] || { ended=yes; break; }
		judge "$nf_phase" "nvidia:$op" $((k + 1)) 0 "$(cat /tmp/sweep.out)"
		k=$((k + 1))
	done
	echo "sweep: $nf_phase: $k calls of $op failed"
	[ $ended = refused ] || check "$nf_phase: the sweep ended (call $((k + 1)) of $op was not made)" test $ended = yes
	phase_done "$nf_phase" $k
}

ALLOC="w:$NV/ctl:alloc $VA $LEN contiguous"
FREE="?w:$NV/ctl:free $VA"
REG="w:$IBC/ctl:reg 1 edu0 $VA $LEN"
DEREG="?w:$IBC/ctl:dereg 1"
VIEW=/sys/kernel/debug/nv_peer_mem/registrations

# The phases this world runs, before any runs: tests/sweep/report.py fails the sweep when one of
# them has no SWEEP-PHASE line (the scenario stopped before it, or skipped it). The sweep is
# one process's steps in a row, nothing runs beside them: no free can meet a P2P call waiting
# for the API lock, so none of the real driver's hazards is allowed (judge hands them on).
expect_hazards 0
# nvpm.canary=1 (tests/canaries/): the registration phase only, a kind of report planted in
# each of its first runs; the judge must fail the scenario.
if [ -n "$CANARY" ]; then
	ALLOCATION_FREE=
	echo "SWEEP-PLAN phases=register allocation-free="
	slab register "" "$ALLOC" "W:$IBC/ctl:reg 1 edu0 $VA $LEN" "$DEREG" "$FREE"
	echo "$printk_levels" >/proc/sys/kernel/printk
	klog_flush
	finish
fi
plan="init exit register"
! nv_has_persistent || plan="$plan register-persistent"
plan="$plan register-probe deregister invalidate view"
for op in get_pages dma_map_pages dma_unmap_pages put_pages; do plan="$plan nvidia-$op"; done
plan="$plan nvidia-put_pages-probe"
# The persistent client's calls (nv_p2p.rs, get_persistent): the persistent API where nvidia.ko
# has it (R535 and later: the fake takes injections for its calls), else get_pages with no
# callback, put with put_pages (R515-R530). Each must be called: a phase that injects nothing
# fails.
cq_ops=
if ! nv_has_persistent; then :
elif ctl_nv "inject get_pages_persistent -5 1 1000" 2>/dev/null; then
	cq_ops="get_pages_persistent put_pages_persistent"
else cq_ops="get_pages put_pages"; fi
ctl_nv "inject clear"
for op in $cq_ops; do plan="$plan nvidia-cq-$op"; done
# Phases whose code allocates nothing under the module's frames: unloading, deregistering and
# the free callback's invalidation give back what registration took and never need memory to
# do it (a teardown that could fail for lack of memory would leave pins behind). Their slab
# sweep must find no allocation at all, and fails when one appears; that failslab injects in
# this boot the other phases show.
ALLOCATION_FREE="exit deregister invalidate"
echo "SWEEP-PLAN phases=$plan allocation-free=$ALLOCATION_FREE"
# Module init and exit.
check "unload nv_peer_mem" rmmod nv_peer_mem
any_module
slab init "rmmod nv_peer_mem" "L:$KO:$OPTS"
check "load again" modprobe nv_peer_mem
slab exit "modprobe nv_peer_mem" "U:nv_peer_mem"
this_module
# Registration (acquire, get_pages, dma_map), from the process that owns the memory.
slab register "" "$ALLOC" "W:$IBC/ctl:reg 1 edu0 $VA $LEN" "p:$IBC/regs" "$DEREG" "$FREE"
if nv_has_persistent; then
	slab register-persistent "" "$ALLOC" "W:$IBC/ctl:reg 5 edu0 $VA $LEN cq" "?w:$IBC/ctl:dereg 5" "$FREE"
fi
# probe_then_pin=1: acquire pins and unpins, get_pages pins again.
echo 1 >/sys/module/nv_peer_mem/parameters/probe_then_pin
slab register-probe "" "$ALLOC" "W:$IBC/ctl:reg 1 edu0 $VA $LEN" "p:$IBC/regs" "$DEREG" "$FREE"
echo 0 >/sys/module/nv_peer_mem/parameters/probe_then_pin
# Deregistration (dma_unmap, put_pages, release), the free callback's invalidation, the view.
slab deregister "" "$ALLOC" "$REG" "W:$IBC/ctl:dereg 1" "$FREE"
slab invalidate "" "$ALLOC" "$REG" "W:$NV/ctl:free $VA" "$DEREG"
slab view "" "$ALLOC" "$REG" "R:$VIEW" "$DEREG" "$FREE"

# nvidia.ko's calls, each failing in turn, over a registration's whole life: register, read
# the view, deregister, register again, cudaFree under it (the free callback), deregister.
life() {
	nvfail "$1" "$2" "$ALLOC" "?w:$IBC/ctl:reg 1 edu0 $VA $LEN" "?r:$VIEW" "$DEREG" \
		"?w:$IBC/ctl:reg 2 edu0 $VA $LEN" "$FREE" "?w:$IBC/ctl:dereg 2"
}
for op in get_pages dma_map_pages dma_unmap_pages put_pages; do life "nvidia-$op" $op; done
echo 1 >/sys/module/nv_peer_mem/parameters/probe_then_pin
life nvidia-put_pages-probe put_pages
echo 0 >/sys/module/nv_peer_mem/parameters/probe_then_pin
# The persistent client's (CQ buffers): pinned through cudaFree, released at deregistration.
for op in $cq_ops; do
	nvfail "nvidia-cq-$op" "$op" "$ALLOC" "?w:$IBC/ctl:reg 5 edu0 $VA $LEN cq" "$FREE" "?w:$IBC/ctl:dereg 5"
done

echo 0 >/sys/module/nvidia/parameters/inject_stack
echo "$printk_levels" >/proc/sys/kernel/printk
echo 1 >$FS/verbose
echo Y >$FS/ignore-gfp-wait
klog_flush
check "cudaMalloc after the sweep" ctl_nv "alloc $VA $LEN contiguous"
check "a registration works after the sweep" ctl_ib "reg 9 edu0 $VA $LEN"
dma_check 9 0x10000 "$VA + 0x10000"
check "deregister" ctl_ib "dereg 9"
check "cudaFree" ctl_nv "free $VA"
expect_nv_clean "after the sweep"
check "unload" unload_world
finish
