#!/bin/sh
# Between scenarios: drop every registration and buffer, unload the modules under test.
IBC=/sys/kernel/debug/fake_ib_core
NV=/sys/kernel/debug/fake_nvidia
if [ -e $IBC/regs ]; then
	sed -n 's/^id=\([0-9]*\) .*/\1/p' $IBC/regs | while read -r id; do echo "dereg $id" >$IBC/ctl; done
fi
if [ -e $NV/buffers ]; then
	sed -n 's/^va=\(0x[0-9a-f]*\) .*freed=0.*/\1/p' $NV/buffers | while read -r va; do echo "free $va" >$NV/ctl; done
	echo "inject clear" >$NV/ctl
fi
for m in nv_peer_mem nvidia_peermem ib_core nvidia; do
	grep -q "^$m " /proc/modules && rmmod $m
done
exit 0
