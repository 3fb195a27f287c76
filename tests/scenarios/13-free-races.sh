# shellcheck shell=sh
# cudaFree racing registration and deregistration: whatever the interleaving, no double free,
# no leak, no deadlock (lockdep and KASAN watch), and every pin is gone at the end.
check "load" load_world
i=0
while [ $i -lt 12 ]; do
	va=$(hex "$GPU_VA + $i * 0x1000000")
	ctl_nv "alloc $va 0x100000 shuffled"
	(ctl_ib "reg $i edu$((i % 2)) $va 0x100000" 2>/dev/null) &
	[ $((i % 3)) = 0 ] && sleep 0
	ctl_nv "free $va"
	wait
	(ctl_ib "dereg $i" 2>/dev/null) &
	wait
	i=$((i + 1))
done
check "no registrations left" test -z "$(cat $IBC/regs)"
check "no module references left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "after 12 races"
# Deregistration racing the free of a live registration.
i=0
while [ $i -lt 8 ]; do
	ctl_nv "alloc $GPU_VA 0x80000 contiguous"
	ctl_ib "reg 1 edu0 $GPU_VA 0x80000"
	ctl_ib "dereg 1" &
	ctl_nv "free $GPU_VA"
	wait
	i=$((i + 1))
done
check "no registrations left (dereg vs free)" test -z "$(cat $IBC/regs)"
expect_nv_clean "after dereg/free races"
check "unload" unload_world
finish
