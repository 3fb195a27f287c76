# shellcheck shell=sh
# A buggy core hands back client contexts that are stale (an already released registration's
# id, whose slot a live registration has taken again) or foreign (random pointers):
# nv_peer_mem refuses them with a log line and never dereferences them (KASAN would report it),
# and live registrations are untouched.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
V=/sys/kernel/debug/nv_peer_mem/registrations
check "register MR 1" ctl_ib "reg 1 edu0 $GPU_VA 0x40000"
stale=$(awk 'NR == 2 {print $1}' $V)
check "MR 1's context id read from the registration view ($stale)" test -n "$stale"
check "deregister MR 1 (its context becomes stale)" ctl_ib "dereg 1"
check "register MR 2" ctl_ib "reg 2 edu0 $GPU_VA 0x40000"
live=$(awk 'NR == 2 {print $1}' $V)
# The registry takes the lowest free slot again: the ids differ only in their generation.
check "MR 2 has MR 1's slot under a new id ($live)" \
	test $((live & 0xffffffff)) = $((stale & 0xffffffff)) -a "$live" != "$stale"
klog_flush
for v in "$stale" 1 0xdeadbeef 0xffff888000001000 0; do
	check "client survives context $v" ctl_ib "bogus-context nv_mem $v"
done
check "each refusal logged" test "$(dmesg | grep -c 'nv_peer_mem: .*unknown client context')" -ge 15
check "  without the pointer-sized values (no kernel address in the log)" \
	sh -c "! dmesg | grep 'nv_peer_mem: ' | grep -qi 'ffff888000001000\|deadbeef'"
check "MR 2 still registered" grep -q '^id=2 ' $IBC/regs
dma_check 2 0x20000 "$GPU_VA + 0x20000"
check "module reference count untouched" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 1
check "deregister MR 2" ctl_ib "dereg 2"
expect_nv_clean
check "unload" unload_world
finish
