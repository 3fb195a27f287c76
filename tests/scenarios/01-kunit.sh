# shellcheck shell=sh
# The module's KUnit suites (`#[kunit_tests]` in src/, Documentation/testing.md): the pure logic
# no emulated world can reach, such as an sg entry at the 4 GiB limit. KUnit runs them when
# nv_peer_mem loads, on kernels with the macro (6.15 and later) and CONFIG_KUNIT=y; vm/init
# filters them out of every other scenario's loads, this one lets them run. One line per suite
# here; parse-log.py judges the same KTAP lines again as kunit:<suite> results.
SUITES="nv_peer_mem_sg nv_peer_mem_gpu_range nv_peer_mem_versions nv_peer_mem_peer_mem nv_peer_mem_slots nv_peer_mem_registry"
GLOB=/sys/module/kunit/parameters/filter_glob
kver=$(uname -r)
major=${kver%%.*} minor=${kver#*.} minor=${minor%%[!0-9]*}
# Written without a newline: the parameter keeps what it is given, and a glob ending in one
# matches no suite.
if [ -e $GLOB ]; then
	glob0=$(cat $GLOB)
	printf %s 'nv_peer_mem_*' >$GLOB
fi
check "load (KUnit runs the suites)" load_world
[ -z "${glob0:-}" ] || printf %s "$glob0" >$GLOB

if [ ! -e /sys/module/nv_peer_mem/sections/.kunit_test_suites ]; then
	if [ ! -e $GLOB ]; then
		ok "no KUnit on this kernel (Linux $kver is built without CONFIG_KUNIT=y)"
	elif [ "$major" -lt 6 ] || { [ "$major" = 6 ] && [ "$minor" -lt 15 ]; }; then
		ok "no KUnit on this kernel (Linux $kver has no #[kunit_tests])"
	else
		not_ok "Linux $kver has #[kunit_tests] and KUnit, but nv_peer_mem has no suites (Kbuild's nvpm_kunit)"
	fi
	check "unload" unload_world
	finish
fi

# The kernel log without its timestamps. Read, not drained: vm/init hands it to the judge.
ktap=$(dmesg | sed 's/^\[[^]]*\] //')
for s in $SUITES; do
	# "<verdict> <cases run> <cases planned> <failed or skipped cases>", or "missing".
	r=$(printf '%s\n' "$ktap" | awk -v s="$s" '
		$0 == "    # Subtest: " s { on = 1; n = 0; plan = "?"; bad = ""; next }
		!on { next }
		/^    1\.\.[0-9]+$/ { plan = substr($1, 4) }
		/^    ok [0-9]+ / { n++; if (/ # SKIP/) bad = bad " " $3 "(skipped)" }
		/^    not ok [0-9]+ / { n++; bad = bad " " $4 }
		$0 ~ "^(not )?ok [0-9]+ " s "( |$)" { print ($1 == "ok" ? "ok" : "failed"), n, plan, bad; on = 0; seen = 1 }
		END { if (!seen) print "missing" }')
	# shellcheck disable=SC2086 # its words
	set -- $r
	case $1:$# in
	ok:3) if [ "$2" = "$3" ] && [ "$2" -gt 0 ]; then ok "kunit $s: $2 cases"
		else not_ok "kunit $s: $2 cases of $3 ran"; fi ;;
	missing:*) not_ok "kunit $s: no result in the kernel log" ;;
	*) v=$1 n=$2 plan=$3; shift 3; not_ok "kunit $s: $v, $n of $plan cases ran, not ok:${*:+ $*}" ;;
	esac
done
# Every suite that ran is one the harness knows (SUITES, tests/README.md).
for s in $(printf '%s\n' "$ktap" | sed -n 's/^\(not \)\{0,1\}ok [0-9]\{1,\} \(nv_peer_mem_[a-z0-9_]*\).*/\2/p'); do
	case " $SUITES " in *" $s "*) ;; *) not_ok "kunit $s: a suite this scenario does not know" ;; esac
done
# The tests put back every context they made (each holds a module reference).
check "no module reference left by the tests" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "unload" unload_world
finish
