# shellcheck shell=sh
# The module's counters (/sys/module/nv_peer_mem/stats/<client>/) follow what happened, exactly,
# and the registration view (debugfs) lists live registrations; both are read-only, the view is
# root's only, and neither shows a kernel pointer.
S=/sys/module/nv_peer_mem/stats
V=/sys/kernel/debug/nv_peer_mem/registrations
st() { cat "$S/$1/$2"; }
# expect CLIENT NAME=VALUE...: each counter has exactly that value.
expect() {
	c=$1; shift
	bad=
	for kv in "$@"; do
		got=$(st "$c" "${kv%%=*}")
		[ "$got" = "$(( ${kv#*=} ))" ] || bad="$bad ${kv%%=*}=$got (want ${kv#*=})"
	done
	if [ -z "$bad" ]; then ok "$c: $*"; else not_ok "$c:$bad"; fi
}

check "load" load_world
check "stats/nv_mem exists" test -d $S/nv_mem
if nv_has_persistent; then
	check "stats/nv_mem_nc exists" test -d $S/nv_mem_nc
else
	check "no stats/nv_mem_nc without persistent pages" test ! -e $S/nv_mem_nc
fi
check "15 counters, all 0444 and owned by root" \
	sh -c "test \$(ls $S/nv_mem | wc -l) = 15 && test -z \"\$(find $S -type f ! -perm 0444)\" && test -z \"\$(find $S ! -user 0)\""
expect nv_mem live_registrations=0 pinned_bytes=0 registrations=0 err_not_mine=0
check "counters refuse writes, even root's" sh -c "! echo 5 2>/dev/null >$S/nv_mem/registrations"
check "a user reads them" test "$(as_nobody cat $S/nv_mem/registrations)" = 0
check "the view is root's only (0400)" test "$(stat -c %a $V)" = 400
check "a user cannot read the view" refused as_nobody cat $V
check "a user cannot unload the module" refused as_nobody rmmod nv_peer_mem
check "  still loaded" test -d /sys/module/nv_peer_mem
check "a user cannot write a parameter" refused as_nobody sh -c "echo 1 >/sys/module/nv_peer_mem/parameters/enable_dbg"
check "  enable_dbg unchanged" test "$(cat /sys/module/nv_peer_mem/parameters/enable_dbg)" = 0

check "cudaMalloc 2 MiB" ctl_nv "alloc $GPU_VA 0x200000 shuffled"
check "cudaMalloc 256 KiB" ctl_nv "alloc $(hex "$GPU_VA + 0x400000") 0x40000 contiguous"
# One sg entry per page, so that the shuffled buffer's entry count is known (26-coalesced-sg
# covers merging).
P=/sys/module/nv_peer_mem/parameters
check "one sg entry per page (coalesce_sg=0)" sh -c "echo 0 >$P/coalesce_sg"
check "register 2 MiB" ctl_ib "reg 1 edu0 $GPU_VA 0x200000"
check "register 256 KiB at +4 MiB, unaligned (+0x1000, 0x3e000 bytes)" ctl_ib "reg 2 edu1 $(hex "$GPU_VA + 0x401000") 0x3e000"
expect nv_mem live_registrations=2 pinned_bytes="0x200000 + 0x40000" registrations=2 deregistrations=0
check "restore coalesce_sg=-1 (auto)" sh -c "echo -1 >$P/coalesce_sg"
check "the view lists both, mapped, with their NIC, 32 + 4 entries and the bytes held" sh -c "
	grep -q '^[1-9][0-9]* nv_mem $GPU_VA-$(hex "$GPU_VA + 0x200000") 2097152 mapped [0-9a-f:.]* 32 [0-9]* [1-9][0-9]*\$' $V &&
	grep -q '^[1-9][0-9]* nv_mem $(hex "$GPU_VA + 0x401000")-$(hex "$GPU_VA + 0x43f000") 253952 mapped [0-9a-f:.]* 4 [0-9]* [1-9][0-9]*\$' $V"
check "the two NICs differ in the view" test "$(awk 'NR > 1 { print $6 }' $V | sort -u | wc -l)" = 2
check "no kernel pointer in the view" sh -c "! grep -qi 'ffff[0-9a-f]\{12\}' $V"
klog_flush
expect_write_error "Bad address" "host memory is not nv_mem's" $IBC/ctl "reg 3 edu0 0x7ffd00001000 0x10000"
expect nv_mem err_not_mine=1 live_registrations=2
check "cudaFree under MR 1: invalidated" ctl_nv "free $GPU_VA"
expect nv_mem invalidations=1 live_registrations=1 pinned_bytes=0x40000 deregistrations=0
ctl_ib "dereg 1" 2>/dev/null # 4.9 released it inside the invalidation already
check "deregister MR 2" ctl_ib "dereg 2"
expect nv_mem live_registrations=0 pinned_bytes=0 registrations=2 deregistrations=1 invalidations=1
check "the view is empty again" test "$(wc -l <$V)" = 1

ctl_nv "inject get_pages -12 2"
expect_write_error "Cannot allocate memory" "BAR1 exhausted (ENOMEM)" $IBC/ctl "reg 4 edu0 $(hex "$GPU_VA + 0x400000") 0x40000"
ctl_nv "inject clear"
expect nv_mem err_nvidia_enomem=1 registrations=2 live_registrations=0
check "a stale context from ib_core (get_pages, dma_unmap, put_pages, release)" ctl_ib "bogus-context nv_mem 1"
expect nv_mem err_refused_context=4
if nv_has_persistent; then
	check "CQ buffer on nv_mem_nc" ctl_ib "reg 5 edu0 $(hex "$GPU_VA + 0x400000") 0x40000 cq"
	expect nv_mem_nc live_registrations=1 pinned_bytes=0x40000 registrations=1
	check "the view names its client" grep -q '^[0-9]* nv_mem_nc ' $V
	check "deregister it" ctl_ib "dereg 5"
	expect nv_mem_nc live_registrations=0 pinned_bytes=0 deregistrations=1
fi
check "cudaFree" ctl_nv "free $(hex "$GPU_VA + 0x400000")"
expect_nv_clean
check "unload" unload_world
check "stats and the view went with the module" sh -c "! test -e $S && ! test -e /sys/kernel/debug/nv_peer_mem"
finish
