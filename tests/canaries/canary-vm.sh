#!/bin/bash
# The net's own test: boots the test kernel with scenarios that plant each kind of kernel
# report (canary_plant in tests/vm/lib.py: the fake nvidia.ko's "canary KIND", the fake
# ib_core's "canary dmar-fault"), and passes only where the judge (tests/vm/parse-log.py)
# failed the scenario that met it, with the report itself among the lines it judged (the KLOG
# lines that match KERNEL_REPORTS and no KERNEL_NOTICES). Hosts: a scenario that drains the log
# (canary.py), one that throws it away (only the kernel's flags can tell), a run of the
# fault-injection sweep, a race of the in-kernel stress and make bench's VM (bench-vm).
# Lockdep reports once per boot and then switches itself off, so every host of a lockdep
# canary has a boot of its own: five boots.
# Beside them, the misbehaving clients (canary-misuse-*): one client bug each, which the
# double must report. The first boot runs R515's nvidia.ko, the generation whose put_pages
# reads the table (a put from two threads is a use after free there, harmless from R535 on).
# usage: canary-vm.sh KBUILD INITRD WORK APPEND
# Prints "PASS canary:<host>" when every report planted there failed it, "FAIL ..." otherwise.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kbuild=$1 initrd=$2 work=$3 append=$4
failed=0

# What the judge counts as a report, as parse-log.py reads it from lib.py.
lib_pattern() { PYTHONPATH=$here/../vm python3 -c "import lib; print(lib.$1)"; }
reports=$(lib_pattern KERNEL_REPORTS) notices=$(lib_pattern KERNEL_NOTICES)
if [ -z "$reports" ] || [ -z "$notices" ]; then
	echo "FAIL canary: no KERNEL_REPORTS or KERNEL_NOTICES in lib.py"
	exit 1
fi
# judged: the lines of a scenario's block that the judge fails it for (the serial console's
# carriage returns dropped)
judged() { grep '^KLOG:' | tr -d '\r' | grep -E -- "$reports" | grep -vE -- "$notices"; }

# signature KIND: how the kernel words that report (in a KLOG line the judge read)
signature() {
	case $1 in
	kasan) echo 'KASAN: [a-z-]*use-after-free in fnv_canary' ;;
	warn) echo 'WARNING:.*canary\.c' ;;
	ubsan) echo 'UBSAN: array-index-out-of-bounds in .*canary\.c' ;;
	list) echo 'list_add corruption' ;;
	violation) echo 'FAKE-VIOLATION: canary' ;;
	lockdep) echo 'possible circular locking dependency' ;;
	hung) echo 'INFO: task .* blocked for more than' ;;
	rcu-stall) echo 'rcu: INFO: rcu_[a-z_]* (self-)?detected (expedited )?stall' ;;
	softlockup) echo 'watchdog: BUG: soft lockup' ;;
	dmar-fault) echo 'DMAR: \[DMA Read[^]]*\] Request device .* fault addr 0x100000 ' ;;
	bug-line) echo 'nv_peer_mem: bug: ' ;;
	# The misbehaving clients (tests/fakes/nvidia/misuse.c), as the double reports each bug.
	read-failed-table) echo 'KASAN: [a-z-]*use-after-free in fnv_misuse_read_failed_table' ;;
	put-in-callback) echo 'FAKE-VIOLATION: put_pages: called from inside a free callback' ;;
	unmap-after-callback) echo 'FAKE-VIOLATION: dma_unmap_pages: page table of va=0x6d0000000000 was freed .* while this call ran' ;;
	put-twice) echo 'FAKE-VIOLATION: put_pages: page table of va=0x6d0000000000 was put by another thread while this call ran' ;;
	esac
}
# bug_messages: every "bug: ..." message of the module (every .rs file of src/), as an ERE of the line the
# kernel log shows ("nv_peer_mem: " and the message, each {} a value). The bug-line canary
# must plant each one, so a message added to src/ without a canary fails here.
bug_messages() {
	# shellcheck disable=SC2016 # $ is the regular expression's, not the shell's
	grep -ohE '"bug: ([^"\\]|\\[^n])*(\\n)?"' "$here"/../../src/*.rs "$here"/../../src/*/*.rs |
		sed -e 's/^"//' -e 's/"$//' -e 's/\\n$//' -e 's/[].[*^$()+?|\\]/\\&/g' -e 's/{[^}]*}/.*/g' \
			-e 's/^/nv_peer_mem: /' -e 's/$/$/'
}
# block LOG SCENARIO: the scenario's lines in the console log
block() { sed -n "/^=== BEGIN $2\r\{0,1\}\$/,/^=== END $2 /p" "$1"; }

# boot N APPEND SCENARIO=EXPECTATION...: one boot; EXPECTATION is "log:KIND,KIND" (each report
# among the scenario's judged KLOG lines) or "flag:taint" / "flag:debug_locks" (init's check).
boot() {
	local n=$1 app=$2 dir=$work/vm-canaries-$1 out sc want line body k missing
	shift 2
	local names=()
	for a in "$@"; do names+=("${a%%=*}"); done
	out=$(NVPM_VM_APPEND="$app" "$here/../vm/run-vm.sh" "$kbuild" "$initrd" "$dir" "${names[@]}" 2>&1)
	for sc in boot kmemleak; do
		if grep -q "^PASS $sc$" <<<"$out"; then echo "PASS canary:$n:$sc"
		else echo "FAIL canary:$n:$sc: $(grep -m1 "^FAIL $sc" <<<"$out" || echo 'no result')"; failed=1; fi
	done
	for a in "$@"; do
		sc=${a%%=*} want=${a#*=}
		line=$(grep -m1 -E "^(PASS|FAIL) $sc( |$)" <<<"$out")
		body=$(block "$dir/console.log" "$sc")
		missing=()
		case $want in
		log:*)
			for k in ${want#log:}; do
				judged <<<"$body" | grep -qE -- "$(signature "$k")" || missing+=("$k")
				[ "$k" = bug-line ] || continue
				while read -r m; do
					judged <<<"$body" | grep -qE -- "$m" || missing+=("'${m%$}'")
				done < <(bug_messages)
			done
			;;
		flag:*)
			# The report happened (in the lines hidden from the judge), and the flag caught it.
			k=${sc#canary-*-}
			grep -qE "^DISCARDED: .*$(signature "$k")" <<<"$body" || missing+=("$k report")
			case $want in
			flag:taint) grep -q '^not ok - the kernel was tainted' <<<"$body" || missing+=("the taint check") ;;
			flag:debug_locks) grep -q '^not ok - lockdep switched itself off' <<<"$body" || missing+=("the debug_locks check") ;;
			esac
			;;
		esac
		if [[ $line == FAIL* ]] && [ ${#missing[@]} = 0 ]; then
			echo "PASS canary:${sc#canary-}: failed its host (${want//,/ })"
		elif [[ $line == FAIL* ]]; then
			echo "FAIL canary:${sc#canary-}: failed, but not for what was planted: no ${missing[*]} among its judged lines"
			failed=1
		else
			echo "FAIL canary:${sc#canary-}: ${line:-no result}: the planted ${want#*:} passed unseen"
			failed=1
		fi
	done
}
# A KASAN report switches lockdep off for the rest of the boot (its taint is "lockdep now
# unreliable"): in each boot lockdep's canary comes before any KASAN one. The sweep, the stress
# and the bench each plant every kind in $all, lockdep's first, in a boot of their own. The
# canaries that spin (rcu-stall, softlockup: 20 to 30 s each, more under load) are planted in a
# drained scenario only: their lines would reach the judge from the other hosts' drains as
# every other report's do (what matches KERNEL_REPORTS is handed on, whatever its kind).
all="lockdep,hung,bug-line,dmar-fault,warn,ubsan,list,violation,kasan"
first_append=
for w in $append; do
	case $w in nvpm.nvidia=*) w=nvpm.nvidia=r515 ;; esac
	first_append+="${first_append:+ }$w"
done
boot 1 "$first_append" canary-discarded-warn=flag:taint \
	canary-drained-ubsan=log:ubsan canary-drained-list=log:list canary-drained-violation=log:violation \
	canary-drained-hung=log:hung canary-misuse-put-in-callback=log:put-in-callback \
	canary-misuse-unmap-after-callback=log:unmap-after-callback canary-misuse-put-twice=log:put-twice \
	canary-discarded-lockdep=flag:debug_locks canary-discarded-kasan=flag:taint
boot 2 "$append" canary-drained-lockdep=log:lockdep canary-drained-bug-line=log:bug-line \
	canary-drained-dmar-fault=log:dmar-fault canary-drained-rcu-stall=log:rcu-stall \
	canary-drained-softlockup=log:softlockup
boot 3 "$append nvpm.canary=$all" 30-sweep="log:${all//,/ }"
boot 4 "$append nvpm.canary=$all nvpm.stress_iters=100" 29-stress="log:${all//,/ }"
# Not alone: a boot's time limit grows with its scenarios (vm/run-vm.sh), and one scenario's is
# too short for a loaded host's boot and the bench's setup.
boot 5 "$append nvpm.canary=$all" bench-vm="log:${all//,/ }" canary-drained-warn=log:warn \
	canary-drained-kasan=log:kasan canary-misuse-read-failed-table=log:read-failed-table
exit $failed
