"""The one window no client can close (Documentation/design.md, "What no client can prevent"):
cudaFree lands while nvidia_p2p_dma_map_pages waits for NVIDIA's API lock. The free path holds
that lock while it runs the free callback, and frees the page table when the callback returns;
the waiting dma_map_pages then uses the freed table inside the real driver. Waiting for it in
the callback would deadlock instead. The fake reports the driver's use after free
(REAL-DRIVER-HAZARD) instead of committing it; nv_peer_mem must fail the registration cleanly."""
import re

from lib import *


def grep(pattern, text):
    """`grep -q PATTERN`: TEXT has a line matching PATTERN."""
    return re.search(pattern, text, re.M) is not None


check("load", load_world)
hz0 = num(nv_stat("hazards"))
# Drivers before R515 leave a revoked table to the client, so there the call meets a dead table
# it can refuse; from R515 the driver has freed it.
hz = 0 if NV_GEN == "r470" else 1
expect_hazards(hz)
ctl_nv("inject dma_map_pages sleep:1500")
out = output("race", f"{NV}/ctl|alloc {GPU_VA:#x} 0x80000 shuffled",
             "--", f"{IBC}/ctl|reg 1 edu0 {GPU_VA:#x} 0x80000",
             f"{NV}/ctl|free {GPU_VA:#x}|700000",
             "--", f"{IBC}/ctl|dereg 1", stderr=False)[1]
say(f"  {' '.join(out.splitlines())}")
check("the registration failed (the memory was freed under it)", grep, r"^2\.1 Bad address", out)
check(f"the fake saw dma_map_pages meet the freed table ({hz}): the real driver's use after free",
      nv_stat("hazards") == str(hz0 + hz))
check("no registration left", regs() == "")
check("no module reference left", refcnt() == "0")
expect_nv_clean()
check("unload", unload_world)
finish()
