"""Buffers for CQs/QPs go to the persistent client nv_mem_nc: its pins survive cudaFree until
deregistration. R535+ pins with nvidia_p2p_get_pages_persistent, R515-R530 (only
nvidia_p2p_cap_persistent_pages) with get_pages and a NULL callback; before R515 there is no
nv_mem_nc and CQ buffers are refused."""
import re

from lib import *

check(f"load ({NV_GEN})", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")
if nv_has_persistent():
    check("nv_mem_nc registered", "name=nv_mem_nc" in read(f"{IBC}/clients"))
    check("CQ buffer registered", ctl_ib, f"reg 5 edu0 {GPU_VA:#x} 0x40000 cq")
    check("backed by nv_mem_nc", re.search(r"id=5 .*client=nv_mem_nc", regs()))
    dma_check(5, 0x10000, GPU_VA + 0x10000)
    check("cudaFree while pinned", ctl_nv, f"free {GPU_VA:#x}")
    check("no free callback for a persistent pin", nv_stat("callbacks") == "0")
    check("memory still there for the NIC", re.search(r"id=5 .*invalidated=0", regs()))
    dma_check(5, 0x10000, GPU_VA + 0x10000)
    check("deregister", ctl_ib, "dereg 5")
else:
    check("no nv_mem_nc registered", "nv_mem_nc" not in read(f"{IBC}/clients"))
    check("the log says why", "client nv_mem_nc not registered" in dmesg())
    expect_write_error("Bad address", "CQ buffer refused without a persistent client",
                       f"{IBC}/ctl", f"reg 5 edu0 {GPU_VA:#x} 0x10000 cq")
    check("MR still works", ctl_ib, f"reg 6 edu0 {GPU_VA:#x} 0x10000")
    check("deregister", ctl_ib, "dereg 6")
    check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
expect_nv_clean()
check("unload", unload_world)
finish()
