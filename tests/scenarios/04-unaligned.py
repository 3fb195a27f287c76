"""ibv_reg_mr ranges that start and end inside GPU pages: the client widens them to 64 KiB and
the NIC still reads the right bytes at both ends."""
import re

from lib import *

check("load", load_world)
check("cudaMalloc 512 KiB (fragmented)", ctl_nv, f"alloc {GPU_VA:#x} 0x80000 fragmented")
addr = GPU_VA + 0x13000
length = 0x80000 - 0x13000 - 0x5800
check("register [+0x13000, end-0x5800)", ctl_ib, f"reg 7 edu1 {addr:#x} {length}")
check("widened to 7 GPU pages", re.search(r"id=7 .*sg_bytes=0x70000 ", regs()))
dma_check(7, 0, addr)
dma_check(7, 0xD000, addr + 0xD000)
last = (length - 4096) & ~0xFFF  # the last whole 4 KiB chunk
dma_check(7, last, addr + last)
check("deregister", ctl_ib, "dereg 7")
check("tiny registration: 1 byte", ctl_ib, f"reg 8 edu0 {GPU_VA + 0x7FFFF:#x} 1")
check("  one GPU page", re.search(r"id=8 .*nents=1 sg_bytes=0x10000 ", regs()))
check("  deregister", ctl_ib, "dereg 8")
expect_write_error("Bad address", "range running past the buffer is not GPU memory", f"{IBC}/ctl",
                   f"reg 9 edu0 {GPU_VA + 0x70000:#x} 0x20000")
expect_nv_clean()
check("unload", unload_world)
finish()
