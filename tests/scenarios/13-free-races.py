"""cudaFree racing registration and deregistration, from threads of one process as in a real
application (tests/vm/race.c): whatever the interleaving, no double free, no use after free, no
leak, no deadlock (KASAN, kmemleak and the fakes' deadlock detectors watch), and every pin,
context and module reference is gone at the end."""
import re
from collections import Counter

from lib import *

check("load", load_world)
N = 40
# A free landing while the registration's dma_map_pages waits for NVIDIA's API lock is the
# driver's own use after free (Documentation/design.md, "What no client can prevent"); on
# R515-R530 so is one landing on a put_pages that waits there (tests/fakes/INTERFACE.md, rule 5:
# from R535 put_pages only looks the table up, and p2p.c does not count it). Since R515 the
# driver frees tables itself, so random races may meet these windows. A race frees one table
# once, and a client that looks at what its callback recorded after each call calls NVIDIA with
# a freed table at most once: at most one hazard per race, and only in a race that has a call
# able to meet it. Registration || cudaFree: the registration's dma_map_pages, or (R515-R530)
# the deregistration's put_pages after a registration that succeeded, never both (a registration
# that met the freed table failed and has nothing to put). Deregistration || cudaFree: only the
# put_pages, so none from R535. R470 frees no table itself: none.
if NV_GEN == "r470":
    reg_hz, dereg_hz = 0, 0
elif NV_GEN == "r515":
    reg_hz, dereg_hz = 1, 1
else:
    reg_hz, dereg_hz = 1, 0
hz_total = 0
hz_over = ""


def race_hazards(hz_before, most, what, failed=None):
    """The hazards of the race just run (since HZ_BEFORE) are at most MOST, and none unless
    FAILED is non-empty when it is given; adds them to hz_total, notes a race out of bounds in
    hz_over."""
    global hz_total, hz_over
    hz = num(nv_stat("hazards")) - hz_before
    hz_total += hz
    if hz > most:
        hz_over += f" {what}:{hz}"
    elif failed is not None and hz > 0 and not failed:
        hz_over += f" {what}:{hz}-but-registered"


# What each side may give (as the in-kernel stress, fakes/ib_core/stress.c): the registration
# EFAULT (the memory was no longer NVIDIA's: nv_mem declined it) or, on MLNX_OFED 4.9 only,
# EINVAL (the core refuses pages invalidated before activation); the deregistration ENOENT (no
# MR: the registration failed, or 4.9 tore it down inside the invalidation); cudaFree and
# cudaMalloc nothing. Anything else, say an EIO from a DMA mapping the IOMMU refused, fails.
reg_may = "Bad address"
if IB_CORE == "4.9":
    reg_may += "|Invalid argument"
outcomes = []
for i in range(N):
    va = f"{GPU_VA + (i % 4) * 0x1000000:#x}"
    hz_before = num(nv_stat("hazards"))
    # registration || cudaFree, the free delayed by 0..1.9 ms
    out = race(f"{NV}/ctl|alloc {va} 0x100000 shuffled",
               "--", f"{IBC}/ctl|reg {i} edu{i % 2} {va} 0x100000",
               f"{NV}/ctl|free {va}|{i * 50}",
               "--", f"{IBC}/ctl|dereg {i}")
    lines = out.splitlines()
    # The window here is the registration's own dma_map_pages, which then fails: a hazard in a
    # race whose registration went through is another call meeting a freed table (the free is
    # over before the deregistration starts).
    reg_failed = "\n".join(ln for ln in lines if ln.startswith("2.1 "))
    race_hazards(hz_before, reg_hz, f"reg{i}", reg_failed)
    outcomes += lines
counts = sorted(Counter(outcomes).items())
say("race outcomes other than ok: " + " ".join(f"{n} {o}" for o, n in counts))
allowed = re.compile(rf"2\.1 ({reg_may})|3\.1 No such file or directory")
unexpected = [o for o in outcomes if not allowed.fullmatch(o)]
check(f"every registration, cudaFree and deregistration gave what its race allows ({N} races)",
      not unexpected)
for o, n in sorted(Counter(unexpected).items()):
    say(f"  unexpected: {n:7d} {o}")
check(f"no registrations left ({N} registration/free races)", regs() == "")
check("no module references left", refcnt() == "0")
expect_nv_clean(f"after {N} registration/free races")
# Deregistration racing the free of a live registration.
fails = 0
for i in range(N):
    hz_before = num(nv_stat("hazards"))
    out = race(f"{NV}/ctl|alloc {GPU_VA:#x} 0x80000 contiguous",
               "--", f"{IBC}/ctl|reg 1 edu0 {GPU_VA:#x} 0x80000",
               "--", f"{IBC}/ctl|dereg 1|{i * 25}", f"{NV}/ctl|free {GPU_VA:#x}")
    race_hazards(hz_before, dereg_hz, f"dereg{i}")
    if out.strip():
        fails += 1
        say(f"  iteration {i}: {out.rstrip()}")
check(f"every deregistration and free succeeded ({N} races)", fails == 0)
check("no registrations left (dereg vs free)", regs() == "")
check("no module references left (dereg vs free)", refcnt() == "0")
expect_nv_clean("after dereg/free races")
say(f"driver hazards met: {hz_total} in {2 * N} races")
over = f" (over:{hz_over})" if hz_over else ""
check(f"at most {reg_hz} of the driver's windows met per registration race (one that failed), "
      f"{dereg_hz} per deregistration race{over}", not hz_over)
# The harness counts the REAL-DRIVER-HAZARD lines against the same number.
expect_hazards(hz_total)
check("unload", unload_world)
finish()
