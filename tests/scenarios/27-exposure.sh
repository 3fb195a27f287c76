# shellcheck shell=sh
# What the module exposes, and to whom (Documentation/design.md, "What the module exposes"):
# every file it creates has the least mode that works and is root's; a user without root
# changes nothing and cannot load or unload it; no kernel address reaches the kernel log, even
# with debug logging on.
M=/sys/module/nv_peer_mem
V=/sys/kernel/debug/nv_peer_mem/registrations
# mode_is MODE PATH: octal mode and owner root.
mode_is() { [ "$(stat -c '%a %u:%g' "$2")" = "$1 0:0" ]; }

klog_flush
check "a user cannot load the module" refused as_nobody modprobe nv_peer_mem
check "  not loaded" test ! -e $M
check "load, debug logging on (enable_dbg=1)" load_world "" "" enable_dbg=1

check "exactly the five documented parameters" \
	test "$(ls $M/parameters | paste -sd ' ')" = "coalesce_sg enable_dbg peerdirect_support persistent_api_support probe_then_pin"
for p in enable_dbg probe_then_pin coalesce_sg; do
	check "parameter $p: 0644 (an admin may change it at run time)" mode_is 644 $M/parameters/$p
done
for p in peerdirect_support persistent_api_support; do
	check "parameter $p: 0444 (read once, at load)" mode_is 444 $M/parameters/$p
done
check "counters: 0444 files in 0755 directories, all root's" sh -c "
	test -z \"\$(find $M/stats -type f ! -perm 0444)\" && test -z \"\$(find $M/stats -type d ! -perm 0755)\" &&
	test -z \"\$(find $M/stats ! -user 0)\" && test -z \"\$(find $M/stats ! -group 0)\""
check "the registration view: 0400" mode_is 400 $V
check "  its directory: 0755, nothing else in it" sh -c "
	test \"\$(stat -c '%a %u' ${V%/*})\" = '755 0' && test \"\$(ls ${V%/*})\" = registrations"

for p in enable_dbg probe_then_pin coalesce_sg; do
	before=$(cat $M/parameters/$p)
	check "a user cannot write $p" refused as_nobody sh -c "echo 0 >$M/parameters/$p"
	check "  $p unchanged" test "$(cat $M/parameters/$p)" = "$before"
done
check "a user cannot write a counter" refused as_nobody sh -c "echo 0 >$M/stats/nv_mem/registrations"
check "a user cannot read the view" refused as_nobody cat $V
check "a user cannot unload the module (rmmod)" refused as_nobody rmmod nv_peer_mem
check "  nor with modprobe -r" refused as_nobody modprobe -r nv_peer_mem
check "  still loaded" test -d $M

# Every log line of a registration's life, with debug logging on: registration, DMA,
# invalidation by cudaFree, deregistration, a refused context, the persistent client.
check "cudaMalloc 2 MiB" ctl_nv "alloc $GPU_VA 0x200000 shuffled"
check "register it" ctl_ib "reg 1 edu0 $GPU_VA 0x200000"
dma_check 1 0x10000 "$GPU_VA + 0x10000"
check "cudaFree under it: invalidated" ctl_nv "free $GPU_VA"
ctl_ib "dereg 1" 2>/dev/null # 4.9 released it inside the invalidation already
check "a stale context from ib_core" ctl_ib "bogus-context nv_mem 1"
check "a foreign one, the size of a kernel address" ctl_ib "bogus-context nv_mem 0xffff888012345678"
if nv_has_persistent; then
	check "cudaMalloc, CQ buffer on nv_mem_nc" sh -c "echo 'alloc $GPU_VA 0x40000 contiguous' >$NV/ctl &&
		echo 'reg 2 edu0 $GPU_VA 0x40000 cq' >$IBC/ctl && echo 'dereg 2' >$IBC/ctl && echo 'free $GPU_VA' >$NV/ctl"
fi
check "host memory refused" refused ctl_ib "reg 3 edu0 0x7ffd00001000 0x10000"
expect_nv_clean
check "unload" unload_world
log=$(dmesg | grep 'nv_peer_mem')
check "the module logged (debug logging was on)" test -n "$log"
check "no kernel address in its log lines" sh -c "! printf '%s\n' \"\$1\" | grep -qi 'ffff[0-9a-f]\{12\}'" - "$log"
finish
