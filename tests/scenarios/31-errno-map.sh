# shellcheck shell=sh
# The errno map: every condition Documentation/design.md and troubleshooting.md map to an errno,
# each made to happen once, and judged on the three things the docs promise for it: the errno
# the client hands ib_core (what ibv_reg_mr returns), the one counter that rises, and the log
# line (its words, and that it is the only one). The client's calls are made directly through
# the fake core's "call" command, whose "calls" file shows each call's return value exactly:
# busybox's echo writes again after EINTR, so a registration through "reg" could not show it.
# tests/lint/promises.py names these lines as the tests of those promises.
S=/sys/module/nv_peer_mem/stats
P=/sys/module/nv_peer_mem/parameters
LEN=0x20000

check "load" load_world
if core_is_49; then form="(legacy PeerDirect registration)"; else form="(extended; MLNX_OFED 4.9 needs peerdirect_support=1 PeerDirect registration)"; fi
check "the load line: loaded, version ... $form" sh -c "dmesg | grep -qF 'nv_peer_mem: loaded, version ' && dmesg | grep -qF '$form'"
check "cudaMalloc" ctl_nv "alloc $GPU_VA $LEN contiguous"
klog_flush

# Everything below runs per case, under an emulator: the counters, nvidia.ko's gauges and the
# calls are read with the shell's own read, not with forks.
# err_counters CLIENT: $counted, its err_* counters as "name=value" words.
err_counters() {
	counted=
	for f in "$S/$1"/err_*; do
		read -r v <"$f"
		counted="$counted ${f##*/}=$v"
	done
}
# rose BEFORE AFTER: $rise, the counters that changed between two err_counters, as "name+N"
# words (both lists come from the same glob, in the same order).
rose() {
	rise=
	set -- "$1" "$2"
	a=$1 b=$2
	for kv in $a; do
		set -- $b
		after=$1
		shift
		b=$*
		[ "$kv" = "$after" ] || rise="${rise:+$rise }${kv%%=*}+$((${after#*=} - ${kv#*=}))"
	done
}
# gauges: $left, nvidia.ko's gauges that are not back to zero (as nv_left), and $refs, the
# module's reference count.
gauges() {
	left=
	while read -r key value; do
		case $key in pins | persistent_pins | mappings | dead_tables)
			[ "$value" = 0 ] || left="$left$key=$value," ;;
		esac
	done <$NV/stats
	read -r refs </sys/module/nv_peer_mem/refcnt
}

# module_lines: the module's lines in the kernel log, errnos by name. Without
# CONFIG_SYMBOLIC_ERRNAME (the test kernels) the kernel's Error prints "Error(12)" where a
# distribution kernel prints "ENOMEM".
module_lines() {
	dmesg | grep 'nv_peer_mem: ' | sed -e 's/Error(-\{0,1\}4)/EINTR/g' -e 's/Error(-\{0,1\}5)/EIO/g' \
		-e 's/Error(-\{0,1\}12)/ENOMEM/g' -e 's/Error(-\{0,1\}16)/EBUSY/g' -e 's/Error(-\{0,1\}22)/EINVAL/g' \
		-e 's/Error(-\{0,1\}95)/EOPNOTSUPP/g' -e 's/Error(-\{0,1\}524)/ENOTSUPP/g'
}

# has_text LINES TEXT: one of LINES contains TEXT, as it is (no pattern).
has_text() { printf '%s\n' "$1" | grep -qF -- "$2"; }

# errno_case DESCRIPTION INJECT CLIENT DEV OPS EXPECTED COUNTERS LOGTEXT [PARAMETER]
#   INJECT    nvidia.ko's "inject ..." arguments, or "-"
#   OPS       the client calls, in order ("call" command of the fake ib_core)
#   EXPECTED  what each returned ("calls": acquire=1 get_pages=-12 release=0)
#   COUNTERS  the err_* counters that rise, "name+N" ("-": none)
#   LOGTEXT   the module's only log line contains this text ("-": no line at all)
#   PARAMETER a module parameter set to 1 for the case
# Afterwards nothing may be pinned, mapped or referenced.
errno_case() {
	d=$1 inj=$2 client=$3 dev=$4 ops=$5 want=$6 counters=$7 text=$8 param=${9:-}
	[ "$inj" = - ] || ctl_nv "inject $inj" || not_ok "$d: inject $inj refused"
	[ -z "$param" ] || echo 1 >"$P/$param"
	err_counters "$client"
	before=$counted
	if ctl_ib "call $client $dev $GPU_VA $LEN $ops"; then read -r got <$IBC/calls; else got="call failed"; fi
	ctl_nv "inject clear"
	[ -z "$param" ] || echo 0 >"$P/$param"
	lines=$(module_lines)
	klog_flush
	err_counters "$client"
	rose "$before" "$counted"
	gauges
	if [ "$got" = "$want" ]; then ok "$d: $got"; else not_ok "$d: got '$got', wanted '$want'"; fi
	[ "$counters" != - ] || counters=
	if [ "$rise" = "$counters" ]; then ok "  counted: ${rise:-nothing}"
	else not_ok "  counters: '$rise', wanted '$counters'"; fi
	if [ "$text" = - ]; then
		if [ -z "$lines" ]; then ok "  nothing logged"; else not_ok "  logged: $lines"; fi
	elif one_line "$lines" && has_text "$lines" "$text"; then
		ok "  logged: $text"
	else
		not_ok "  log lines, wanted one with '$text': ${lines:-none}"
	fi
	if [ -z "$left" ] && [ "$refs" = 0 ]; then ok "  nothing left"
	else not_ok "  left: ${left}refcnt=$refs"; fi
}

LIFE="acquire get_pages dma_map dma_unmap put_pages release"
PIN="acquire get_pages release"
MAP="acquire get_pages dma_map put_pages release"

errno_case "a registration (the control case)" - nv_mem edu0 "$LIFE" \
	"acquire=1 get_pages=0 dma_map=0 dma_unmap=0 put_pages=0 release=0" - -

# acquire: NVIDIA's EINVAL means "not GPU memory of this process": declined silently (ib_core
# then tries host memory and says EFAULT); any other error claims the buffer so that get_pages
# pins again and hands on NVIDIA's errno instead of EFAULT.
errno_case "EINVAL from nvidia in acquire: declined, not logged" "get_pages -22 1" nv_mem edu0 acquire \
	"acquire=0" "err_not_mine+1" -
errno_case "EINVAL from nvidia in get_pages (probe_then_pin=1): EINVAL" "get_pages -22 1 1" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-22 release=0" "err_nvidia_einval+1" "pinning GPU memory va=$GPU_VA len=$LEN failed: EINVAL" probe_then_pin
errno_case "ENOMEM from nvidia (BAR1 exhausted): ENOMEM" "get_pages -12 2" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-12 release=0" "err_nvidia_enomem+1" "pinning GPU memory va=$GPU_VA len=$LEN failed: ENOMEM (GPU BAR1 space exhausted? see nvidia-smi -q -d MEMORY)"
errno_case "EIO from nvidia: EIO" "get_pages -5 2" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-5 release=0" "err_nvidia_eio+1" "pinning GPU memory va=$GPU_VA len=$LEN failed: EIO"
errno_case "EOPNOTSUPP from nvidia: EOPNOTSUPP" "get_pages -95 2" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-95 release=0" "err_nvidia_eopnotsupp+1" "pinning GPU memory va=$GPU_VA len=$LEN failed: EOPNOTSUPP"
errno_case "ENOTSUPP (524) from nvidia: EOPNOTSUPP" "get_pages -524 2" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-95 release=0" "err_nvidia_eopnotsupp+1" "pinning GPU memory va=$GPU_VA len=$LEN failed: ENOTSUPP"
# The ERESTART family (kernel-internal, 512-516 but 515) reaches user space as EINTR; the other
# internal errnos (512 and above) as EIO; every errno below 512 as it is.
for e in 512 513 514 516; do
	errno_case "ERESTART* ($e) from nvidia: EINTR" "get_pages -$e 2" nv_mem edu0 "$PIN" \
		"acquire=1 get_pages=-4 release=0" "err_nvidia_other+1" "pinning GPU memory va=$GPU_VA len=$LEN failed:"
done
errno_case "EPROBE_DEFER (517), another internal errno, from nvidia: EIO" "get_pages -517 2" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-5 release=0" "err_nvidia_other+1" "pinning GPU memory va=$GPU_VA len=$LEN failed:"
errno_case "ENOIOCTLCMD (515), internal, from nvidia: EIO" "get_pages -515 2" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-5 release=0" "err_nvidia_other+1" "pinning GPU memory va=$GPU_VA len=$LEN failed:"
errno_case "EBUSY from nvidia: passed on" "get_pages -16 2" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-16 release=0" "err_nvidia_other+1" "pinning GPU memory va=$GPU_VA len=$LEN failed: EBUSY"

# NVIDIA's page table fails the module's checks: EINVAL, counted with the other NVIDIA errors.
errno_case "4 KiB GPU pages: EINVAL" "get_pages pagesize:0 1" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-22 release=0" "err_nvidia_other+1" "is not supported (only 64 KiB pages)"
errno_case "a page table of an unknown version: EINVAL" "get_pages version 1" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-22 release=0" "err_nvidia_other+1" "; this nv_peer_mem understands 1.x and 2.x (driver up to 595): update nv_peer_mem"
errno_case "a page table one entry short: EINVAL" "get_pages entries 1" nv_mem edu0 "$PIN" \
	"acquire=1 get_pages=-22 release=0" "err_nvidia_other+1" "entries, the range needs"

# dma_map: NVIDIA's errno passed on (through the same map), counted as err_mapping.
errno_case "ENOMEM from nvidia's dma_map_pages: ENOMEM" "dma_map_pages -12 1" nv_mem edu0 "$MAP" \
	"acquire=1 get_pages=0 dma_map=-12 put_pages=0 release=0" "err_mapping+1" "DMA-mapping GPU memory va=$GPU_VA len=$LEN failed: ENOMEM"
errno_case "ERESTARTSYS (512) from nvidia's dma_map_pages: EINTR" "dma_map_pages -512 1" nv_mem edu0 "$MAP" \
	"acquire=1 get_pages=0 dma_map=-4 put_pages=0 release=0" "err_mapping+1" "DMA-mapping GPU memory va=$GPU_VA len=$LEN failed:"
errno_case "ENOTSUPP (524) from nvidia's dma_map_pages: EOPNOTSUPP" "dma_map_pages -524 1" nv_mem edu0 "$MAP" \
	"acquire=1 get_pages=0 dma_map=-95 put_pages=0 release=0" "err_mapping+1" "DMA-mapping GPU memory va=$GPU_VA len=$LEN failed: ENOTSUPP"
errno_case "a DMA mapping of an unknown version: EINVAL" "dma_map_pages version 1" nv_mem edu0 "$MAP" \
	"acquire=1 get_pages=0 dma_map=-22 put_pages=0 release=0" "err_mapping+1" "; this nv_peer_mem understands 2.3 and later 2.x"
errno_case "a DMA mapping one entry short: EINVAL" "dma_map_pages entries 1" nv_mem edu0 "$MAP" \
	"acquire=1 get_pages=0 dma_map=-22 put_pages=0 release=0" "err_mapping+1" "DMA mapping has 1 entries of size type"
errno_case "a DMA device that is not PCI: EINVAL" - nv_mem none "$MAP" \
	"acquire=1 get_pages=0 dma_map=-22 put_pages=0 release=0" "err_mapping+1" "): the DMA device is not a PCI device"

# Calls out of order or for another range: EINVAL, counted as refused.
errno_case "get_pages with another range than acquire: EINVAL" - nv_mem edu0 "acquire get_pages:$(hex "$GPU_VA + 0x10000"):0x10000 release" \
	"acquire=1 get_pages=-22 release=0" "err_refused_context+1" "does not match acquire $GPU_VA (+$LEN)"
errno_case "get_pages twice: EINVAL" - nv_mem edu0 "acquire get_pages get_pages put_pages release" \
	"acquire=1 get_pages=0 get_pages=-22 put_pages=0 release=0" "err_refused_context+1" "get_pages for va $GPU_VA in phase pinned: refused"
errno_case "dma_map before get_pages: EINVAL" - nv_mem edu0 "acquire dma_map release" \
	"acquire=1 dma_map=-22 release=0" "err_refused_context+1" "dma_map for va $GPU_VA in phase claimed: refused"
errno_case "dma_unmap without dma_map: EINVAL" - nv_mem edu0 "acquire get_pages dma_unmap put_pages release" \
	"acquire=1 get_pages=0 dma_unmap=-22 put_pages=0 release=0" "err_refused_context+1" "dma_unmap for va $GPU_VA in phase pinned: refused"
errno_case "release of a mapped registration: unmapped and unpinned" - nv_mem edu0 "acquire get_pages dma_map release" \
	"acquire=1 get_pages=0 dma_map=0 release=0" - "release of a still-mapped registration at $GPU_VA: unmapping"

# An unknown client context: refused with EINVAL (get_pages, dma_unmap) and one line per call.
klog_flush
before=$(nvpm_stat nv_mem err_refused_context)
check "an unknown client context (1)" ctl_ib "bogus-context nv_mem 1"
# refused_calls TEXT: get_pages and dma_unmap returned -22 (EINVAL), and each of the four calls
# logged "<op>: TEXT".
refused_calls() {
	[ "$(dmesg | grep -cE 'bogus-context: nv_mem (get_pages|dma_unmap)\(.*\) returned -22$')" = 2 ] &&
		[ "$(dmesg | grep -F ": $1" | grep -cE 'nv_peer_mem: (get_pages|dma_unmap|put_pages|release): ')" = 4 ]
}
check "  -22 from get_pages and dma_unmap, one line per call: unknown client context 1 from ib_core" \
	refused_calls "unknown client context 1 from ib_core"
check "  err_refused_context+4" test "$(nvpm_stat nv_mem err_refused_context)" = $((before + 4))
klog_flush
check "a client context that is no id (a kernel address)" ctl_ib "bogus-context nv_mem 0xffff888012345678"
check "  -22 from get_pages and dma_unmap, one line per call: unknown client context from ib_core (not an id this module issued)" \
	refused_calls "unknown client context from ib_core (not an id this module issued)"
klog_flush

# enable_dbg=1: GPU memory NVIDIA would not pin is claimed with a line saying so.
echo 1 >$P/enable_dbg
ctl_nv "inject get_pages -5 2"
check "enable_dbg=1, EIO from nvidia" ctl_ib "call nv_mem edu0 $GPU_VA $LEN $PIN"
ctl_nv "inject clear"
echo 0 >$P/enable_dbg
lines=$(module_lines)
klog_flush
check "  logged: claiming $GPU_VA (+$LEN) although pinning failed: EIO" has_text "$lines" "claiming $GPU_VA (+$LEN) although pinning failed: EIO"

# Out of memory in acquire: the buffer is claimed anyway and get_pages fails with ENOMEM, so the
# MR is not offered to nv_mem_nc (design.md, "Out of memory in acquire"). The n-th allocation of
# the call fails, n = 1, 2, ... until the context's own allocation is the one.
echo N >/sys/kernel/debug/failslab/ignore-gfp-wait
echo 0 >/sys/kernel/debug/failslab/verbose
before=$(nvpm_stat nv_mem err_alloc) n=1 got=
while [ $n -le 30 ]; do
	klog_flush
	# This shell calls (NVIDIA recognises GPU memory only in the process that allocated it), and
	# disarms before it forks again.
	if { echo $n >/proc/thread-self/fail-nth && echo "call nv_mem edu0 $GPU_VA $LEN $PIN" >$IBC/ctl; } 2>/dev/null; then
		called=1
	else
		called=0
	fi
	{ echo 0; } 2>/dev/null >/proc/thread-self/fail-nth
	if [ $called = 1 ]; then got=$(cat $IBC/calls); else got=; fi
	lines=$(module_lines)
	case $lines in *"no memory for a context"*) break ;; esac
	n=$((n + 1))
done
echo Y >/sys/kernel/debug/failslab/ignore-gfp-wait
echo 1 >/sys/kernel/debug/failslab/verbose
klog_flush
check "the context's allocation failed (allocation $n of the call): get_pages ENOMEM" test "$got" = "acquire=1 get_pages=-12 release=0"
check "  logged: acquire $GPU_VA (+$LEN): no memory for a context (ENOMEM): the registration fails with ENOMEM" \
	has_text "$lines" "acquire $GPU_VA (+$LEN): no memory for a context (ENOMEM): the registration fails with ENOMEM"
check "  err_alloc+1" test "$(nvpm_stat nv_mem err_alloc)" = $((before + 1))
check "  nothing left in nvidia" test -z "$(nv_left)"
check "  no module reference left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0

# The persistent client (nv_mem_nc, R515 and later): NVIDIA's EOPNOTSUPP (95) in acquire is a
# decline, as EINVAL is; the kernel-internal ENOTSUPP (524), which MIG and vGPU answer to a
# persistent pin, claims the buffer and reaches ibv_reg_mr as EOPNOTSUPP.
if nv_has_persistent; then
	if ctl_nv "inject get_pages_persistent -5 1 1000" 2>/dev/null; then PERS=get_pages_persistent; else PERS=get_pages; fi
	errno_case "nv_mem_nc: EOPNOTSUPP from nvidia in acquire: declined, not logged" "$PERS -95 1" nv_mem_nc edu0 acquire \
		"acquire=0" "err_not_mine+1" -
	errno_case "nv_mem_nc: ENOTSUPP (524, MIG or vGPU) from nvidia: EOPNOTSUPP" "$PERS -524 2" nv_mem_nc edu0 "$PIN" \
		"acquire=1 get_pages=-95 release=0" "err_nvidia_eopnotsupp+1" "pinning GPU memory va=$GPU_VA len=$LEN failed: ENOTSUPP"
	errno_case "nv_mem_nc: a registration" - nv_mem_nc edu0 "$LIFE" \
		"acquire=1 get_pages=0 dma_map=0 dma_unmap=0 put_pages=0 release=0" - -
fi

# put_pages: NVIDIA's ENOMEM (its stack allocation, before it touched the pin) is retried once,
# so the pin goes; a second failure is logged and the pin is NVIDIA's until cudaFree.
# put_case DESCRIPTION REG-ARGS INJECT LEFT LOGTEXT...: register, inject, deregister; each
# LOGTEXT is one of the module's lines; nvidia.ko is left holding LEFT (nv_left's words).
put_case() {
	d=$1 regargs=$2 inj=$3 want_left=$4
	shift 4
	check "$d: register" ctl_ib "reg 1 edu0 $GPU_VA $LEN${regargs:+ $regargs}"
	ctl_nv "inject $inj"
	klog_flush
	check "  deregister" ctl_ib "dereg 1"
	ctl_nv "inject clear"
	lines=$(module_lines)
	klog_flush
	check "  $# line(s) logged" test "$(printf '%s\n' "$lines" | grep -c .)" = $#
	for t in "$@"; do check "  logged: $t" has_text "$lines" "$t"; done
	check "  nvidia holds: ${want_left:-nothing}" test "$(nv_left)" = "$want_left"
	check "  no module reference left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
}
RETRY="unpinning GPU memory at $GPU_VA: nvidia.ko was out of memory, retrying once"
put_case "ENOMEM from put_pages, once: retried, unpinned" "" "put_pages -12 1" "" "$RETRY"
# Twice: the pin stays NVIDIA's and cudaFree's callback finds no registration. Not on R470, whose
# drivers leave the table to the client's callback: a callback that finds no registration frees
# nothing, so there nvidia.ko's table of such a pin is never freed (not handled yet).
if [ "$NV_GEN" != r470 ]; then
	put_case "ENOMEM from put_pages, twice: logged, the pin is nvidia's" "" "put_pages -12 2" "pins=1," \
		"$RETRY" "releasing GPU pages at $GPU_VA (+$LEN) failed: ENOMEM"
	check "cudaFree ends the pin" ctl_nv "free $GPU_VA"
	check "  nothing left in nvidia" test -z "$(nv_left)"
	check "cudaMalloc again" ctl_nv "alloc $GPU_VA $LEN contiguous"
fi
# dma_unmap_pages fails: logged (ib_core gets no errno from dma_unmap's teardown).
put_case "EINVAL from dma_unmap_pages: logged" "" "dma_unmap_pages -22 1" "" "nvidia_p2p_dma_unmap_pages failed: -22"
if nv_has_persistent; then
	if ctl_nv "inject put_pages_persistent -5 1 1000" 2>/dev/null; then PUT=put_pages_persistent; else PUT=put_pages; fi
	ctl_nv "inject clear"
	put_case "nv_mem_nc: ENOMEM from put_pages, once: retried, unpinned" cq "$PUT -12 1" "" "$RETRY"
fi

check "cudaFree" ctl_nv "free $GPU_VA"
expect_nv_clean

# persistent_api_support=1: one persistent client named nv_mem, or, without persistent pages,
# the invalidating one with a warning.
check "unload nv_peer_mem" rmmod nv_peer_mem
klog_flush
check "load with persistent_api_support=1" modprobe nv_peer_mem persistent_api_support=1
lines=$(module_lines)
if nv_has_persistent; then
	check "  logged: PeerDirect registration, persistent nv_mem)" has_text "$lines" "PeerDirect registration, persistent nv_mem)"
else
	check "  logged: persistent_api_support=1 but nvidia.ko offers no persistent pages: registering the invalidating nv_mem instead" \
		has_text "$lines" "persistent_api_support=1 but nvidia.ko offers no persistent pages: registering the invalidating nv_mem instead"
fi
klog_flush
check "unload" unload_world
finish
