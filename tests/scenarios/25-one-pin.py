"""One pin per registration: the pin acquire makes to recognise GPU memory is the one get_pages
keeps (the C modules pin, unpin, then pin again). What that opens: a free between acquire and
get_pages, a release without get_pages (the core failed in between), host memory, the
persistent client, and probe_then_pin=1, which goes back to the C modules' way."""
from lib import *

PROBE = f"{NVPM}/parameters/probe_then_pin"
out = ""


def calls(name):
    """How often nvidia.ko was called for NAME (pin, unpin) so far."""
    return num(nv_stat(f"{name}_calls"))


def outcome(desc, line):
    """The race's output (tests/vm/race.c: "G.I ok" or "G.I <error text>") has a line that
    starts with LINE."""
    check(desc, any(o.startswith(line) for o in out.splitlines()))


def efault_logged(text):
    """The registration got EFAULT and the module logged TEXT."""
    return (any(o.startswith("2.1 Bad address") for o in out.splitlines())
            and any(text in line for line in dmesg().splitlines()))


check("load", load_world)
check("cudaMalloc 2 MiB", ctl_nv, f"alloc {GPU_VA:#x} 0x200000 contiguous")

p0, u0 = calls("pin"), calls("unpin")
check("register", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x200000")
check("one pin call for the registration, no unpin",
      (calls("pin") - p0, calls("unpin") - u0) == (1, 0))
dma_check(1, 0x1F0000, GPU_VA + 0x1F0000)
check("deregister", ctl_ib, "dereg 1")
check("one unpin at deregistration", calls("unpin") - u0 == 1)
expect_nv_clean("one pin")

check("probe_then_pin=1 at run time", write, PROBE, "1")
p0, u0 = calls("pin"), calls("unpin")
check("register with probe-then-pin", ctl_ib, f"reg 2 edu0 {GPU_VA:#x} 0x200000")
check("  two pin calls and the probe's unpin",
      (calls("pin") - p0, calls("unpin") - u0) == (2, 1))
dma_check(2, 0x10000, GPU_VA + 0x10000)
check("  deregister", ctl_ib, "dereg 2")
expect_nv_clean("probe-then-pin")
check("probe_then_pin=0 again", write, PROBE, "0")
expect_write_error("Invalid argument", "probe_then_pin=2 refused", PROBE, "2")

# The core fails between acquire and get_pages (ib_peer_umem_get's allocation): release comes
# without get_pages and must give back acquire's pin.
check("core fails after acquire (ENOMEM injected)", ctl_ib, "inject after_acquire -12")
expect_write_error("Cannot allocate memory", "  the registration fails with ENOMEM", f"{IBC}/ctl",
                   f"reg 3 edu0 {GPU_VA:#x} 0x200000")
check("  the claimed pin is given back", nv_stat("pins") == "0")
check("  nothing counted as registered", nvpm_stat("nv_mem", "live_registrations") == "0")
check("  no module reference left", refcnt() == "0")

# cudaFree between acquire and get_pages: the claimed pin's free callback runs; get_pages
# refuses the registration instead of pinning freed memory. The race's threads are one process,
# which allocates the buffer anew: NVIDIA finds GPU memory by process. (lib.race passes -q,
# which drops the "ok" lines this reads: race is run here without it.)
check("cudaFree, so that the racing process can allocate it", ctl_nv, f"free {GPU_VA:#x}")
ctl_ib("inject after_acquire sleep:1500")
out = output("race", f"{NV}/ctl|alloc {GPU_VA:#x} 0x200000 contiguous",
             "--", f"{IBC}/ctl|reg 4 edu0 {GPU_VA:#x} 0x200000",
             f"{NV}/ctl|free {GPU_VA:#x}|500000", stderr=False)[1]
ctl_ib("inject clear")
say("  " + " ".join(out.splitlines()))
outcome("free between acquire and get_pages: the registration fails (EFAULT)", "2.1 Bad address")
outcome("  the free went through", "2.2 ok")
check("  one free callback ran", nv_stat("callbacks") == "1")
check("  logged and counted as freed during registration",
      nvpm_stat("nv_mem", "err_freed_during_registration") == "1")
check(f"  EFAULT, logged: GPU memory at {GPU_VA:#x} (+0x200000) was freed during registration",
      efault_logged,
      f"nv_peer_mem: GPU memory at {GPU_VA:#x} (+0x200000) was freed during registration")
check("  no invalidation (nothing was mapped)", nvpm_stat("nv_mem", "invalidations") == "0")
check("  no module reference left", refcnt() == "0")
expect_nv_clean("free between acquire and get_pages")

# Host memory: each client asked (nv_mem, then nv_mem_nc where it exists) tries one pin, which
# NVIDIA refuses; nothing to unpin.
clients = 2 if nv_has_persistent() else 1
p0, u0 = calls("pin"), calls("unpin")
expect_write_error("Bad address", "host memory is not claimed", f"{IBC}/ctl",
                   "reg 5 edu0 0x600000000000 0x10000")
check("  one refused pin call per client, no unpin",
      (calls("pin") - p0, calls("unpin") - u0) == (clients, 0))

if nv_has_persistent():
    check("cudaMalloc for a CQ", ctl_nv, f"alloc {GPU_VA:#x} 0x40000 contiguous")
    p0, u0 = calls("pin"), calls("unpin")
    check("CQ buffer on nv_mem_nc", ctl_ib, f"reg 6 edu0 {GPU_VA:#x} 0x40000 cq")
    check("  one persistent pin call", (calls("pin") - p0, nv_stat("persistent_pins")) == (1, "1"))
    dma_check(6, 0x30000, GPU_VA + 0x30000)
    check("  deregister", ctl_ib, "dereg 6")
    check("  one unpin", calls("unpin") - u0 == 1)
    check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
expect_nv_clean()
check("unload", unload_world)
finish()
