"""MLNX_OFED 4.9 LTS, as an admin meets it. With the default parameters nv_mem registers in the
extended form, which 4.9 does not know: it reads ex_size as a callback pointer and skips nv_mem
for every registration. Where nvidia.ko has persistent pages, nv_mem_nc (legacy form) then backs
the MR: ibv_reg_mr works, but the GPU memory stays pinned through cudaFree and nothing is
invalidated. Without persistent pages ibv_reg_mr fails with EFAULT. The load log names the
parameter 4.9 needs; with peerdirect_support=1 nv_mem backs MRs and invalidates."""
import re

from lib import *

check("fake nvidia and an MLNX_OFED 4.9 core",
      lambda: run("modprobe", "nvidia") and run("modprobe", "ib_core", "core_version=4"))
klog_flush()
check("nv_peer_mem with the default parameters", run, "modprobe", "nv_peer_mem",
      "peerdirect_support=0")
check("  the load log names the parameter 4.9 needs",
      re.search(r"nv_peer_mem: .*MLNX_OFED 4.9 needs peerdirect_support=1", dmesg()))
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")
if nv_has_persistent():
    check("ibv_reg_mr works", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x40000")
    check("  but through nv_mem_nc: 4.9 skipped the extended nv_mem",
          re.search(r"id=1 .*client=nv_mem_nc", regs()))
    check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
    check("  no invalidation: the GPU memory stays pinned until deregistration",
          nv_stat("pins") == "1" and re.search(r"id=1 .*invalidated=0", regs()))
    check("deregister", ctl_ib, "dereg 1")
    check("cudaMalloc again", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")
else:
    no_nc = "ibv_reg_mr fails: 4.9 skips the extended nv_mem, and there is no nv_mem_nc"
    expect_write_error("Bad address", no_nc, f"{IBC}/ctl", f"reg 1 edu0 {GPU_VA:#x} 0x40000")
check("  no context kept", refcnt() == "0")
check("rmmod", run, "rmmod", "nv_peer_mem")
check("nv_peer_mem peerdirect_support=1", run, "modprobe", "nv_peer_mem", "peerdirect_support=1")
check("  nv_mem registered in the legacy form",
      re.search(r"name=nv_mem .*ex=0 flags=0x0 invalidate=1", read(f"{IBC}/clients")))
check("register", ctl_ib, f"reg 2 edu0 {GPU_VA:#x} 0x40000")
check("  backed by nv_mem", re.search(r"id=2 .*client=nv_mem ", regs()))
dma_check(2, 0x30000, GPU_VA + 0x30000)
check("cudaFree: 4.9 unmaps and releases inside the invalidation", ctl_nv, f"free {GPU_VA:#x}")
check("  ib_core unmapped inside", ib_stat("unmaps_in_invalidate") == "1")
write_error(f"{IBC}/ctl", "dereg 2")  # 4.9 released it inside the invalidation already
check("module reference dropped", refcnt() == "0")
expect_nv_clean()
check("unload", unload_world)
finish()
