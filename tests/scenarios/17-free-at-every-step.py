"""cudaFree at every step of a registration and of a deregistration, and while each NVIDIA call
is in progress: a stall injected into the fake nvidia.ko or ib_core holds the step open for
1.5 s, and a thread of the same process frees the GPU memory 0.7 s in. Whatever the step: no
kernel report, no deadlock (both fakes time their waits and report one), and after the
deregistration and the free nothing is left: no pin, mapping, registration, context or module
reference."""
import re

from lib import *

check("load", load_world)
# Each step says how many of the driver's own use-after-free windows (REAL-DRIVER-HAZARD,
# tests/fakes/INTERFACE.md, rule 5) it may meet: (MIN, MAX), per generation as the fake counts
# them. One free frees one table, and a client that looks after every call calls with it at most
# once: never more than 1 per step. Where it is 1:
# - any_wait: the free waits for the API lock behind get_pages; when the lock is released, the
#   free and the registration's dma_map_pages race for it. R515 and later free a revoked table
#   themselves, so dma_map_pages meets the freed table when the free wins (0 when it loses).
#   R470 leaves the table to the client: never.
# - put_wait: the free lands while the deregistration's put_pages waits for the lock. R515-R530
#   read the table before (nv-p2p.c 515: gpu_uuid), so it meets the freed table, always. R535
#   and later only look it up in RM by its address (p2p.c: not found, 0): never. R470: never.
# - put_next: the free waits for the context behind dma_unmap_pages; after that the teardown may
#   take the context back before the callback and enter put_pages, which on R515-R530 then meets
#   the window (0 when the callback goes first). Never elsewhere.
# A generation the fake does not have has no figures: the step fails rather than guess.
if NV_GEN == "r470":
    any_wait, put_wait, put_next = (0, 0), (0, 0), (0, 0)
elif NV_GEN == "r515":
    any_wait, put_wait, put_next = (0, 1), (1, 1), (0, 1)
elif NV_GEN in ("r535", "r580"):
    any_wait, put_wait, put_next = (0, 1), (0, 0), (0, 0)
else:
    not_ok(f"no hazard allowances for nvidia generation '{NV_GEN}'")
    any_wait, put_wait, put_next = (0, 0), (0, 0), (0, 0)
hz_total = 0


def grep(pattern, text):
    """`grep -q PATTERN`: TEXT has a line matching PATTERN."""
    return re.search(pattern, text, re.M) is not None


def step(name, nv, ib, when, hz_range=(0, 0)):
    """WHEN is "reg" (free during the registration) or "dereg"; HZ_RANGE: the hazards allowed."""
    global hz_total
    hz_before = num(nv_stat("hazards"))
    ctl_nv("inject clear")
    ctl_ib("inject clear")
    if nv:
        ctl_nv(f"inject {nv}")
    if ib:
        ctl_ib(f"inject {ib}")
    alloc = f"{NV}/ctl|alloc {GPU_VA:#x} 0x80000 shuffled"
    reg = f"{IBC}/ctl|reg 1 edu0 {GPU_VA:#x} 0x80000"
    free = f"{NV}/ctl|free {GPU_VA:#x}|700000"
    dereg = f"{IBC}/ctl|dereg 1"
    if when == "reg":
        out = output("race", alloc, "--", reg, free, "--", dereg, stderr=False)[1]
    else:
        out = output("race", alloc, "--", reg, "--", dereg, free, stderr=False)[1]
    say(f"  {name}: {' '.join(out.splitlines())}")
    ctl_nv("inject clear")
    ctl_ib("inject clear")
    check(f"{name}: the free went through", grep, r"^[23]\.2 ok", out)
    check(f"{name}: no registration left", regs() == "")
    check(f"{name}: no module reference left", refcnt() == "0")
    check(f"{name}: no deadlock", ib_stat("deadlocks") == "0")
    expect_nv_clean(name)
    hz = num(nv_stat("hazards")) - hz_before
    hz_total += hz
    lo, hi = hz_range
    check(f"{name}: {hz} of the driver's use-after-free windows met (allowed {lo}..{hi})",
          lo <= hz <= hi)


# acquire's pin is the registration's: the first stall holds it, the second would hold the pin
# of get_pages with probe_then_pin=1.
step("free while get_pages holds the API lock", "get_pages sleep_locked:1500 2", "", "reg",
     any_wait)
step("free between acquire and get_pages", "", "after_acquire sleep:1500", "reg")
step("free between get_pages and dma_map", "", "after_get_pages sleep:1500", "reg")
step("free while dma_map_pages holds the API lock", "dma_map_pages sleep_locked:1500", "", "reg")
step("free after dma_map, before activation", "", "after_dma_map sleep:1500", "reg")
step("free while the core's teardown runs unlocked", "", "teardown_unlocked sleep:1500", "dereg")
step("free while dma_unmap_pages runs", "dma_unmap_pages sleep:1500", "", "dereg", put_next)
# The teardown's put_pages is the one the free races (with probe_then_pin=1 acquire's probe
# unpins first: the count of 2 stalls both).
step("free while put_pages waits for the API lock", "put_pages sleep:1500 2", "", "dereg",
     put_wait)
step("free while put_pages holds the API lock", "put_pages sleep_locked:1500 2", "", "dereg")
step("free before release", "", "before_release sleep:1500", "dereg")
expect_hazards(hz_total)
check("unload", unload_world)
finish()
