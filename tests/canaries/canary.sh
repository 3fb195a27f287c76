# shellcheck shell=sh
# A canary: plants one kind of kernel report through the fake nvidia.ko ("canary KIND"), then
# treats the kernel log as the scenario's name says. It must FAIL (canary-vm.sh turns that
# into a PASS of the net):
#   canary-drained-KIND    the log goes to the judge through klog_flush, as the scenarios
#                          that start from an empty log do;
#   canary-discarded-KIND  the log is hidden from the judge (DISCARDED lines): only the
#                          kernel's flags (taint, debug_locks), which init checks after every
#                          scenario, can tell.
# KIND: warn kasan lockdep ubsan list violation hung. $s is the scenario's name (vm/init).
# shellcheck disable=SC2154 # $s: the scenario name, set by vm/init
how=${s#canary-}
kind=${how#*-}
how=${how%%-*}
check "load" load_world
if [ "$kind" = hung ]; then
	# khungtaskd reports a task in D state for longer than the timeout (init sets 60 s).
	echo 3 >/proc/sys/kernel/hung_task_timeout_secs
	ctl_nv "canary hung 10"
	echo 60 >/proc/sys/kernel/hung_task_timeout_secs
else
	ctl_nv "canary $kind"
fi
case $how in
drained) klog_flush ;;
# Kept out of the judge's sight (not KLOG lines), but on the console: canary-vm.sh checks that
# the planted report is among them, so the flags had something to catch.
discarded) dmesg -c | sed 's/^/DISCARDED: /' ;;
esac
ok "planted: $kind, the log $how"
# The violation counter is the fake's own; the harness reads the log line, not the counter.
unload_world
finish
