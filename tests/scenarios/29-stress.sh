# shellcheck shell=sh
# Races run in the kernel (the fake ib_core's "stress", tests/fakes/INTERFACE.md): registration,
# deregistration, deregistration on a worker and overlapping registrations, each against
# cudaFree at a random moment; concurrent registrations on both NICs; and rmmod nv_peer_mem
# attempts against all of that. NVPM_STRESS_ITERS iterations per race (kernel command line
# nvpm.stress_iters=, default 500; make fullcheck: 2000; make stress: 100000). Afterwards nothing may be left:
# pins, mappings, contexts, module references, MRs, the module's gauges; and no kernel report.
ITERS=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nvpm\.stress_iters=//p')
: "${ITERS:=500}"
CHUNK=500
: >/tmp/stress.bad
: >/tmp/stress.tail
loglines=0
# Move the kernel log out of the ring buffer after every chunk (a long run would overflow it):
# kernel reports are kept for the harness, the rest only counted.
drain() {
	plant_canary
	dmesg -c >/tmp/stress.chunk
	grep -E "$KERNEL_REPORTS" /tmp/stress.chunk >>/tmp/stress.bad
	tail -n 20 /tmp/stress.chunk >/tmp/stress.tail
	loglines=$((loglines + $(wc -l </tmp/stress.chunk)))
}
# The module's own counters (nv_mem), to show where the races landed.
COUNTERS="registrations invalidations err_not_mine err_freed_during_registration err_refused_context"
counters() {
	for c in $COUNTERS; do printf '%s ' "$(nvpm_stat nv_mem "$c" 2>/dev/null || echo 0)"; done
}
# outcome KEY: a value of the race just run (its outcomes, nv_peer_mem.<counter>, hazards)
outcome() { printf '%s\n' $all | sed -n "s/^$1=//p" | head -n1; }
# expect KEY OP VALUE [WHY]: the race's KEY compares so with VALUE (test(1)'s -eq, -ge, -le)
expect() {
	v=$(outcome "$1")
	check "$race: $1 ${v:-none} $2 $3${4:+ ($4)}" test "${v:-0}" "$2" "$3"
}
# What each race must have done, beyond no unexpected outcome: enough registrations made and
# invalidated that the race was run at all (a hundredth of the iterations, one invalidation in
# dereg-free: where the frees land moves with the machine's load, the fewest seen were 3.6 %
# invalidations in reg-free under a loaded make check and 1.7 % in dereg-free alone,
# Documentation/testing.md), every buffer freed, every MR deregistered once, and the real
# driver's hazards (a table freed during a P2P call, tests/fakes/INTERFACE.md) no more than the
# free callbacks nvidia.ko ran (one table freed each; not only those that invalidated or failed
# a registration: on R515 a callback that finds put_pages in flight does neither, and the
# put_pages waiting for the API lock meets the freed table), none where nothing is freed during
# a call.
expect_race() {
	min=$((ITERS / 100 > 0 ? ITERS / 100 : 1))
	callbacks=$(outcome callbacks)
	expect setup_reg_failed -eq 0
	if [ "$race" = many ]; then expect free_ok -eq $((2 * ITERS)); else expect free_ok -eq "$ITERS"; fi
	case $race in
	reg-free)
		expect reg_ok -ge "$min"
		expect nv_peer_mem.invalidations -ge "$min"
		expect dereg_ok -eq "$(outcome reg_ok)" "each registration deregistered"
		expect reg_efault -eq $(($(outcome nv_peer_mem.err_not_mine) + $(outcome nv_peer_mem.err_freed_during_registration))) \
			"each EFAULT a free the module saw"
		expect hazards -le "$callbacks" "one a free callback at most"
		;;
	many)
		# No buffer is freed while it is registered here: each thread registers its own, which
		# stays allocated until its deregistration. Whenever nv_peer_mem's client is
		# registered, every range is GPU memory of the registering process (the thread
		# allocated it) and nv_mem must claim it: a client that declines one is wrong, so
		# reg_declined (asked and declined, the fake ib_core's count) must be 0. The only
		# EFAULT the race can cause is ib_core's when no client is registered at all, in the
		# gap between a successful rmmod of the loop below and its modprobe: none when it never
		# unloaded. Every registration ends in one of the two (unexpected=0 checks the rest).
		expect reg_ok -ge "$min"
		expect reg_declined -eq 0 "no registration of a live buffer declined"
		[ "$unloaded" -gt 0 ] || expect reg_efault -eq 0 "the module never went: no EFAULT"
		expect reg_ok -eq $((2 * ITERS - $(outcome reg_efault))) "every registration made or found no client"
		expect dereg_ok -eq "$(outcome reg_ok)" "each registration deregistered"
		expect hazards -eq 0
		;;
	*)
		n=$([ "$race" = overlap-free ] && echo 2 || echo 1)
		all="$all dereg_done=$(($(outcome dereg_ok) + $(outcome dereg_already_gone)))"
		expect dereg_done -eq $((n * ITERS)) "each MR deregistered once, by the client or the core"
		if [ "$race" = dereg-free ]; then expect nv_peer_mem.invalidations -ge 1
		else expect nv_peer_mem.invalidations -ge "$min"; fi
		expect hazards -le "$callbacks" "one a free callback at most"
		;;
	esac
}

# run RACE JITTER_US: ITERS iterations in chunks; one summary line.
run() {
	race=$1 jitter=$2 done_iters=0 rc=0
	ctl_ib "stress clear"
	: >/tmp/stress.lines
	before=$(counters)
	hz0=$(nv_stat hazards) cb0=$(nv_stat callbacks)
	t0=$(cut -d' ' -f1 /proc/uptime)
	while [ $done_iters -lt "$ITERS" ]; do
		n=$((ITERS - done_iters))
		[ $n -gt $CHUNK ] && n=$CHUNK
		ctl_ib "stress $race $n $jitter" || rc=1
		# The fake keeps 8 KiB of lines (100 000 iterations make 200): move each out.
		cat $IBC/stress >>/tmp/stress.lines
		ctl_ib "stress clear"
		drain
		[ $rc = 0 ] || break
		done_iters=$((done_iters + n))
	done
	t1=$(cut -d' ' -f1 /proc/uptime)
	# Sum the chunks' outcome counters of this race.
	sum=$(grep "race=$race " /tmp/stress.lines | tr ' ' '\n' | grep '=' | grep -v '^race=\|^jitter_us=' |
		awk -F= '{ s[$1] += $2; if (!($1 in o)) { o[$1] = n++ } } END { for (k in o) k2[o[k]] = k; for (i = 0; i < n; i++) printf "%s=%d ", k2[i], s[k2[i]] }')
	module=$(echo "$COUNTERS|$before|$(counters)" | awk -F'|' '{
		n = split($1, name, " "); split($2, b, " "); split($3, a, " ")
		for (i = 1; i <= n; i++) printf "nv_peer_mem.%s=%d ", name[i], a[i] - b[i] }')
	hz=$(($(nv_stat hazards) - hz0)) cb=$(($(nv_stat callbacks) - cb0))
	echo "stress: $race: ${sum}${module}callbacks=$cb hazards=$hz seconds=$(echo "$t1 $t0" | awk '{ printf "%.0f", $1 - $2 }')"
	check "$race: $ITERS iterations, no unexpected outcome" sh -c "test $rc = 0 && echo '$sum' | grep -q 'iterations=$ITERS ' && echo '$sum' | grep -q ' unexpected=0 '"
	all="$sum ${module}callbacks=$cb hazards=$hz"
	# many's judge needs the rmmod loop's count: it runs once the loop has stopped.
	[ "$race" = many ] || expect_race
}

check "load" load_world
# No cost model: under TCG its sleeps of tens of microseconds cost milliseconds each (a fifth to
# over half of an iteration, measured), and the fake's own emulated work already holds the API lock
# for longer than the modelled call, so frees still land inside pins and maps.
echo 0 >/sys/module/nvidia/parameters/cost_scale_pct
run reg-free 5000
run dereg-free 1500
run worker-free 1500
run overlap-free 1500

# Registrations on both NICs at once, while a shell loop runs rmmod nv_peer_mem (and modprobe
# again when it went): the module must either refuse (a registration holds it) or leave
# cleanly, never in between; a registration while it is gone finds no client (EFAULT). Every
# reload must succeed.
rm -f /tmp/rmmod.stop
(
	ok_n=0 busy_n=0 reload_failed=0
	while [ ! -e /tmp/rmmod.stop ]; do
		if rmmod nv_peer_mem 2>/dev/null; then
			ok_n=$((ok_n + 1))
			modprobe nv_peer_mem || reload_failed=$((reload_failed + 1))
		else busy_n=$((busy_n + 1)); fi
	done
	echo "$ok_n $busy_n $reload_failed" >/tmp/rmmod.counts
) &
run many 0
touch /tmp/rmmod.stop
wait
read -r unloaded refused reload_failed </tmp/rmmod.counts
echo "stress: rmmod: unloaded=$unloaded refused=$refused reload_failed=$reload_failed (during $ITERS iterations of many)"
race=many
expect_race
check "rmmod attempts were made" test $((unloaded + refused)) -gt 0
check "every reload after an rmmod loaded nv_peer_mem again ($unloaded)" test "$reload_failed" = 0
check "nv_peer_mem loaded at the end" test -d /sys/module/nv_peer_mem
# The module's state after the reloads, not only that it is there: a registration works.
check "cudaMalloc after the races" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
check "a registration works after the reloads" ctl_ib "reg 9 edu0 $GPU_VA 0x40000"
check "deregister" ctl_ib "dereg 9"
check "cudaFree" ctl_nv "free $GPU_VA"

drain
echo "stress: kernel log lines: $loglines"
check "no MR left in ib_core" test "$(ib_stat regs)" = 0
check "no FAKE-VIOLATION" test "$(ib_stat violations)$(nv_stat violations)" = 00
expect_nv_clean "after the races"
check "no context holds the module" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "unload" unload_world
# Kernel reports of every chunk, for the harness's scan; and the last lines for context.
sed 's/^/KLOG: /' /tmp/stress.bad
sed 's/^/KLOG: (last) /' /tmp/stress.tail
finish
