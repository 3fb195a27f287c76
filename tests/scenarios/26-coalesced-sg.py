"""Coalesced sg tables (coalesce_sg): runs of DMA-contiguous GPU pages become one entry, so the
NIC can use pages larger than 64 KiB; coalesce_sg=0 gives one entry per page. Both ways the
core's checks (trimming, coverage, addresses inside the BAR) and the NIC's DMA reads must pass,
also for a range whose first and last pages sit inside a long run. NVIDIA maps every 64 KiB page
with its own dma_map_resource(), so runs exist only where DMA addresses are the BAR's physical
addresses: edu1 gets an identity IOMMU domain (as with iommu=pt), edu0 keeps its translating
one. Default: on, except in legacy mode (MLNX_OFED 4.9)."""
import glob
import re

from lib import *


def edu_devices():
    """The PCI devices that are edu NICs (vendor 0x1234, device 0x11e8), in sysfs order."""
    out = []
    for d in sorted(glob.glob("/sys/bus/pci/devices/*")):
        if f"{read(f'{d}/vendor').strip()}:{read(f'{d}/device').strip()}" == "0x1234:0x11e8":
            out.append(d)
    return out


def reg_expect(mr, nic, addr, length, nents, nic_page_size, desc):
    """Register (LENGTH: text, or a number written in decimal), then the core's entry count and
    the page size mlx5 would pick (ib_umem_find_best_pgsz) must be as given ("-": any)."""
    check(desc, ctl_ib, f"reg {mr} {nic} {addr:#x} {length}")
    m = re.search(rf"^id={mr} .*", regs(), re.M)
    line = m.group(0) if m else ""
    say(f"  {line}")
    if nents != "-":
        check(f"  {nents} sg entries", f" nents={nents} " in line)
    if nic_page_size != "-":
        check(f"  NIC page size {nic_page_size}", f" nic_page_size={nic_page_size} " in line)


def one_way(way):
    """The cases with coalescing on or off."""
    if way == "on":
        run_, inner, big = 1, 1, "0x200000"
    else:
        run_, inner, big = 32, 31, "0x10000"
    check("cudaMalloc 2 MiB contiguous (first pages of the BAR)", ctl_nv,
          f"alloc {GPU_VA:#x} 0x200000 contiguous")
    reg_expect(1, "edu1", GPU_VA, "0x200000", run_, big, f"[{way}] contiguous 2 MiB for edu1")
    dma_check(1, 0, GPU_VA)
    dma_check(1, 0x1FF000, GPU_VA + 0x1FF000)
    a = GPU_VA + 0x13000
    n = 0x200000 - 0x13000 - 0x5800
    reg_expect(2, "edu1", a, n, inner, "-", f"[{way}] unaligned range inside the run")
    dma_check(2, 0, a)
    dma_check(2, 0xED000, a + 0xED000)
    last = (n - 4096) & ~0xFFF
    dma_check(2, last, a + last)
    reg_expect(3, "edu0", GPU_VA, "0x200000", "-", "-",
               f"[{way}] the same buffer for edu0 (IOMMU: one IOVA per page)")
    dma_check(3, 0x10000, GPU_VA + 0x10000)
    for mr in (1, 2, 3):
        ctl_ib(f"dereg {mr}")
    check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
    check("cudaMalloc 512 KiB fragmented", ctl_nv, f"alloc {GPU_VA:#x} 0x80000 fragmented")
    reg_expect(4, "edu1", GPU_VA, "0x80000", 8, "0x10000",
               f"[{way}] fragmented: no two pages adjacent, 8 entries")
    dma_check(4, 0x70000, GPU_VA + 0x70000)
    ctl_ib("dereg 4")
    check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
    check("cudaMalloc 1 MiB shuffled", ctl_nv, f"alloc {GPU_VA:#x} 0x100000 shuffled")
    reg_expect(5, "edu1", GPU_VA + 0x3000, "0xfa000", "-", "-", f"[{way}] shuffled, unaligned")
    dma_check(5, 0x7F000, GPU_VA + 0x82000)
    dma_check(5, 0xF9000, GPU_VA + 0xFC000)
    ctl_ib("dereg 5")
    check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
    expect_nv_clean(f"coalescing {way}")


edus = edu_devices()
edu1 = edus[1] if len(edus) > 1 else ""
type_file = f"{edu1}/iommu_group/type"
try:
    old_type = read(type_file).strip()
except OSError:
    old_type = ""
check(f"edu1 in an identity IOMMU domain (was {old_type})", write, type_file, "identity")
check("load", load_world)
P = f"{NVPM}/parameters/coalesce_sg"
check("coalesce_sg is auto (-1) by default", read(P).strip() == "-1")
expect_write_error("Invalid argument", "coalesce_sg=2 refused", P, "2")

check("default in this world", ctl_nv, f"alloc {GPU_VA:#x} 0x200000 contiguous")
want = 32 if core_is_49() else 1
reg_expect(9, "edu1", GPU_VA, "0x200000", want, "-",
           f"  default: {want} entries for 2 contiguous MiB")
ctl_ib("dereg 9")
ctl_nv(f"free {GPU_VA:#x}")
check("coalesce_sg=1", write, P, "1")
one_way("on")
check("coalesce_sg=0", write, P, "0")
one_way("off")
check("violations: none in the fakes", (ib_stat("violations"), nv_stat("violations")) == ("0", "0"))
check("unload", unload_world)
check(f"edu1 back in its {old_type} domain", write, type_file, old_type)
finish()
