# shellcheck shell=sh
# make soak: SOAK_MINUTES (kernel command line nvpm.soak_minutes=, default 10) of random
# registrations and frees from several processes (NVIDIA finds GPU memory by process), each
# registration's data DMA-read by the NIC and compared with what the host wrote, while the
# nv_peer_mem service is stopped, started and restarted at random moments. A stop with live
# registrations must fail and leave the module loaded and working; a registration while the
# module is gone finds no client (EFAULT). At the end: every DMA read was right, nothing is
# left, no kernel report. Prints one "soak: ..." line (tests/testing-report.py keeps it).
MINUTES=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nvpm\.soak_minutes=//p')
: "${MINUTES:=10}"
WORKERS=3
svc=/etc/init.d/nv_peer_mem
: >/tmp/soak.bad

check "load the fakes" sh -c "modprobe nvidia && modprobe ib_core"
check "service start" $svc start
now() { cut -d. -f1 /proc/uptime; }
end=$(($(now) + MINUTES * 60))
# A random number in [0, $1), from the kernel.
rnd() { echo $(($(od -An -N2 -tu2 /dev/urandom) % $1)); }

# worker I: until the end, a GPU buffer at a time: cudaMalloc, register on a random NIC, DMA-read
# a random 4 KiB and compare, then one of: deregister and free; free under the registration
# (the free callback invalidates it: the NIC must lose access) and deregister; deregister on a
# kernel worker and free. Counts into /tmp/soak.I.
worker() {
	i=$1 k=0 regs=0 unloaded=0 checks=0 wrong=0 invalidated=0 lost=0 other=0
	base=$((0x7f0000000000 + i * 0x100000000))
	while [ "$(now)" -lt $end ]; do
		k=$((k + 1))
		id=$((i * 1000000 + k)) pages=$(($(rnd 16) + 1))
		va=$(hex "$base + ($k % 16) * 0x1000000") len=$(hex "$pages * 0x10000")
		layout=contiguous
		[ "$(rnd 2)" = 0 ] || layout=shuffled
		nic=edu$(rnd 2)
		ctl_nv "alloc $va $len $layout" 2>/dev/null || { other=$((other + 1)); continue; }
		# Not in a $( ): that would be another process, whose GPU memory this is not.
		if ! ctl_ib "reg $id $nic $va $len" 2>/tmp/soak.err.$i; then
			case $(cat /tmp/soak.err.$i) in
			*"Bad address"*) unloaded=$((unloaded + 1)) ;;
			*) other=$((other + 1)) ;;
			esac
			ctl_nv "free $va" 2>/dev/null
			continue
		fi
		regs=$((regs + 1))
		off=$(($(rnd "$pages") * 0x10000 + $(rnd 16) * 0x1000))
		# The fake ib_core keeps one DMA buffer for every reader: one read and hash at a time.
		until mkdir /tmp/soak.dma.lock 2>/dev/null; do usleep 1000; done
		if ctl_ib "read $id $off 4096" 2>/dev/null; then
			got=$(sha256sum <$IBC/dma_buf) got=${got%% *}
			checks=$((checks + 1))
			[ "$got" = "$(expected_sha "$va + $off")" ] || wrong=$((wrong + 1))
		else
			other=$((other + 1))
		fi
		rmdir /tmp/soak.dma.lock
		case $(rnd 3) in
		0) ctl_ib "dereg $id"; ctl_nv "free $va" ;;
		1)
			ctl_nv "free $va"
			invalidated=$((invalidated + 1))
			ctl_ib "read $id 0 4096" 2>/dev/null || lost=$((lost + 1))
			ctl_ib "dereg $id"
			;;
		2) ctl_ib "dereg $id worker"; ctl_nv "free $va" ;;
		esac
		# Now and then a pause, so that the service's stops find moments with no registration.
		[ "$(rnd 4)" != 0 ] || sleep $(($(rnd 3) + 1))
	done
	echo "$regs $unloaded $checks $wrong $invalidated $lost $other" >/tmp/soak.$i
}

# The admin: every 2-20 s a stop, a start or a restart of the service.
admin() {
	stops=0 refused=0 starts=0 restarts=0 broken=0
	while [ "$(now)" -lt $end ]; do
		sleep $(($(rnd 19) + 2))
		case $(rnd 3) in
		0)
			if $svc stop >/dev/null 2>&1; then
				stops=$((stops + 1))
				[ ! -d /sys/module/nv_peer_mem ] || broken=$((broken + 1))
			else
				refused=$((refused + 1))
				# Refused: still loaded, its client still registered.
				grep -q 'name=nv_mem ' $IBC/clients || broken=$((broken + 1))
			fi
			;;
		1) $svc start >/dev/null 2>&1 && starts=$((starts + 1)) ;;
		2) $svc restart >/dev/null 2>&1 && restarts=$((restarts + 1)) ;;
		esac
	done
	echo "$stops $refused $starts $restarts $broken" >/tmp/soak.admin
}

# Kernel log out of the ring buffer every 30 s, reports kept.
drain() { dmesg -c >/tmp/soak.chunk; grep -E "$KERNEL_REPORTS" /tmp/soak.chunk >>/tmp/soak.bad; }

w=0
while [ $w -lt $WORKERS ]; do
	worker $w &
	w=$((w + 1))
done
admin &
while [ "$(now)" -lt $end ]; do sleep 30; drain; done
wait
drain

regs=0 unloaded=0 checks=0 wrong=0 invalidated=0 lost=0 other=0
w=0
while [ $w -lt $WORKERS ]; do
	read -r a b c d e f g </tmp/soak.$w
	regs=$((regs + a)) unloaded=$((unloaded + b)) checks=$((checks + c)) wrong=$((wrong + d))
	invalidated=$((invalidated + e)) lost=$((lost + f)) other=$((other + g))
	w=$((w + 1))
done
read -r stops refused starts restarts broken </tmp/soak.admin
reports=$(wc -l </tmp/soak.bad)
echo "soak: minutes=$MINUTES workers=$WORKERS registrations=$regs dma_checks=$checks dma_wrong=$wrong invalidations=$invalidated nic_lost_access=$lost refused_while_stopped=$unloaded other_errors=$other service_stops=$stops stops_refused=$refused starts=$starts restarts=$restarts broken=$broken kernel_reports=$reports"
check "registrations were made ($regs)" test "$regs" -gt 0
check "every DMA read was right ($checks)" test "$wrong" = 0
check "the NIC lost access after every free ($invalidated)" test "$lost" = "$invalidated"
check "no other errors" test "$other" = 0
check "a refused stop left the module working, a stop unloaded it ($broken broken)" test "$broken" = 0
check "the service was stopped, started or restarted" test $((stops + refused + starts + restarts)) -gt 0
check "service start at the end" $svc start
check "no MR left in ib_core" test -z "$(cat $IBC/regs)"
expect_nv_clean "after the soak"
check "no context holds the module" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "service stop" $svc stop
check "unload the fakes" sh -c "rmmod ib_core && rmmod nvidia"
sed 's/^/KLOG: /' /tmp/soak.bad
finish
