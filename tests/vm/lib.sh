# shellcheck shell=sh
# Helpers for scenario scripts, sourced inside the test VM (busybox sh).
# A scenario prints "ok - ..." / "not ok - ..." lines; any "not ok", a non-zero exit or a bad
# line in its kernel log fails it.

IBC=/sys/kernel/debug/fake_ib_core
NV=/sys/kernel/debug/fake_nvidia
# shellcheck disable=SC2034 # used by the scenarios
PEERS=/sys/kernel/mm/memory_peers
# shellcheck disable=SC2034 # used by the scenarios
GPU_VA=0x7f0000000000 # where scenarios put their first GPU buffer
FAILED=0
# Kernel reports: what fails a scenario's kernel log (vm/parse-log.py reads this line), and what
# the scenarios that drain the kernel log themselves hand back to the harness. One line, ERE.
# Besides the kernel's debugging reports (soft lockups are "BUG: soft lockup"): RCU stalls
# ("INFO: rcu_preempt detected stalls on CPUs/tasks", "... self-detected stall on CPU",
# expedited and RCU Tasks stalls), IOMMU faults ("DMAR: DRHD: handling fault status reg",
# "DMAR: [DMA Read NO_PASID] Request device [...] fault addr ...") and the module's own "bug:"
# lines (src/: every message that starts so is an invariant the module found broken).
# shellcheck disable=SC2034 # used by the scenarios
KERNEL_REPORTS='BUG:|WARNING:|KASAN|kmemleak:|possible circular locking|possible recursive locking|inconsistent lock state|lockdep|INFO: task .* blocked|Oops|general protection|FAKE-VIOLATION|Kernel panic|sleeping function called from invalid context|UBSAN|list_add corruption|refcount_t:|INFO: [a-z_]+ (self-)?detected (expedited )?stall|hard LOCKUP|DMAR: .*fault|nv_peer_mem: bug: '
# Boot-time notices that KERNEL_REPORTS' words match but that report nothing (parse-log.py).
# shellcheck disable=SC2034 # read by parse-log.py
KERNEL_NOTICES='[Cc]ommand line: |RCU lockdep checking is enabled|kmemleak: Kernel memory leak detector initialized|kmemleak: Automatic memory scanning thread started'

# The emulated world of this boot (tests/README.md, "The matrix").
NV_GEN=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nvpm\.nvidia=//p')
IB_CORE=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nvpm\.ibcore=//p')
: "${NV_GEN:=r580}" "${IB_CORE:=24.x}"
# nvidia.ko offers persistent pages (R515 and later).
nv_has_persistent() { [ "$NV_GEN" != r470 ]; }
# MLNX_OFED 4.9: nv_mem is registered in the legacy form and ib_core unmaps inside invalidate.
core_is_49() { [ "$IB_CORE" = 4.9 ]; }

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; FAILED=1; }

# check DESCRIPTION COMMAND...: the command must succeed.
check() {
	d=$1; shift
	if "$@"; then ok "$d"; else not_ok "$d"; fi
}

# expect_write_error ERRNO_TEXT DESCRIPTION FILE LINE: writing LINE into FILE must fail with
# ERRNO_TEXT (strerror text as busybox prints it, e.g. "Bad address"). The write is made by this
# shell, not a subshell: NVIDIA recognises GPU memory only in the process that allocated it.
expect_write_error() {
	want=$1 d=$2 f=$3 line=$4
	if { echo "$line" >"$f"; } 2>/tmp/write-error; then rc=0; else rc=1; fi
	out=$(cat /tmp/write-error)
	case "$rc:$out" in
	0:*) not_ok "$d (write succeeded, wanted '$want')" ;;
	*"$want"*) ok "$d" ;;
	*) not_ok "$d (got '$out', wanted '$want')" ;;
	esac
}

# contains TEXT PATTERN: TEXT has a line matching the basic regular expression PATTERN.
contains() { printf '%s\n' "$1" | grep -q -- "$2"; }

# one_line TEXT: TEXT is a single line.
one_line() { [ "$(printf '%s\n' "$1" | wc -l)" = 1 ]; }

ctl_ib() { echo "$*" >$IBC/ctl; }
ctl_nv() { echo "$*" >$NV/ctl; }

# stat FILE KEY: the value of KEY in a "key value" stats file.
stat_of() { sed -n "s/^$2 //p" "$1"; }

nv_stat() { stat_of $NV/stats "$1"; }
ib_stat() { stat_of $IBC/stats "$1"; }

# peer_counter CLIENT COUNTER: ib_core's counter for a client. MLNX_OFED 24.x on kernels 6.6 and
# later has no /sys/kernel/mm/memory_peers, so this reads the fake's debugfs view of the same
# counters.
peer_counter() { sed -n "s/^name=$1 .*[ ]$2=\([0-9]*\).*/\1/p" $IBC/clients; }

# wait_log PATTERN [TENTHS]: wait until the kernel log has a line matching PATTERN (default 10 s).
wait_log() {
	n=0
	until dmesg | grep -q -- "$1"; do
		n=$((n + 1))
		[ "$n" -lt "${2:-100}" ] || return 1
		sleep 0.1
	done
}

# race ARGS...: tests/vm/race.c, writes from threads of one process (see there).

# Under kernel lockdown (the Secure Boot world, tests/secureboot/) debugfs refuses to open the
# doubles' writable files; the doubles offer them as misc devices too (/dev/fake_ib_core_ctl,
# ...), bind-mounted here over the debugfs files, so the scenarios write $IBC/ctl as anywhere.
# Does nothing without lockdown.
lockdown_ctl() {
	[ -r /sys/kernel/security/lockdown ] || return 0
	grep -q '\[none\]' /sys/kernel/security/lockdown && return 0
	for f in fake_ib_core/ctl fake_ib_core/dma_buf fake_nvidia/ctl; do
		dev=/dev/$(echo $f | tr / _)
		[ -c "$dev" ] && [ -e "/sys/kernel/debug/$f" ] || continue
		grep -q " /sys/kernel/debug/$f " /proc/mounts || mount --bind "$dev" "/sys/kernel/debug/$f" || return 1
	done
}

# load_world [nvidia.ko path] [ib_core args] [nv_peer_mem args]
load_world() {
	if [ -n "$1" ]; then insmod "$1" || return 1; else modprobe nvidia || return 1; fi
	# shellcheck disable=SC2086
	modprobe ib_core $2 || return 1
	lockdown_ctl || return 1
	# shellcheck disable=SC2086
	modprobe nv_peer_mem $3
}

unload_world() {
	rmmod nv_peer_mem && rmmod ib_core && rmmod nvidia
}

# hexadecimal of an arithmetic expression
hex() { printf '0x%x' $(($1)); }

# expect_nv_clean [WHAT]: NVIDIA pins, mappings and dead tables back to zero, and no P2P call was
# made from inside a free callback (the real driver refuses those with -EIO).
expect_nv_clean() {
	left=$(nv_left)
	case $left in *pins=*) ;; *) expect_stats_clean "$1" ;; esac
	r=$(nv_stat reentry_refused)
	[ "$r" = 0 ] || left="${left}reentry_refused=$r,"
	if [ -z "$left" ]; then ok "no pins, mappings or tables left in nvidia${1:+ ($1)}"
	else not_ok "left in nvidia${1:+ ($1)}: $left"; fi
}

# nv_left: nvidia.ko's gauges that are not back to zero, as "name=value," (empty: nothing left).
nv_left() {
	for k in pins persistent_pins mappings dead_tables; do
		v=$(nv_stat $k)
		[ "$v" = 0 ] || printf '%s=%s,' "$k" "$v"
	done
}

# nvpm_stat CLIENT NAME: one of nv_peer_mem's counters (/sys/module/nv_peer_mem/stats/).
nvpm_stat() { cat "/sys/module/nv_peer_mem/stats/$1/$2"; }

# expect_stats_clean [WHAT]: when nothing is pinned in nvidia, nv_peer_mem's own gauges agree:
# no live registration and no pinned byte in any client (stats.rs).
expect_stats_clean() {
	[ -d /sys/module/nv_peer_mem/stats ] || return 0
	left=
	for dir in /sys/module/nv_peer_mem/stats/*/; do
		l=$(cat "${dir}live_registrations") b=$(cat "${dir}pinned_bytes")
		[ "$l$b" = 00 ] || left="$left $(basename "$dir"): live_registrations=$l pinned_bytes=$b"
	done
	if [ -z "$left" ]; then ok "nv_peer_mem's counters show nothing pinned${1:+ ($1)}"
	else not_ok "nv_peer_mem's counters${1:+ ($1)}:$left"; fi
}

# expected_sha VA: the SHA-256 the host computed for the 4 KiB chunk of GPU memory at VA.
expected_sha() {
	va=$(($1))
	page=$(hex "va & ~0xffff")
	line=$(grep "^$page " $NV/pages) || { echo "no-such-page"; return; }
	set -- $line
	gpu=${3#gpu=}
	chunk=$((($2 + (va & 0xffff)) / 4096))
	sed -n "$((chunk + 1))p" "/etc/nvpm/gpu$gpu.sha256"
}

# dma_check MR OFFSET VA: NIC DMA-reads 4 KiB at OFFSET of MR and compares with the host data
# of the GPU memory at VA (= MR address + OFFSET).
dma_check() {
	if ! ctl_ib "read $1 $(($2)) 4096"; then not_ok "DMA read of MR $1 at offset $(hex "$2") failed"; return; fi
	got=$(sha256sum <$IBC/dma_buf) got=${got%% *}
	want=$(expected_sha "$3")
	if [ "$got" = "$want" ]; then ok "MR $1 offset $(hex "$2"): NIC read the host's data"
	else not_ok "MR $1 offset $(hex "$2"): NIC read $got, host wrote $want"; fi
}

# expect_hazards N|MIN-MAX: how many REAL-DRIVER-HAZARD lines (the real driver's own
# use-after-free windows, see the fake's INTERFACE) this scenario may produce; parse-log.py checks.
expect_hazards() { echo "hazards expected: $1"; }

# refused COMMAND...: the command (a shell function too) fails; its output is dropped.
refused() { ! "$@" >/dev/null 2>&1; }

# as_nobody COMMAND...: run COMMAND as user and group 65534, with no supplementary groups and
# no capabilities (busybox's setpriv cannot change ids; the VM has python3 for the doctor).
as_nobody() {
	/usr/bin/python3 -c 'import os, sys; os.setgroups([]); os.setgid(65534); os.setuid(65534); os.execvp(sys.argv[1], sys.argv[1:])' "$@"
}

finish() { exit $FAILED; }
# canary_plant KIND: the net's own test (tests/canaries/) plants one kernel report of that kind:
# the fake nvidia.ko's "canary KIND", the fake ib_core's "canary dmar-fault" (its NIC edu0 reads
# a bus address nothing mapped), and for "hung" a writer asleep in D state for 10 s while
# khungtaskd's timeout is 3 s (init sets 60).
canary_plant() {
	case $1 in
	hung)
		echo 3 >/proc/sys/kernel/hung_task_timeout_secs
		ctl_nv "canary hung 10"
		echo 60 >/proc/sys/kernel/hung_task_timeout_secs
		;;
	dmar-fault)
		ctl_ib "canary dmar-fault edu0"
		# The IOMMU driver reports it from its fault interrupt, after the transfer.
		wait_log 'DMAR: .*fault addr'
		;;
	*) ctl_nv "canary $1" ;;
	esac
}
# With nvpm.canary=KIND,KIND,... the stress and the sweep plant those kinds of kernel report,
# the next two not yet planted at each of their log drains (plant_canary; the stress of the
# canaries' boot has six drains), and must fail.
CANARY=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nvpm\.canary=//p')
plant_canary() {
	[ -n "$CANARY" ] || return 0
	_planted=0
	for _kind in $(echo "$CANARY" | tr , ' '); do
		# shellcheck disable=SC2154 # $s: the scenario's name, set by vm/init
		[ ! -e "/tmp/canary-$s.$_kind" ] || continue
		: >"/tmp/canary-$s.$_kind"
		echo "canary: planting $_kind"
		canary_plant "$_kind"
		_planted=$((_planted + 1))
		[ $_planted -lt 2 ] || return 0
	done
}
# klog_flush: the kernel log so far goes to the console as KLOG lines, where the judge reads it
# (parse-log.py), and leaves the ring buffer: what the scenario reads after it is its own.
klog_flush() { dmesg -c | sed 's/^/KLOG: /'; }
