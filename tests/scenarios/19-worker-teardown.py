"""ib_core tears a registration down from a kernel worker (device removal, deferred release).
NVIDIA finds pins by the calling process, so put_pages from the worker would unpin nothing:
nv_peer_mem says so in one line, keeps the callback armed and the module pinned, and when the
GPU memory is freed the callback releases everything. Nothing is freed twice or leaked."""
import re

from lib import *

check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")
check("register", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x40000")
dma_check(1, 0x10000, GPU_VA + 0x10000)
klog_flush()
check("deregister from a kernel worker", ctl_ib, "dereg 1 worker")
check("ib_core has released the registration", regs() == "")
explained = re.findall(r"nv_peer_mem: .*released by another process than the one that pinned it",
                       dmesg())
check("one line explains the pin nvidia keeps", len(explained) == 1)
check("nvidia still holds the pin (as the real driver would)", nv_stat("pins") == "1")
check("the pending callback holds a module reference", refcnt() == "1")
if run("rmmod", "nv_peer_mem", quiet=True):
    not_ok("rmmod succeeded while NVIDIA can still call back")
    run("modprobe", "nv_peer_mem")
else:
    ok("rmmod refused while NVIDIA can still call back")
check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
check("the free callback ran", nv_stat("callbacks") == "1")
check("nothing invalidated (ib_core had let go)", ib_stat("invalidations") == "0")
check("module reference dropped", refcnt() == "0")
expect_nv_clean()
check("unload", unload_world)
finish()
