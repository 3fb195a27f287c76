"""RDMA writes land in GPU memory: the NIC DMA-writes through the registration and reads back.
The GPU memory's original content is written back at the end, so later scenarios still find the
host's pattern in the BAR."""
from lib import *


def get(path):
    with open(path, "rb") as f:
        return f.read()


def copy(src, dst):
    """`cat SRC >DST`: DST opened for writing (truncated), SRC's bytes written."""
    data = get(src)
    with open(dst, "wb") as f:
        f.write(data)


def same(a, b):
    """`cmp -s A B`."""
    return get(a) == get(b)


check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x20000 fragmented")
check("register", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x20000")
with open("/tmp/pattern", "wb") as f:
    f.write(b"nv_peer_mem-rust" * 256)
off = 0x10000 - 0x800
buf = f"{IBC}/dma_buf"
check("NIC reads the original content", ctl_ib, f"read 1 {off} 4096")
check("save it", copy, buf, "/tmp/original")
check("fill the NIC buffer", copy, "/tmp/pattern", buf)
check("NIC writes 4 KiB across a GPU page boundary", ctl_ib, f"write 1 {off} 4096")
check("NIC reads it back", ctl_ib, f"read 1 {off} 4096")
check("GPU memory holds what the NIC wrote", same, "/tmp/pattern", buf)
check("refill the NIC buffer with the original", copy, "/tmp/original", buf)
check("NIC writes the original back", ctl_ib, f"write 1 {off} 4096")
check("NIC reads it back", ctl_ib, f"read 1 {off} 4096")
check("GPU memory holds its original content again", same, "/tmp/original", buf)
dma_check(1, 0xF000, GPU_VA + 0xF000)
dma_check(1, 0x10000, GPU_VA + 0x10000)
check("deregister", ctl_ib, "dereg 1")
expect_nv_clean()
check("unload", unload_world)
finish()
