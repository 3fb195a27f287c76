"""Page tables of this world's driver generation are accepted and DMA-read correctly: version 2.0
(with the trailing flags word) since driver 580.65.06, 1.2 before. A page table of a major
version nobody has released yet is refused, with one line that names it."""
from lib import *

check("load", load_world)
check(f"nvidia.ko is the {NV_GEN} generation", nv_stat("flavour") == NV_GEN)
check("cudaMalloc 1 MiB (fragmented)", ctl_nv, f"alloc {GPU_VA:#x} 0x100000 fragmented")
check("register", ctl_ib, f"reg 1 edu1 {GPU_VA + 0x2000:#x} 0xfc000")
for off in (0, 0x7E000, 0xFB000):
    dma_check(1, off, GPU_VA + 0x2000 + off)
check("deregister", ctl_ib, "dereg 1")
klog_flush()
ctl_nv("inject get_pages version 2")
expect_write_error("Invalid argument", "a page table of an unknown major version is refused",
                   f"{IBC}/ctl", f"reg 2 edu0 {GPU_VA:#x} 0x100000")
check("  in one line naming the version",
      sum("nv_peer_mem: nvidia.ko returned page table version" in line
          for line in dmesg().splitlines()) == 1)
check("  nothing kept", refcnt() == "0")
ctl_nv("inject clear")
expect_nv_clean()
check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
check("unload", unload_world)
finish()
