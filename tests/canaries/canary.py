"""A canary: plants one kind of kernel report through the fake nvidia.ko ("canary KIND"), then
treats the kernel log as the scenario's name says. It must FAIL (canary-vm.sh turns that into a
PASS of the net):
  canary-drained-KIND    the log goes to the judge through klog_flush, as the scenarios that
                         start from an empty log do;
  canary-discarded-KIND  the log is hidden from the judge (DISCARDED lines): only the kernel's
                         flags (taint, debug_locks), which init checks after every scenario,
                         can tell.
  canary-misuse-BUG      a misbehaving client (the fake nvidia.ko's "misuse BUG"): a client bug
                         the double must report, as the real driver's failure would show; the
                         log goes to the judge.
KIND: warn kasan lockdep ubsan list violation hung rcu-stall softlockup bug-line dmar-fault
(canary_plant, tests/vm/lib.py). BUG: read-failed-table put-in-callback unmap-after-callback
put-twice."""
from lib import *

how, _, kind = SCENARIO.removeprefix("canary-").partition("-")
check("load", load_world)
if how == "misuse":
    if not ctl_nv(f"misuse {kind}"):
        not_ok(f"the misbehaving client {kind} did not run to its end")
else:
    canary_plant(kind)
if how in ("drained", "misuse"):
    klog_flush()
elif how == "discarded":
    # Kept out of the judge's sight (not KLOG lines), but on the console: canary-vm.sh checks
    # that the planted report is among them, so the flags had something to catch.
    for line in output("dmesg", "-c", stderr=False)[1].splitlines():
        say(f"DISCARDED: {line}")
if how == "misuse":
    # The bug is the only thing wrong: it leaves nothing pinned or mapped behind.
    left = nv_left()
    if not left:
        ok("the misbehaving client left nothing pinned or mapped")
    else:
        not_ok(f"the misbehaving client left in nvidia: {left}")
    ok(f"misbehaved: {kind}")
else:
    ok(f"planted: {kind}, the log {how}")
# The violation counter is the fake's own; the harness reads the log line, not the counter.
unload_world()
finish()
