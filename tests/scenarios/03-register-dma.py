"""The main path: register a GPU buffer for a NIC, the NIC DMA-reads it and sees the data the
host wrote into the GPU's BAR, deregister, and every pin is gone."""
import re

from lib import *

check("load", load_world)
check("cudaMalloc 2 MiB (shuffled pages)", ctl_nv, f"alloc {GPU_VA:#x} 0x200000 shuffled")
check("ibv_reg_mr on the GPU buffer", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x200000")
check("backed by nv_mem, 32 GPU pages of 64 KiB",
      re.search(r"^id=1 .*client=nv_mem .*page_size=0x10000 .*sg_bytes=0x200000 ", regs(), re.M))
m = re.search(r"^id=1 .* nents=(\d+) ", regs(), re.M)
n = int(m.group(1)) if m else 0
check(f"  in 1 to 32 sg entries ({n}: runs of contiguous DMA addresses)", 1 <= n <= 32)
check("one pin in nvidia", nv_stat("pins") == "1")
check("one DMA mapping in nvidia", nv_stat("mappings") == "1")
check("registration holds a module reference", refcnt() == "1")
for off in (0, 0x1000, 0x10000, 0xFF000, 0x100000, 0x1F0000, 0x1FF000):
    dma_check(1, off, GPU_VA + off)
check("memory_peers counts the registration", peer_counter("nv_mem", "num_alloc_mrs") == "1")
check("memory_peers counts 2 MiB", peer_counter("nv_mem", "num_reg_bytes") == str(0x200000))
check("nv_peer_mem counts it: 1 live, 2 MiB pinned, 1 registered",
      [nvpm_stat("nv_mem", c) for c in ("live_registrations", "pinned_bytes", "registrations")]
      == ["1", str(0x200000), "1"])
check("deregister", ctl_ib, "dereg 1")
expect_nv_clean("after deregistration")
check("module reference dropped", refcnt() == "0")
check("memory_peers counts the deregistration", peer_counter("nv_mem", "num_dealloc_mrs") == "1")
check("nv_peer_mem counts the deregistration, nothing live",
      [nvpm_stat("nv_mem", c) for c in ("deregistrations", "live_registrations", "pinned_bytes")]
      == ["1", "0", "0"])
check("free the buffer: no callback for a released registration", ctl_nv, f"free {GPU_VA:#x}")
check("no free callback ran", nv_stat("callbacks") == "0")
check("unload", unload_world)
finish()
