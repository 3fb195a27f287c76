"""A buggy core hands back client contexts that are stale (the id of a registration already
released, whose slot a live registration has taken again) or foreign (random pointers):
nv_peer_mem refuses them with a log line and never dereferences them (KASAN would report it), and
live registrations are untouched."""
import re

from lib import *

V = "/sys/kernel/debug/nv_peer_mem/registrations"


def first_id():
    """The id of the registration view's first registration (its line 2), or ""."""
    lines = read(V).splitlines()
    fields = lines[1].split() if len(lines) > 1 else []
    return fields[0] if fields else ""


def same_slot(a, b):
    """Two ids with the same low 32 bits (the slot) that differ (in their generation)."""
    try:
        return int(a, 0) & 0xFFFFFFFF == int(b, 0) & 0xFFFFFFFF and a != b
    except ValueError:
        return False


check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")
check("register MR 1", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x40000")
stale = first_id()
check(f"MR 1's context id read from the registration view ({stale})", stale != "")
check("deregister MR 1 (its context becomes stale)", ctl_ib, "dereg 1")
check("register MR 2", ctl_ib, f"reg 2 edu0 {GPU_VA:#x} 0x40000")
live = first_id()
# The registry takes the lowest free slot again: the ids differ only in their generation.
check(f"MR 2 has MR 1's slot under a new id ({live})", same_slot(live, stale))
klog_flush()
for v in (stale, "1", "0xdeadbeef", "0xffff888000001000", "0"):
    check(f"client survives context {v}", ctl_ib, f"bogus-context nv_mem {v}")
check("each refusal logged",
      len(re.findall(r"nv_peer_mem: .*unknown client context", dmesg())) >= 15)
check("  without the pointer-sized values (no kernel address in the log)",
      not any("nv_peer_mem: " in ln and re.search(r"ffff888000001000|deadbeef", ln, re.I)
              for ln in dmesg().splitlines()))
check("MR 2 still registered", re.search(r"^id=2 ", regs(), re.M))
dma_check(2, 0x20000, GPU_VA + 0x20000)
check("module reference count untouched", refcnt() == "1")
check("deregister MR 2", ctl_ib, "dereg 2")
expect_nv_clean()
check("unload", unload_world)
finish()
