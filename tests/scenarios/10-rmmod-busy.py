"""rmmod while ib_core holds registrations fails with EBUSY and changes nothing."""
import re

from lib import *

check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x20000 contiguous")
check("register", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x20000")
rc, out = output("rmmod", "nv_peer_mem")
out = out.rstrip("\n")
check("rmmod refused", rc != 0)
if any(why in out for why in ("in use", "busy", "temporarily unavailable")):
    ok(f"  because it is in use ({out})")
else:
    not_ok(f"  unexpected rmmod error: {out}")
check("still loaded", re.search(r"^nv_peer_mem ", read("/proc/modules"), re.M))
dma_check(1, 0x10000, GPU_VA + 0x10000)
check("deregister", ctl_ib, "dereg 1")
check("rmmod now works", run, "rmmod", "nv_peer_mem")
expect_nv_clean()
check("unload", lambda: run("rmmod", "ib_core") and run("rmmod", "nvidia"))
finish()
