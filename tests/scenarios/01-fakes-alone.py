"""The test doubles on their own: GPUs and NICs probed, buffers allocated and freed in every
layout, fault injection accepted, the NIC's DMA engine works, nothing left behind."""
import os
import re

from lib import *


def count_lines(path, pattern):
    """How many lines of PATH match PATTERN (grep -c)."""
    return sum(1 for line in read(path).splitlines() if re.search(pattern, line))


check("nvidia (fake) loads", run, "modprobe", "nvidia")
check("ib_core (fake) loads", run, "modprobe", "ib_core")
check("two GPUs share their memory through BARs", count_lines(f"{NV}/stats", ".") > 0)
for layout in ("contiguous", "fragmented", "shuffled"):
    va = GPU_VA + 0x1000000
    check(f"alloc 1 MiB {layout}", ctl_nv, f"alloc {va:#x} 0x100000 {layout}")
    check(f"{layout} buffer has 16 pages", count_lines(f"{NV}/pages", "gpu=0") == 16)
    check(f"free {layout} buffer", ctl_nv, f"free {va:#x}")
expect_write_error("Invalid argument", "unaligned alloc refused", f"{NV}/ctl",
                   "alloc 0x7f0000001000 0x10000")
check("alloc on GPU 1", ctl_nv, f"alloc {GPU_VA:#x} 0x20000 contiguous 1")
expect_write_error("File exists", "overlapping alloc refused", f"{NV}/ctl",
                   f"alloc {GPU_VA:#x} 0x10000")
check("free on GPU 1", ctl_nv, f"free {GPU_VA:#x}")
check("inject accepted", ctl_nv, "inject get_pages -12 1")
check("inject clear accepted", ctl_nv, "inject clear")
if os.path.exists(f"{IBC}/ctl"):
    check("edu NIC DMA self-test", ctl_ib, "selftest")
expect_write_error("Bad address", "no client: registration refused with EFAULT", f"{IBC}/ctl",
                   f"reg 1 edu0 {GPU_VA:#x} 0x10000")
check("no memory_peers without clients", not os.path.exists(f"{PEERS}/nv_mem"))
expect_nv_clean()
check("unload both", lambda: run("rmmod", "ib_core") and run("rmmod", "nvidia"))
finish()
