"""Fail the n-th memory allocation of a registration attempt, for n = 1, 2, ... until a run
reaches no n-th allocation (so every allocation of the path is failed once: fake ib_core,
nv_peer_mem, fake nvidia, IOMMU): each attempt either succeeds, with nv_mem behind it, or fails
with an errno, and after each one nothing is left behind (kmemleak checks the rest at the end of
the run)."""
import os
import re

from lib import *

FAIL_NTH = "/proc/thread-self/fail-nth"
CTL = f"{IBC}/ctl"
REG = f"reg 1 edu0 {GPU_VA:#x} 0x100000"


def register_failing(n):
    """Arms fail-nth = N and registers, both from this process (NVIDIA recognises GPU memory
    only in the process that allocated it), with nothing in between but the open of the control
    file, as `echo $n >fail-nth && echo reg ... >ctl` in one shell; True when it registered."""
    try:
        write(FAIL_NTH, str(n))
        write(CTL, REG)
        return True
    except OSError:
        return False


def nth_reached():
    """Whether the n-th allocation was reached: fail-nth reads 0 once it failed one. Opening the
    file allocates too: if that is the n-th, the read fails, and the registration did not reach
    it either."""
    try:
        fd = os.open(FAIL_NTH, os.O_RDONLY)
        try:
            left = os.read(fd, 64)
        finally:
            os.close(fd)
    except OSError:
        return False
    return left.split(b"\n")[0] == b"0"


def regs_text():
    """ib_core's registrations, as the shell's $(cat) read them (no trailing newline)."""
    return regs().rstrip("\n")


def disarm():
    """fail-nth back to 0 (nothing armed), whatever the registration left in it."""
    try:
        write(FAIL_NTH, "0")
    except OSError:
        pass


check("load", load_world)
check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x100000 shuffled")
check("failslab may fail sleeping allocations", write,
      "/sys/kernel/debug/failslab/ignore-gfp-wait", "N")
try_write("/sys/kernel/debug/failslab/verbose", "0")
n, failures, successes, dirty, injected = 1, 0, 0, False, True
while injected and n <= 100:
    registered = register_failing(n)
    # Whether the n-th allocation was reached, then disarm what was not, before this process
    # does anything else (reads, a child process).
    injected = nth_reached()
    disarm()
    if registered:
        successes += 1
        # An MR stays nv_mem's whatever failed: were nv_mem to decline after a failed
        # allocation, ib_core would ask nv_mem_nc, and the MR would be pinned persistently,
        # never invalidated by cudaFree (design.md, "Out of memory in acquire").
        if not re.search(r"^id=1 .*client=nv_mem ", regs(), re.M):
            not_ok(f"allocation {n} failed and the MR went to another client: {regs_text()}")
        if not ctl_ib("dereg 1"):
            not_ok(f"dereg after success at n={n}")
    else:
        failures += 1
    p, m, d, r = nv_stat("pins"), nv_stat("mappings"), nv_stat("dead_tables"), refcnt()
    if p + m + d + r != "0000" or regs_text():
        not_ok(f"allocation {n} failed and left pins={p} mappings={m} tables={d} refcnt={r}"
               f" regs='{regs_text()}'")
        dirty = True
        break
    n += 1
check(f"the runs failed every allocation of the path (run {n - 1} reached none, 100 at most)",
      not injected)
check(f"some registrations failed under injection ({failures} of {n - 1})", failures > 0)
check(f"some succeeded ({successes} of {n - 1})", successes > 0)
check("nothing left behind after any failure", not dirty)
check("a registration works afterwards", ctl_ib, REG)
dma_check(1, 0x80000, GPU_VA + 0x80000)
check("deregister", ctl_ib, "dereg 1")
try_write("/sys/kernel/debug/failslab/ignore-gfp-wait", "Y")
check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
expect_nv_clean()
check("unload", unload_world)
finish()
