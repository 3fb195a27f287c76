#!/bin/sh
# The stock world's test driver, run by nvpm-stock.service once the system has booted: the
# scenarios named on the kernel command line (nvpm.scenarios=a,b,c), each framed and followed
# by its kernel log as tests/vm/init does, so that tests/vm/parse-log.py judges them as it
# judges every other world; then the machine powers off (the host boots it again for the
# scenarios that need a reboot).
T=/usr/lib/nvpm-stock
# A start by hand must not look like the boot's (nv_peer_mem-service's ONBOOT check).
systemctl is-system-running --wait >/dev/null 2>&1
# The boot is over before udev has loaded every module its devices want (nvidia and ib_core for
# the GPUs and NICs): under a loaded make check stock-onboot-no once looked before it had.
udevadm settle --timeout=180 >/dev/null 2>&1
echo "VM-READY kernel $(uname -r) init $(cat /proc/1/comm) system $(systemctl is-system-running)"
scenarios=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nvpm\.scenarios=//p' | tr ',' ' ')
# KTAP, as tests/vm/init: the plan, then a result line after each scenario's block.
echo "KTAP version 1"
echo "1..$(echo $scenarios | wc -w)"
n=0
for s in $scenarios; do
	echo "=== BEGIN $s"
	# The scenarios run as in the other worlds: a python3 process each (tests/vm/lib.py).
	NVPM_SCENARIO=$s PYTHONPATH=$T python3 -u "$T/scenarios/$s.py" 2>&1
	rc=$?
	# The registration scenarios leave the modules unloaded; the stock-* ones (and the Secure
	# Boot world's sb-*, tests/secureboot/) keep what the system's services did.
	case $s in stock-* | sb-*) ;; *) python3 $T/cleanup.py >/dev/null 2>&1 ;; esac
	dmesg -c | sed 's/^/KLOG: /'
	echo "=== END $s rc=$rc"
	n=$((n + 1))
	if [ $rc = 0 ]; then echo "ok $n $s"; else echo "not ok $n $s # rc=$rc"; fi
done
echo "VM-DONE"
systemctl poweroff
