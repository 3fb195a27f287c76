"""The fault-injection sweep (tests/sweep/README.md). Every phase of the module runs again and
again, failing one thing each time, until no failure is left to inject:
- failslab with fail-nth = 1, 2, ... counts only allocations made under module code (the stack
  filter), so each run fails the next allocation of nv_peer_mem, or of nvidia.ko and ib_core
  inside a call from it (the real ones allocate there too);
- nvidia.ko's calls fail one after another with the errno the real one gives (the fake's inject,
  with skip).
Each injected failure is attributed to the innermost nv_peer_mem frame of its stack dump: a call
site that tests/sweep/sites.py lists from the module's code. It is judged: the caller got an
error it can understand (or the module recovered), nv_peer_mem logged exactly one line at warning
level or above (at most one when it recovered), and nothing is left: no pin, mapping, table, MR,
module reference or registered client. One "SWEEP ..." line per run; tests/sweep/report.py joins
them with the site list (make check prints the sites line).

The steps of each run are made by tests/vm/failnth.c's binary, one process: it allocates the GPU
memory, registers and frees it itself, so NVIDIA finds the memory in the process that asks."""
import glob
import os
import re
import subprocess

from lib import *

FS = "/sys/kernel/debug/failslab"
VA = f"{GPU_VA:#x}"
LEN = "0x40000"
MAX_N = 400
SITES = "/tests/sweep-sites.txt"
OUT = "/tmp/sweep.out"  # the output of the run just made
LOG = "/tmp/sweep.log"  # its kernel log, as the judge read it


def put(path, value):
    """echo VALUE >PATH: a failed write is printed, and the scenario goes on."""
    try_write(path, value)


check("load", load_world)
check("the site list is here", lambda: os.path.getsize(SITES) > 0)
KO = next((os.path.join(d, "nv_peer_mem.ko") for d, _, files in os.walk("/lib/modules")
           if "nv_peer_mem.ko" in files), "")
# The module's options, as modprobe passes them: each "options nv_peer_mem" line's, a space after.
OPTS = ""
for conf in sorted(glob.glob("/etc/modprobe.d/*.conf")):
    for line in read(conf).splitlines():
        if line.startswith("options nv_peer_mem "):
            OPTS += line[len("options nv_peer_mem "):] + " "
check("failslab has the stack filter", os.path.exists(f"{FS}/require-start"))
# Which allocations fail-nth counts: those with a frame in [require-start, require-end) on their
# stack. Module init and exit run in memory known only once loaded: there, any module code (the
# end of the kernel image to MODULES_END, x86-64). Otherwise nv_peer_mem's .text.
KALLSYMS = [line.split() for line in read("/proc/kallsyms").splitlines()]
kend = next((f[0] for f in KALLSYMS if len(f) > 2 and f[2] == "_end"), "")
try:
    text_size = next((line[len("# text_size "):] for line in read(SITES).splitlines()
                      if line.startswith("# text_size ")), "")
except OSError:
    text_size = ""


def any_module():
    put(f"{FS}/require-start", f"0x{kend or 'ffffffffa0000000'}")
    put(f"{FS}/require-end", "0xffffffffff000000")


def this_module():
    t = read(f"{NVPM}/sections/.text").strip()
    put(f"{FS}/require-start", t)
    put(f"{FS}/require-end", f"{(int(t, 0) + int(text_size, 0)) & (1 << 64) - 1:#x}")


# kmemleak tracks each allocation with an object of its own, allocated in its hook inside the
# allocation (mm/kmemleak.c: __create_object, __alloc_object), so with the module's frames on the
# stack too; when that allocation fails it takes one from its pool, silently. Half the runs failed
# only that. Frames in those two functions are rejected: fail-nth counts the others.
# /proc/kallsyms is sorted by address: the range runs from the first of the two to the symbol
# after the second.
def kmemleak_range():
    lo, seen = "", 0
    for f in KALLSYMS:
        if seen == 2:
            return lo, f[0]
        if len(f) > 2 and f[2] in ("__create_object", "__alloc_object"):
            if not seen:
                lo = f[0]
            seen += 1
    return None


kl = kmemleak_range()
if kl:
    put(f"{FS}/reject-start", f"0x{kl[0]}")
    put(f"{FS}/reject-end", f"0x{kl[1]}")
    say(f"sweep: kmemleak's own allocations (0x{kl[0]}..0x{kl[1]}) are not counted")
else:
    say("sweep: no __create_object/__alloc_object in kallsyms: kmemleak's own allocations are "
        "counted too")
put(f"{FS}/ignore-gfp-wait", "N")
# The probability path fails nothing (probability 0) but in twice(), and there only in the armed
# step of the failnth process (task-filter, make-it-fail).
put(f"{FS}/probability", "0")
put(f"{FS}/task-filter", "Y")
put(f"{FS}/interval", "1")
put(f"{FS}/space", "0")
put(f"{FS}/stacktrace-depth", "32")
put(f"{FS}/verbose", "2")
put(f"{FS}/verbose_ratelimit_interval_ms", "0")
put("/sys/module/nvidia/parameters/inject_stack", "1")
# Hundreds of stack dumps: into the log buffer only (a serial console under TCG is slow).
printk_levels = read("/proc/sys/kernel/printk").rstrip("\n")
put("/proc/sys/kernel/printk", "1")


def leftovers():
    """What is left that should not be: "" when clean."""
    left = nv_left()
    if read(f"{IBC}/regs").rstrip("\n"):
        left += "mrs,"
    if os.path.isdir(NVPM):
        r = refcnt()
        if r != "0":
            left += f"refcnt={r},"
    else:
        if read(f"{IBC}/clients").rstrip("\n"):
            left += "clients,"
        if os.path.exists("/sys/kernel/debug/nv_peer_mem"):
            left += "debugfs,"
    return left


REPORT = re.compile(f"{KERNEL_REPORTS}|REAL-DRIVER-HAZARD")
INJECTED = re.compile(r"FAULT_INJECTION: forcing a failure|fake_nvidia: .*: injected failure")
# A frame of a call trace: the injections' own dumps name lockdep's functions.
FRAME = re.compile(r"^<[0-9]+>\[ *[0-9.]+\] +(\? )?[A-Za-z0-9_.]+\+0x[0-9a-f]+/0x[0-9a-f]+"
                   r"( \[[a-z_0-9]+\])?$")
SITE = re.compile(r"[^ ]+\+0x[0-9a-f]+/0x[0-9a-f]+ \[nv_peer_mem\]")


def judge(phase, injection, n, rc, out):
    """One SWEEP line for a run whose injection was taken. Returns (site, traced, rc): the
    module's frame it was attributed to ("" for none), whether the injection reported itself, and
    the errno the judge took."""
    plant_canary()
    log = output("dmesg", "-r", "-c", stderr=False)[1]
    with open(LOG, "w") as f:
        f.write(log)
    log = log.splitlines()
    # Its kernel reports go to the harness; the frames of the injections' own call traces do
    # not count (they name lockdep's functions). The real driver's hazards go on too: the
    # allowance the scenario declared judges them.
    for line in log:
        if REPORT.search(line) and not FRAME.search(line):
            say(f"KLOG: {line}")
    # Whether the injection left a report at all: not when the allocation asked for quiet
    # (__GFP_NOWARN).
    traced = sum(1 for line in log if INJECTED.search(line))
    # The first nv_peer_mem frame after the injection's report (unreliable "?" frames skipped).
    site, after = "", False
    for line in log:
        if INJECTED.search(line):
            after = True
        elif after and "[nv_peer_mem]" in line and " ? " not in line:
            m = SITE.search(line)
            if m:
                site = m.group(0).split("/")[0]
                break
    lines = sum(1 for line in log if re.search(r"^<[0-4]>.* nv_peer_mem: ", line))
    out_lines = out.splitlines()
    # The first failing step's errno, when the armed one succeeded (nvidia.ko's calls).
    if rc == "0":
        rc = next((m.group(1) for line in out_lines
                   if (m := re.fullmatch(r"step=[0-9]* rc=([0-9]*)", line))), "")
    rc = rc or "0"
    left = leftovers()
    why = ""
    if rc == "0" or not site:
        # Recovered, or failed where nv_peer_mem was not on the stack (the fake ib_core's own MR
        # allocation, before or after calling the client): it owes no line then.
        if lines > 1:
            why += f"{lines} log lines;"
    else:
        if lines != 1:
            why += f"{lines} log lines;"
        # ENOMEM, EIO (what was injected), EFAULT (ib_core's answer when no client claims the
        # range: acquire cannot return an errno), EINVAL (ib_register_peer_memory_client's NULL
        # carries none).
        if rc not in ("12", "5", "14", "22"):
            why += f"errno {rc};"
    # A recovered registration is nv_mem's (the run prints the core's MRs after registering):
    # nv_mem declining after a failed allocation would hand the MR to nv_mem_nc, pinned for good
    # (design.md, "Out of memory in acquire").
    mr_client = next((m.group(1) for line in out_lines
                      if (m := re.match(r"id=1 .*client=([^ ]*) .*", line))), "") or "nv_mem"
    if mr_client != "nv_mem":
        why += f"MR on {mr_client};"
    if left:
        why += f"left {left}"
    if "setup-failed" in out:
        why += "setup failed;"
    behaved = "no" if why else "yes"
    say(f"SWEEP phase={phase} inject={injection} n={n} site={site or 'none'} rc={rc} "
        f"lines={lines} behaved={behaved}" + (f" why={why}" if why else ""))
    if behaved != "yes":
        shown = [f"{path}:{line}" for path, text in ((LOG, log), (OUT, out_lines))
                 for line in text if re.search(r" nv_peer_mem: |FAKE|setup", line)]
        for line in shown[:5]:
            say(line)
    return site, traced, rc


def run_nth(n, after, twice, steps):
    """One run of failnth with its N-th allocation failed (TWICE: FAILNTH_TWICE=1 in its
    environment), on a log emptied for the judge; then AFTER, a command line, puts the world
    back. Returns (rc, left, out) from failnth's last line: the steps' outcome and fail-nth's
    count after the run (0 once it failed one; "broken" when there is no result line, a step
    before the armed one failed or failnth could not run, or no count, fail-nth unreadable: not
    the end of the phase, a broken run), and failnth's output."""
    klog_flush()
    env = dict(os.environ, FAILNTH_TWICE="1") if twice else None
    with open(OUT, "w") as f:
        subprocess.run(["/bin/failnth", str(n), *steps], stdout=f, stderr=subprocess.STDOUT,
                       env=env)
    out = read(OUT)
    lines = out.splitlines()
    rc = "\n".join(m.group(1) for line in lines if (m := re.match(r"rc=([0-9]*) left=", line)))
    left = "\n".join(m.group(1) for line in lines
                     if (m := re.fullmatch(r"rc=[0-9]* left=(-*[0-9]*)", line)))
    if left == "" or left.startswith("-"):
        left = "broken"
    if after:
        run(*after.split(), quiet=True)
    return rc, left, out


def slab(phase, after, *steps):
    """fail-nth n on the armed step (failnth.c), until a run reaches no n-th allocation; AFTER
    runs after each (cleanup of what a success made). One call site may allocate many times in
    a row (sysfs_create_group: a few allocations per file): while runs keep landing on the same
    site n gallops (1, 2, 4, then 8 ahead); when a leap lands on another site, or past the end,
    the gap is bisected back to the first allocation that is not the same site's, and the gallop
    starts again from 1 there. A leap could only miss a site whose allocations all lie between
    two of another site's; report.py would show it not injected."""
    n, prev, step, grow, hi, hi_site, last, runs = 1, 0, 1, False, 0, "", "", 0
    while n <= MAX_N:
        rc, left, out = run_nth(n, after, False, steps)
        if left == "broken":
            not_ok(f"{phase}: run {n} made no injection and gave no count: "
                   + out.replace("\n", " "))
            break
        elif left != "0":
            hi, hi_site = n, "END"  # past the last allocation
        else:
            site, traced, rc = judge(phase, "slab", n, rc, out)
            runs += 1
            if not site and n > prev + 1:
                # A leap that landed on none of the module's sites: a site may lie in the gap
                # (the load's nvidia_peermem lookup allocates twice, and the gallop then leapt
                # over Slots::new): bisect it as for another site.
                hi, hi_site = n, "none"
            elif not site:
                prev, grow = n, False  # none of the module's sites: neither the same nor another
            elif site == last:
                prev, grow = n, True
            elif n == prev + 1:
                last, prev, step, grow = site, n, 1, False  # the first run of another site
            else:
                hi, hi_site = n, site  # another site after a leap: its first run is in (prev, n]
            # The n-th failed without a report and the steps went on: fail the next one too.
            if traced == 0 and rc == "0":
                twice(phase, n, after, steps)
                runs += 1
        if hi > prev + 1:
            n = (prev + hi) // 2
            continue
        if hi > 0:
            # The boundary is hi: run (and judged) already, or the end.
            if hi_site == "END":
                break
            last, prev, hi, step, grow = hi_site, hi, 0, 1, False
        if grow:
            step = min(step * 2, 8)
        n = prev + step
    say(f"sweep: {phase}: {runs} runs, allocations under module code up to n={n - 1}")
    check(f"{phase}: the sweep ended (run {n} made no allocation it could fail)", n <= MAX_N)
    if phase in ALLOCATION_FREE.split():
        say(f"SWEEP-PHASE phase={phase} injections={runs}")
        # Its first run reached no allocation (not a broken run: that fails above).
        check(f"{phase}: allocates nothing under module code, as meant ({runs} injected)",
              runs == 0 and n == 1)
    else:
        phase_done(phase, runs)


def phase_done(phase, injections):
    """The phase's count, for tests/sweep/report.py (which fails a planned phase without one); a
    phase that injected nothing tested nothing and fails."""
    say(f"SWEEP-PHASE phase={phase} injections={injections}")
    check(f"{phase}: {injections} injected failures taken", injections > 0)


def twice(phase, n, after, steps):
    """Run n again, failing the allocation after the n-th as well. For a run whose n-th
    allocation failed without a report (__GFP_NOWARN) and whose steps all went on: a callee that
    tries a quiet allocation first and another when it fails, as the XArray does for its nodes
    (lib/xarray.c: xas_alloc, then __xas_nomem with the caller's flags). One injected failure
    never fails such a call; two in a row do, and the second reports. failslab fails the n-th
    through fail-nth (times 2 -> 1) and the next through its probability path, only in the
    failnth process's armed step (make-it-fail, FAILNTH_TWICE) (times 1 -> 0)."""
    put(f"{FS}/times", "2")
    put(f"{FS}/probability", "100")
    rc, _, out = run_nth(n, after, True, steps)
    put(f"{FS}/probability", "0")
    judge(phase, "slab-twice", n, rc, out)


def nvfail(phase, op, *steps):
    """The k-th call of nvidia.ko's OP fails, k = 1, 2, ... until the steps make no k-th call.
    With the errno the real driver gives (nv-p2p.c): the puts' -ENOMEM (their stack allocation),
    dma_unmap_pages' -EINVAL, RM's failures as -EIO otherwise."""
    k, ended = 0, "no"
    err = -12 if op.startswith("put_pages") else -22 if op == "dma_unmap_pages" else -5
    while k < 50:
        ctl_nv("inject clear")
        before = nv_stat("injected")
        if not ctl_nv(f"inject {op} {err} 1 {k}"):
            not_ok(f"{phase}: the fake refused 'inject {op} {err} 1 {k}'")
            ended = "refused"
            break
        klog_flush()
        with open(OUT, "w") as f:
            subprocess.run(["/bin/failnth", "0", *steps], stdout=f, stderr=subprocess.STDOUT)
        ctl_nv("inject clear")
        if nv_stat("injected") == before:
            ended = "yes"
            break
        judge(phase, f"nvidia:{op}", k + 1, "0", read(OUT))
        k += 1
    say(f"sweep: {phase}: {k} calls of {op} failed")
    if ended != "refused":
        check(f"{phase}: the sweep ended (call {k + 1} of {op} was not made)", ended == "yes")
    phase_done(phase, k)


ALLOC = f"w:{NV}/ctl:alloc {VA} {LEN} contiguous"
FREE = f"?w:{NV}/ctl:free {VA}"
REG = f"w:{IBC}/ctl:reg 1 edu0 {VA} {LEN}"
DEREG = f"?w:{IBC}/ctl:dereg 1"
VIEW = "/sys/kernel/debug/nv_peer_mem/registrations"

# The phases this world runs, before any runs: tests/sweep/report.py fails the sweep when one of
# them has no SWEEP-PHASE line (the scenario stopped before it, or skipped it). The sweep is one
# process's steps in a row, nothing runs beside them: no free can meet a P2P call waiting for the
# API lock, so none of the real driver's hazards is allowed (judge hands them on).
expect_hazards(0)
# nvpm.canary=... (tests/canaries/): the registration phase only, a kind of report planted in
# each of its first runs; the judge must fail the scenario.
if CANARY:
    ALLOCATION_FREE = ""
    say("SWEEP-PLAN phases=register allocation-free=")
    slab("register", "", ALLOC, f"W:{IBC}/ctl:reg 1 edu0 {VA} {LEN}", DEREG, FREE)
    put("/proc/sys/kernel/printk", printk_levels)
    klog_flush()
    finish()
plan = "init exit register"
if nv_has_persistent():
    plan += " register-persistent"
plan += " register-probe deregister invalidate view"
for op in ("get_pages", "dma_map_pages", "dma_unmap_pages", "put_pages"):
    plan += f" nvidia-{op}"
plan += " nvidia-put_pages-probe"
# The persistent client's calls (nv_p2p.rs, get_persistent): the persistent API where nvidia.ko
# has it (R535 and later: the fake takes injections for its calls), else get_pages with no
# callback, put with put_pages (R515-R530). Each must be called: a phase that injects nothing
# fails.
cq_ops = []
if not nv_has_persistent():
    pass
elif write_error(f"{NV}/ctl", "inject get_pages_persistent -5 1 1000") is None:
    cq_ops = ["get_pages_persistent", "put_pages_persistent"]
else:
    cq_ops = ["get_pages", "put_pages"]
ctl_nv("inject clear")
for op in cq_ops:
    plan += f" nvidia-cq-{op}"
# Phases whose code allocates nothing under the module's frames: unloading, deregistering and the
# free callback's invalidation give back what registration took and never need memory to do it
# (a teardown that could fail for lack of memory would leave pins behind). Their slab sweep must
# find no allocation at all, and fails when one appears; the other phases show that failslab
# injects in this boot.
ALLOCATION_FREE = "exit deregister invalidate"
say(f"SWEEP-PLAN phases={plan} allocation-free={ALLOCATION_FREE}")
# Module init and exit.
check("unload nv_peer_mem", run, "rmmod", "nv_peer_mem")
any_module()
slab("init", "rmmod nv_peer_mem", f"L:{KO}:{OPTS}")
check("load again", run, "modprobe", "nv_peer_mem")
slab("exit", "modprobe nv_peer_mem", "U:nv_peer_mem")
this_module()
# Registration (acquire, get_pages, dma_map), from the process that owns the memory.
slab("register", "", ALLOC, f"W:{IBC}/ctl:reg 1 edu0 {VA} {LEN}", f"p:{IBC}/regs", DEREG, FREE)
if nv_has_persistent():
    slab("register-persistent", "", ALLOC, f"W:{IBC}/ctl:reg 5 edu0 {VA} {LEN} cq",
         f"?w:{IBC}/ctl:dereg 5", FREE)
# probe_then_pin=1: acquire pins and unpins, get_pages pins again.
put(f"{NVPM}/parameters/probe_then_pin", "1")
slab("register-probe", "", ALLOC, f"W:{IBC}/ctl:reg 1 edu0 {VA} {LEN}", f"p:{IBC}/regs", DEREG,
     FREE)
put(f"{NVPM}/parameters/probe_then_pin", "0")
# Deregistration (dma_unmap, put_pages, release), the free callback's invalidation, the view.
slab("deregister", "", ALLOC, REG, f"W:{IBC}/ctl:dereg 1", FREE)
slab("invalidate", "", ALLOC, REG, f"W:{NV}/ctl:free {VA}", DEREG)
slab("view", "", ALLOC, REG, f"R:{VIEW}", DEREG, FREE)


def life(phase, op):
    """nvidia.ko's calls, each failing in turn, over a registration's whole life: register, read
    the view, deregister, register again, cudaFree under it (the free callback), deregister."""
    nvfail(phase, op, ALLOC, f"?w:{IBC}/ctl:reg 1 edu0 {VA} {LEN}", f"?r:{VIEW}", DEREG,
           f"?w:{IBC}/ctl:reg 2 edu0 {VA} {LEN}", FREE, f"?w:{IBC}/ctl:dereg 2")


for op in ("get_pages", "dma_map_pages", "dma_unmap_pages", "put_pages"):
    life(f"nvidia-{op}", op)
put(f"{NVPM}/parameters/probe_then_pin", "1")
life("nvidia-put_pages-probe", "put_pages")
put(f"{NVPM}/parameters/probe_then_pin", "0")
# The persistent client's (CQ buffers): pinned through cudaFree, released at deregistration.
for op in cq_ops:
    nvfail(f"nvidia-cq-{op}", op, ALLOC, f"?w:{IBC}/ctl:reg 5 edu0 {VA} {LEN} cq", FREE,
           f"?w:{IBC}/ctl:dereg 5")

put("/sys/module/nvidia/parameters/inject_stack", "0")
put("/proc/sys/kernel/printk", printk_levels)
put(f"{FS}/verbose", "1")
put(f"{FS}/ignore-gfp-wait", "Y")
klog_flush()
check("cudaMalloc after the sweep", ctl_nv, f"alloc {VA} {LEN} contiguous")
check("a registration works after the sweep", ctl_ib, f"reg 9 edu0 {VA} {LEN}")
dma_check(9, 0x10000, GPU_VA + 0x10000)
check("deregister", ctl_ib, "dereg 9")
check("cudaFree", ctl_nv, f"free {VA}")
expect_nv_clean("after the sweep")
check("unload", unload_world)
finish()
