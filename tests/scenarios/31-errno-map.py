"""The errno map: every condition Documentation/design.md and troubleshooting.md map to an errno,
each made to happen once, and judged on the three things the docs promise for it: the errno the
client hands ib_core (what ibv_reg_mr returns), the one counter that rises, and the log line (its
words, and that it is the only one). tests/lint/promises.py names these lines as the tests of
those promises."""
# The client's calls are made directly through the fake core's "call" command, whose "calls"
# file shows each call's return value exactly: a write(2) that fails with EINTR is made again
# (Python's os.write retries it, as busybox's echo did), so a registration through "reg" could
# not show that errno.
#
# tests/lint/promises.py reads a line continued with a backslash as one line: the calls it names
# (errno_case, put_case, the unknown contexts' checks) are continued so: the condition, its
# errno, its counter and its log line on one line.
import os
import re

from lib import *

S = f"{NVPM}/stats"
P = f"{NVPM}/parameters"
LEN = "0x20000"
VA = f"{GPU_VA:#x}"

check("load", load_world)
if core_is_49():
    form = "(legacy PeerDirect registration)"
else:
    form = "(extended; MLNX_OFED 4.9 needs peerdirect_support=1 PeerDirect registration)"
log = dmesg()
check(f"the load line: loaded, version ... {form}",
      "nv_peer_mem: loaded, version " in log and form in log)
check("cudaMalloc", ctl_nv, f"alloc {VA} {LEN} contiguous")
klog_flush()


def err_counters(client):
    """The client's err_* counters, as (name, value) pairs in name order."""
    d = f"{S}/{client}"
    return [(n, int(read(f"{d}/{n}"))) for n in sorted(os.listdir(d)) if n.startswith("err_")]


def rose(before, after):
    """The counters that changed between two err_counters, as "name+N" words."""
    return " ".join(f"{n}+{b - a}" for (n, a), (_, b) in zip(before, after) if a != b)


# The module's lines in the kernel log, errnos by name. Without CONFIG_SYMBOLIC_ERRNAME (the test
# kernels) the kernel's Error prints "Error(12)" where a distribution kernel prints "ENOMEM".
ERRNAMES = ((4, "EINTR"), (5, "EIO"), (12, "ENOMEM"), (16, "EBUSY"), (22, "EINVAL"),
            (95, "EOPNOTSUPP"), (524, "ENOTSUPP"))


def module_lines():
    out = []
    for line in dmesg().splitlines():
        if "nv_peer_mem: " in line:
            for n, name in ERRNAMES:
                line = re.sub(rf"Error\(-?{n}\)", name, line)
            out.append(line)
    return out


def has_text(lines, text):
    """One of LINES contains TEXT, as it is (no pattern)."""
    return any(text in line for line in lines)


# errno_case DESCRIPTION INJECT OPS EXPECTED COUNTERS LOGTEXT, and optionally:
#   INJECT    nvidia.ko's "inject ..." arguments, or "-"
#   OPS       the client calls, in order ("call" command of the fake ib_core)
#   EXPECTED  what each returned ("calls": acquire=1 get_pages=-12 release=0)
#   COUNTERS  the err_* counters that rise, "name+N" ("-": none)
#   LOGTEXT   the module's only log line contains this text ("-": no line at all)
#   client, dev  the client and the DMA device of the calls (nv_mem, edu0)
#   param     a module parameter set to 1 for the case
# Afterwards nothing may be pinned, mapped or referenced.
def errno_case(d, inj, ops, want, counters, text, client="nv_mem", dev="edu0", param=""):
    if inj != "-" and not ctl_nv(f"inject {inj}"):
        not_ok(f"{d}: inject {inj} refused")
    if param:
        try_write(f"{P}/{param}", "1")
    before = err_counters(client)
    if ctl_ib(f"call {client} {dev} {VA} {LEN} {ops}"):
        got = read(f"{IBC}/calls").split("\n")[0].strip()
    else:
        got = "call failed"
    ctl_nv("inject clear")
    if param:
        try_write(f"{P}/{param}", "0")
    lines = module_lines()
    klog_flush()
    rise = rose(before, err_counters(client))
    left, refs = nv_left(), refcnt()
    if got == want:
        ok(f"{d}: {got}")
    else:
        not_ok(f"{d}: got '{got}', wanted '{want}'")
    if counters == "-":
        counters = ""
    if rise == counters:
        ok(f"  counted: {rise or 'nothing'}")
    else:
        not_ok(f"  counters: '{rise}', wanted '{counters}'")
    logged = "\n".join(lines)
    if text == "-":
        if not lines:
            ok("  nothing logged")
        else:
            not_ok(f"  logged: {logged}")
    elif len(lines) == 1 and text in lines[0]:
        ok(f"  logged: {text}")
    else:
        not_ok(f"  log lines, wanted one with '{text}': {logged or 'none'}")
    if not left and refs == "0":
        ok("  nothing left")
    else:
        not_ok(f"  left: {left}refcnt={refs}")


LIFE = "acquire get_pages dma_map dma_unmap put_pages release"
PIN = "acquire get_pages release"
MAP = "acquire get_pages dma_map put_pages release"

errno_case("a registration (the control case)", "-", LIFE, \
           "acquire=1 get_pages=0 dma_map=0 dma_unmap=0 put_pages=0 release=0", "-", "-")

# acquire: NVIDIA's EINVAL means "not GPU memory of this process": declined silently (ib_core
# then tries host memory and says EFAULT); any other error claims the buffer so that get_pages
# pins again and hands on NVIDIA's errno instead of EFAULT.
errno_case("EINVAL from nvidia in acquire: declined, not logged", \
           "get_pages -22 1", "acquire", "acquire=0", "err_not_mine+1", "-")
errno_case("EINVAL from nvidia in get_pages (probe_then_pin=1): EINVAL", "get_pages -22 1 1", \
           PIN, "acquire=1 get_pages=-22 release=0", "err_nvidia_einval+1", \
           f"pinning GPU memory va={VA} len={LEN} failed: EINVAL", param="probe_then_pin")
errno_case("ENOMEM from nvidia (BAR1 exhausted): ENOMEM", "get_pages -12 2", \
           PIN, "acquire=1 get_pages=-12 release=0", "err_nvidia_enomem+1", \
           f"pinning GPU memory va={VA} len={LEN} failed: ENOMEM (GPU BAR1 space exhausted? " \
           "see nvidia-smi -q -d MEMORY)")
errno_case("EIO from nvidia: EIO", "get_pages -5 2", \
           PIN, "acquire=1 get_pages=-5 release=0", "err_nvidia_eio+1", \
           f"pinning GPU memory va={VA} len={LEN} failed: EIO")
errno_case("EOPNOTSUPP from nvidia: EOPNOTSUPP", "get_pages -95 2", \
           PIN, "acquire=1 get_pages=-95 release=0", "err_nvidia_eopnotsupp+1", \
           f"pinning GPU memory va={VA} len={LEN} failed: EOPNOTSUPP")
errno_case("ENOTSUPP (524) from nvidia: EOPNOTSUPP", "get_pages -524 2", \
           PIN, "acquire=1 get_pages=-95 release=0", "err_nvidia_eopnotsupp+1", \
           f"pinning GPU memory va={VA} len={LEN} failed: ENOTSUPP")
# The ERESTART family (kernel-internal, 512-516 but 515) reaches user space as EINTR; the other
# internal errnos (512 and above) as EIO; every errno below 512 as it is.
for e in (512, 513, 514, 516):
    errno_case(f"ERESTART* ({e}) from nvidia: EINTR", f"get_pages -{e} 2", \
               PIN, "acquire=1 get_pages=-4 release=0", "err_nvidia_other+1", \
               f"pinning GPU memory va={VA} len={LEN} failed:")
errno_case("EPROBE_DEFER (517), another internal errno, from nvidia: EIO", "get_pages -517 2", \
           PIN, "acquire=1 get_pages=-5 release=0", "err_nvidia_other+1", \
           f"pinning GPU memory va={VA} len={LEN} failed:")
errno_case("ENOIOCTLCMD (515), internal, from nvidia: EIO", "get_pages -515 2", \
           PIN, "acquire=1 get_pages=-5 release=0", "err_nvidia_other+1", \
           f"pinning GPU memory va={VA} len={LEN} failed:")
errno_case("EBUSY from nvidia: passed on", "get_pages -16 2", \
           PIN, "acquire=1 get_pages=-16 release=0", "err_nvidia_other+1", \
           f"pinning GPU memory va={VA} len={LEN} failed: EBUSY")

# NVIDIA's page table fails the module's checks: EINVAL, counted with the other NVIDIA errors.
errno_case("4 KiB GPU pages: EINVAL", "get_pages pagesize:0 1", \
           PIN, "acquire=1 get_pages=-22 release=0", "err_nvidia_other+1", \
           "is not supported (only 64 KiB pages)")
errno_case("a page table of an unknown version: EINVAL", "get_pages version 1", \
           PIN, "acquire=1 get_pages=-22 release=0", "err_nvidia_other+1", \
           "; this nv_peer_mem understands 1.x and 2.x (driver up to 595): update nv_peer_mem")
errno_case("a page table one entry short: EINVAL", "get_pages entries 1", \
           PIN, "acquire=1 get_pages=-22 release=0", "err_nvidia_other+1", \
           "entries, the range needs")

# dma_map: NVIDIA's errno passed on (through the same map), counted as err_mapping.
errno_case("ENOMEM from nvidia's dma_map_pages: ENOMEM", "dma_map_pages -12 1", \
           MAP, "acquire=1 get_pages=0 dma_map=-12 put_pages=0 release=0", "err_mapping+1", \
           f"DMA-mapping GPU memory va={VA} len={LEN} failed: ENOMEM")
errno_case("ERESTARTSYS (512) from nvidia's dma_map_pages: EINTR", "dma_map_pages -512 1", \
           MAP, "acquire=1 get_pages=0 dma_map=-4 put_pages=0 release=0", "err_mapping+1", \
           f"DMA-mapping GPU memory va={VA} len={LEN} failed:")
errno_case("ENOTSUPP (524) from nvidia's dma_map_pages: EOPNOTSUPP", "dma_map_pages -524 1", \
           MAP, "acquire=1 get_pages=0 dma_map=-95 put_pages=0 release=0", "err_mapping+1", \
           f"DMA-mapping GPU memory va={VA} len={LEN} failed: ENOTSUPP")
errno_case("a DMA mapping of an unknown version: EINVAL", "dma_map_pages version 1", \
           MAP, "acquire=1 get_pages=0 dma_map=-22 put_pages=0 release=0", "err_mapping+1", \
           "; this nv_peer_mem understands 2.3 and later 2.x")
errno_case("a DMA mapping one entry short: EINVAL", "dma_map_pages entries 1", \
           MAP, "acquire=1 get_pages=0 dma_map=-22 put_pages=0 release=0", "err_mapping+1", \
           "DMA mapping has 1 entries of size type")
errno_case("a DMA device that is not PCI: EINVAL", "-", \
           MAP, "acquire=1 get_pages=0 dma_map=-22 put_pages=0 release=0", "err_mapping+1", \
           "): the DMA device is not a PCI device", dev="none")

# Calls out of order or for another range: EINVAL, counted as refused.
errno_case("get_pages with another range than acquire: EINVAL", "-", \
           f"acquire get_pages:{GPU_VA + 0x10000:#x}:0x10000 release", \
           "acquire=1 get_pages=-22 release=0", "err_refused_context+1", \
           f"does not match acquire {VA} (+{LEN})")
errno_case("get_pages twice: EINVAL", "-", "acquire get_pages get_pages put_pages release", \
           "acquire=1 get_pages=0 get_pages=-22 put_pages=0 release=0", "err_refused_context+1", \
           f"get_pages for va {VA} in phase pinned: refused")
errno_case("dma_map before get_pages: EINVAL", "-", "acquire dma_map release", \
           "acquire=1 dma_map=-22 release=0", "err_refused_context+1", \
           f"dma_map for va {VA} in phase claimed: refused")
errno_case("dma_unmap without dma_map: EINVAL", "-", \
           "acquire get_pages dma_unmap put_pages release", \
           "acquire=1 get_pages=0 dma_unmap=-22 put_pages=0 release=0", "err_refused_context+1", \
           f"dma_unmap for va {VA} in phase pinned: refused")
errno_case("release of a mapped registration: unmapped and unpinned", "-", \
           "acquire get_pages dma_map release", "acquire=1 get_pages=0 dma_map=0 release=0", "-", \
           f"release of a still-mapped registration at {VA}: unmapping")

# An unknown client context: refused with EINVAL (get_pages, dma_unmap) and one line per call.
klog_flush()
before = int(nvpm_stat("nv_mem", "err_refused_context"))
check("an unknown client context (1)", ctl_ib, "bogus-context nv_mem 1")


# refused_calls TEXT: get_pages and dma_unmap returned -22 (EINVAL), and each of the four calls
# logged "<op>: TEXT".
def refused_calls(text):
    log = dmesg().splitlines()
    returned = [ln for ln in log if re.search(
        r"bogus-context: nv_mem (get_pages|dma_unmap)\(.*\) returned -22$", ln)]
    said = [ln for ln in log if f": {text}" in ln
            and re.search(r"nv_peer_mem: (get_pages|dma_unmap|put_pages|release): ", ln)]
    return len(returned) == 2 and len(said) == 4


check("  -22 from get_pages and dma_unmap, one line per call: " \
      "unknown client context 1 from ib_core", \
      refused_calls, "unknown client context 1 from ib_core")
check("  err_refused_context+4", int(nvpm_stat("nv_mem", "err_refused_context")) == before + 4)
klog_flush()
check("a client context that is no id (a kernel address)", ctl_ib,
      "bogus-context nv_mem 0xffff888012345678")
check("  -22 from get_pages and dma_unmap, one line per call: " \
      "unknown client context from ib_core (not an id this module issued)", \
      refused_calls, "unknown client context from ib_core (not an id this module issued)")
klog_flush()

# enable_dbg=1: GPU memory NVIDIA would not pin is claimed with a line saying so.
try_write(f"{P}/enable_dbg", "1")
ctl_nv("inject get_pages -5 2")
check("enable_dbg=1, EIO from nvidia", ctl_ib, f"call nv_mem edu0 {VA} {LEN} {PIN}")
ctl_nv("inject clear")
try_write(f"{P}/enable_dbg", "0")
lines = module_lines()
klog_flush()
claimed = f"claiming {VA} (+{LEN}) although pinning failed: EIO"
check(f"  logged: {claimed}", has_text(lines, claimed))

# Out of memory in acquire: the buffer is claimed anyway and get_pages fails with ENOMEM, so the
# MR is not offered to nv_mem_nc (design.md, "Out of memory in acquire"). The n-th allocation of
# the call fails, n = 1, 2, ... until the context's own allocation is the one.
FAILSLAB = "/sys/kernel/debug/failslab"
try_write(f"{FAILSLAB}/ignore-gfp-wait", "N")
try_write(f"{FAILSLAB}/verbose", "0")
before = int(nvpm_stat("nv_mem", "err_alloc"))
n, got = 1, ""
while n <= 30:
    klog_flush()
    # This process calls (NVIDIA recognises GPU memory only in the process that allocated it),
    # and disarms before it forks again.
    try:
        write("/proc/thread-self/fail-nth", str(n))
        write(f"{IBC}/ctl", f"call nv_mem edu0 {VA} {LEN} {PIN}")
        called = True
    except OSError:
        called = False
    write_error("/proc/thread-self/fail-nth", "0")
    got = read(f"{IBC}/calls").rstrip("\n") if called else ""
    lines = module_lines()
    if has_text(lines, "no memory for a context"):
        break
    n += 1
try_write(f"{FAILSLAB}/ignore-gfp-wait", "Y")
try_write(f"{FAILSLAB}/verbose", "1")
klog_flush()
check(f"the context's allocation failed (allocation {n} of the call): get_pages ENOMEM",
      got == "acquire=1 get_pages=-12 release=0")
oom = f"acquire {VA} (+{LEN}): no memory for a context (ENOMEM): the registration fails with ENOMEM"
check(f"  logged: {oom}", has_text(lines, oom))
check("  err_alloc+1", int(nvpm_stat("nv_mem", "err_alloc")) == before + 1)
check("  nothing left in nvidia", nv_left() == "")
check("  no module reference left", refcnt() == "0")

# The persistent client (nv_mem_nc, R515 and later): NVIDIA's EOPNOTSUPP (95) in acquire is a
# decline, as EINVAL is; the kernel-internal ENOTSUPP (524), which MIG and vGPU answer to a
# persistent pin, claims the buffer and reaches ibv_reg_mr as EOPNOTSUPP.
if nv_has_persistent():
    PERS = "get_pages"
    if write_error(f"{NV}/ctl", "inject get_pages_persistent -5 1 1000") is None:
        PERS = "get_pages_persistent"
    errno_case("nv_mem_nc: EOPNOTSUPP from nvidia in acquire: declined, not logged", \
               f"{PERS} -95 1", "acquire", "acquire=0", "err_not_mine+1", "-", client="nv_mem_nc")
    errno_case("nv_mem_nc: ENOTSUPP (524, MIG or vGPU) from nvidia: EOPNOTSUPP", f"{PERS} -524 2", \
               PIN, "acquire=1 get_pages=-95 release=0", "err_nvidia_eopnotsupp+1", \
               f"pinning GPU memory va={VA} len={LEN} failed: ENOTSUPP", client="nv_mem_nc")
    errno_case("nv_mem_nc: a registration", "-", LIFE, \
               "acquire=1 get_pages=0 dma_map=0 dma_unmap=0 put_pages=0 release=0", "-", "-", \
               client="nv_mem_nc")


# put_pages: NVIDIA's ENOMEM (its stack allocation, before it touched the pin) is retried once,
# so the pin goes; a second failure is logged and the pin is NVIDIA's until cudaFree.
# put_case DESCRIPTION REG-ARGS INJECT LEFT LOGTEXT...: register, inject, deregister; each
# LOGTEXT is one of the module's lines; nvidia.ko is left holding LEFT (nv_left's words).
def put_case(d, regargs, inj, want_left, *texts):
    check(f"{d}: register", ctl_ib, f"reg 1 edu0 {VA} {LEN}" + (f" {regargs}" if regargs else ""))
    ctl_nv(f"inject {inj}")
    klog_flush()
    check("  deregister", ctl_ib, "dereg 1")
    ctl_nv("inject clear")
    lines = module_lines()
    klog_flush()
    check(f"  {len(texts)} line(s) logged", len([ln for ln in lines if ln]) == len(texts))
    for t in texts:
        check(f"  logged: {t}", has_text(lines, t))
    check(f"  nvidia holds: {want_left or 'nothing'}", nv_left() == want_left)
    check("  no module reference left", refcnt() == "0")


RETRY = f"unpinning GPU memory at {VA}: nvidia.ko was out of memory, retrying once"
put_case("ENOMEM from put_pages, once: retried, unpinned", "", "put_pages -12 1", "", RETRY)
# Twice: the pin stays NVIDIA's and cudaFree's callback finds no registration. Not on R470, whose
# drivers leave the table to the client's callback: a callback that finds no registration frees
# nothing, so there nvidia.ko's table of such a pin is never freed (not handled yet).
if NV_GEN != "r470":
    put_case("ENOMEM from put_pages, twice: logged, the pin is nvidia's", "", \
             "put_pages -12 2", "pins=1,", \
             RETRY, f"releasing GPU pages at {VA} (+{LEN}) failed: ENOMEM")
    check("cudaFree ends the pin", ctl_nv, f"free {VA}")
    check("  nothing left in nvidia", nv_left() == "")
    check("cudaMalloc again", ctl_nv, f"alloc {VA} {LEN} contiguous")
# dma_unmap_pages fails: logged (ib_core gets no errno from dma_unmap's teardown).
put_case("EINVAL from dma_unmap_pages: logged", "", "dma_unmap_pages -22 1", "", \
         "nvidia_p2p_dma_unmap_pages failed: -22")
if nv_has_persistent():
    PUT = "put_pages"
    if write_error(f"{NV}/ctl", "inject put_pages_persistent -5 1 1000") is None:
        PUT = "put_pages_persistent"
    ctl_nv("inject clear")
    put_case("nv_mem_nc: ENOMEM from put_pages, once: retried, unpinned", "cq", f"{PUT} -12 1", \
             "", RETRY)

check("cudaFree", ctl_nv, f"free {VA}")
expect_nv_clean()

# persistent_api_support=1: one persistent client named nv_mem, or, without persistent pages,
# the invalidating one with a warning.
check("unload nv_peer_mem", run, "rmmod", "nv_peer_mem")
klog_flush()
check("load with persistent_api_support=1", run, "modprobe", "nv_peer_mem",
      "persistent_api_support=1")
lines = module_lines()
if nv_has_persistent():
    check("  logged: PeerDirect registration, persistent nv_mem)",
          has_text(lines, "PeerDirect registration, persistent nv_mem)"))
else:
    nopers = ("persistent_api_support=1 but nvidia.ko offers no persistent pages: "
              "registering the invalidating nv_mem instead")
    check(f"  logged: {nopers}", has_text(lines, nopers))
klog_flush()
check("unload", unload_world)
finish()
