"""cudaFree under a live registration: NVIDIA's free callback invalidates through ib_core and
the NIC loses access. With the extended client (5.x/24.x, PEER_MEM_INVALIDATE_UNMAPS) the client
unmaps and unpins by itself; MLNX_OFED 4.9 calls dma_unmap and put_pages inside the
invalidation. Either way nothing is left in nvidia, and the deregistration finds nothing to do."""
import re

from lib import *

check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x100000 shuffled")
check("register", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x100000")
dma_check(1, 0x20000, GPU_VA + 0x20000)
check("cudaFree with the registration live", ctl_nv, f"free {GPU_VA:#x}")
check("free callback ran", nv_stat("callbacks") == "1")
check("ib_core got the invalidation", ib_stat("invalidations") == "1")
check("ib_core counts the free callback", peer_counter("nv_mem", "num_free_callbacks") == "1")
check("nv_peer_mem counts 1 invalidation, nothing live",
      [nvpm_stat("nv_mem", c) for c in ("invalidations", "live_registrations")] == ["1", "0"])
if core_is_49():
    check("ib_core (4.9) unmapped inside the invalidation", ib_stat("unmaps_in_invalidate") == "1")
else:
    check("ib_core did not unmap (UNMAPS client)", ib_stat("unmaps_in_invalidate") == "0")
    check("the registration shows invalidated", re.search(r"^id=1 .*invalidated=1", regs(), re.M))
    expect_write_error("Input/output error", "NIC DMA refused after invalidation", f"{IBC}/ctl",
                       "read 1 0 4096")
expect_nv_clean("right after the callback")
write_error(f"{IBC}/ctl", "dereg 1")  # 4.9 released it inside the invalidation already
check("no registration left", regs() == "")
check("module reference dropped", refcnt() == "0")
expect_nv_clean("after deregistration")
check("unload", unload_world)
finish()
