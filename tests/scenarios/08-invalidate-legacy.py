"""The same with peerdirect_support=1 (legacy registration for MLNX_OFED 4.9 era cores): ib_core
calls dma_unmap and put_pages from inside the invalidation, on the callback's thread, where
they must be no-ops; and with an MLNX_OFED 4.x core that also calls release from there."""
import re

from lib import *

for core in (5, 4):
    check(f"load (core {core}, legacy client)",
          load_world, "", f"core_version={core}", "peerdirect_support=1")
    check("nv_mem registered in legacy form",
          re.search(r"name=nv_mem .*ex=0 flags=0x0 invalidate=1", read(f"{IBC}/clients")))
    check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x80000 contiguous")
    check("register", ctl_ib, f"reg 1 edu1 {GPU_VA + 0x800:#x} 0x7f000")
    dma_check(1, 0x1F800, GPU_VA + 0x20000)
    check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
    check("ib_core unmapped inside the invalidation", num(ib_stat("unmaps_in_invalidate")) >= 1)
    expect_nv_clean(f"after the callback (core {core})")
    check("deregister", ctl_ib, "dereg 1")
    check("module reference dropped", refcnt() == "0")
    check("unload", unload_world)
finish()
