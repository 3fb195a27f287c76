"""Every way nvidia.ko can fail surfaces as the right errno with one log line, and leaves no
pin, mapping, context or module reference behind."""
import re

from lib import *

check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")


def inject_case(inject, errtext, logtext, desc):
    """With nvidia.ko's INJECT ("OP WHAT COUNT") armed, registering is refused with ERRTEXT (the
    errno's strerror text), the module logs a line matching LOGTEXT, and nothing is left."""
    ctl_nv("inject clear")
    ctl_nv(f"inject {inject}")
    klog_flush()
    expect_write_error(errtext, desc, f"{IBC}/ctl", f"reg 1 edu0 {GPU_VA:#x} 0x40000")
    log = dmesg().splitlines()
    if any(re.search(f"nv_peer_mem: .*{logtext}", line) for line in log):
        ok(f"  logged: {logtext}")
    else:
        not_ok(f"  no log line matching '{logtext}'")
        for line in log[-5:]:
            say(line)
    check("  no registration left", regs().rstrip("\n") == "")
    check("  no module reference left", refcnt() == "0")
    expect_nv_clean(desc)


# acquire's probe and get_pages both see the error: GPU memory that cannot be pinned is still
# claimed, so the user gets NVIDIA's errno instead of EFAULT.
inject_case("get_pages -12 2", "Cannot allocate memory", "BAR1", "BAR exhausted: ENOMEM")
inject_case("get_pages -5 2", "Input/output error", "pinning GPU memory", "driver error: EIO")
inject_case("get_pages -95 2", "Operation not supported", "pinning GPU memory",
            "unsupported: EOPNOTSUPP")
# NVIDIA returns the kernel-internal ENOTSUPP (524); ibv_reg_mr must not say "Unknown error 524".
inject_case("get_pages -524 2", "Operation not supported", "pinning GPU memory",
            "ENOTSUPP (524) reaches users as EOPNOTSUPP")
inject_case("dma_map_pages -12 1", "Cannot allocate memory", "DMA-mapping GPU memory",
            "dma_map fails: ENOMEM")
inject_case("get_pages pagesize 2", "Invalid argument", "only 64 KiB pages",
            "128 KiB GPU pages refused")
inject_case("get_pages version 2", "Invalid argument", "page table version",
            "incompatible page table version")
inject_case("dma_map_pages version 1", "Invalid argument", "DMA mapping version",
            "incompatible mapping version")
ctl_nv("inject clear")
check("a clean registration still works", ctl_ib, f"reg 2 edu0 {GPU_VA:#x} 0x40000")
dma_check(2, 0x30000, GPU_VA + 0x30000)
check("deregister", ctl_ib, "dereg 2")
expect_write_error("Invalid argument", "dma_map for a non-PCI device refused", f"{IBC}/ctl",
                   f"reg 3 none {GPU_VA:#x} 0x40000")
check("  logged", "not a PCI device" in dmesg())
expect_nv_clean("after all")
check("unload", unload_world)
finish()
