"""NVIDIA's free callback can outlive ib_core's release of the registration: cudaFree racing a
deregistration. While the callback still runs the module's code, rmmod must be refused (else the
callback returns into freed module text); once it returns, everything is released."""
import re
import threading

from lib import *

check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")
check("register", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x40000")
dma_check(1, 0x10000, GPU_VA + 0x10000)
# The callback invalidates, then stalls freeing NVIDIA's page table. The stall is long (below the
# 60 s hung-task limit) and the test ends it itself once rmmod has been tried: a short one ran
# out before rmmod on a loaded machine (6.12, CI of 2026-11-25).
check("arm a 30 s stall in free_page_table", ctl_nv, "inject free_page_table sleep:30000")
# cudaFree from another thread of this process, as the shell's background job made it.
freed = []
freer = threading.Thread(target=lambda: freed.append(ctl_nv(f"free {GPU_VA:#x}")))
freer.start()
wait_log(r"free_page_table: injected stall", 200)
check("the callback is stalled after invalidating", re.search(r"id=1 .*invalidated=1", regs()))
check("deregister while the callback runs", ctl_ib, "dereg 1")
check("ib_core has released the registration", regs() == "")
check("the callback still holds a module reference", refcnt() == "1")
rc, out = output("rmmod", "nv_peer_mem")
out = out.rstrip("\n")
check("rmmod refused while the callback runs", rc != 0)
if any(w in out for w in ("in use", "busy", "temporarily unavailable")):
    ok(f"  because it is in use ({out})")
else:
    not_ok(f"  unexpected rmmod outcome: '{out}'")
check("the stall was still on during rmmod", "free_page_table: stall over" not in dmesg())
check("end the stall", ctl_nv, "inject wake")
freer.join()
check("cudaFree returns", freed == [True])
check("the stall was ended by the test, not by its timeout",
      "free_page_table: stall over (woken)" in dmesg())
check("module reference dropped after the callback", refcnt() == "0")
expect_nv_clean("after the callback")
check("unload", unload_world)
finish()
