"""Several buffers on two GPUs, registered for two NICs at once, some overlapping."""
from lib import *

check("load", load_world)
check("GPU 0 buffer", ctl_nv, f"alloc {GPU_VA:#x} 0x100000 shuffled 0")
b2 = GPU_VA + 0x10000000
check("GPU 1 buffer", ctl_nv, f"alloc {b2:#x} 0x100000 fragmented 1")
check("MR 1: GPU 0 for edu0", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x100000")
check("MR 2: GPU 0 again for edu1", ctl_ib, f"reg 2 edu1 {GPU_VA + 0x40000:#x} 0x40000")
check("MR 3: GPU 1 for edu0", ctl_ib, f"reg 3 edu0 {b2:#x} 0x100000")
check("MR 4: GPU 1 for edu1", ctl_ib, f"reg 4 edu1 {b2:#x} 0x80000")
check("four pins", nv_stat("pins") == "4")
check("four references", refcnt() == "4")
dma_check(1, 0x40000, GPU_VA + 0x40000)
dma_check(2, 0, GPU_VA + 0x40000)
dma_check(3, 0x30000, b2 + 0x30000)
dma_check(4, 0x7F000, b2 + 0x7F000)
for mr in (2, 4, 1, 3):
    check(f"dereg {mr}", ctl_ib, f"dereg {mr}")
expect_nv_clean()
check("unload", unload_world)
finish()
