"""A start that cannot work says why in one line, exits non-zero and loads nothing: NVIDIA
driver missing, ib_core missing, nv_peer_mem refusing its options (the C module's users got
"modprobe: Invalid argument" and nothing else)."""
import os

from lib import *

SVC = "/etc/init.d/nv_peer_mem"
EXTRA = f"/lib/modules/{os.uname().release}/extra"


def try_start(want_rc, want_text, desc):
    rc, out = captured(SVC, "start")
    say(f"  $ service nv_peer_mem start: rc={rc}: {out}")
    check(f"{desc}: exit {want_rc}", rc == want_rc)
    check("  one line", one_line(out))
    check(f"  saying: {want_text}", has_line(out, want_text))
    check("  nv_peer_mem not loaded", not os.path.isdir("/sys/module/nv_peer_mem"))


run("mv", f"{EXTRA}/nvidia.ko", "/tmp/nvidia.ko")
try_start(5, "the nvidia module is not installed", "no NVIDIA driver")
run("mv", "/tmp/nvidia.ko", f"{EXTRA}/nvidia.ko")

run("mv", f"{EXTRA}/ib_core.ko", "/tmp/ib_core.ko")
try_start(5, "the ib_core module is not installed", "no MLNX_OFED ib_core")
run("mv", "/tmp/ib_core.ko", f"{EXTRA}/ib_core.ko")

os.makedirs("/etc/modprobe.d", exist_ok=True)
with open("/etc/modprobe.d/nv_peer_mem.conf", "w") as f:
    f.write("options nv_peer_mem enable_dbg=7\n")
try_start(1, "invalid for parameter .enable_dbg", "a bad module option")
os.remove("/etc/modprobe.d/nv_peer_mem.conf")

check("after the fixes, start works", run(SVC, "start"))
check("stop", run(SVC, "stop"))
finish()
