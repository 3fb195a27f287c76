"""The module's counters (/sys/module/nv_peer_mem/stats/<client>/) follow what happened, exactly,
and the registration view (debugfs) lists live registrations; both are read-only, the view is
root's only, and neither shows a kernel pointer."""
import os
import re
import stat

from lib import *

S = f"{NVPM}/stats"
V = "/sys/kernel/debug/nv_peer_mem/registrations"
P = f"{NVPM}/parameters"


def expect(client, *kvs):
    """Each counter NAME=VALUE of CLIENT has exactly that value (VALUE: a sum, as "0x200000 +
    0x40000")."""
    bad = ""
    for kv in kvs:
        name, _, value = kv.partition("=")
        got = slurp(f"{S}/{client}/{name}").strip()
        if got != str(sum(int(t, 0) for t in value.split("+"))):
            bad += f" {name}={got} (want {value})"
    if not bad:
        ok(f"{client}: {' '.join(kvs)}")
    else:
        not_ok(f"{client}:{bad}")


def slurp(path):
    """The file's text, or "" when it cannot be read (as cat's output would be)."""
    try:
        return read(path)
    except OSError:
        return ""


def tree(top):
    """TOP and every directory and file under it."""
    out = [top]
    for d, dirs, files in os.walk(top):
        out += [os.path.join(d, n) for n in dirs + files]
    return out


def counters_read_only():
    """15 counters for nv_mem, every file under stats/ 0444, everything root's."""
    every = tree(S)
    return (len(os.listdir(f"{S}/nv_mem")) == 15
            and all(stat.S_IMODE(st.st_mode) == 0o444 for st in map(os.lstat, every)
                    if stat.S_ISREG(st.st_mode))
            and all(os.lstat(p).st_uid == 0 for p in every))


def mode(path):
    """The access bits as stat -c %a prints them."""
    return f"{stat.S_IMODE(os.stat(path).st_mode):o}"


def nobody_cannot(*argv):
    return as_nobody(*argv)[0] != 0


def set_param(name, value):
    write(f"{P}/{name}", value)


check("load", load_world)
check("stats/nv_mem exists", os.path.isdir(f"{S}/nv_mem"))
if nv_has_persistent():
    check("stats/nv_mem_nc exists", os.path.isdir(f"{S}/nv_mem_nc"))
else:
    check("no stats/nv_mem_nc without persistent pages", not os.path.exists(f"{S}/nv_mem_nc"))
check("15 counters, all 0444 and owned by root", counters_read_only)
expect("nv_mem", "live_registrations=0", "pinned_bytes=0", "registrations=0", "err_not_mine=0")
check("counters refuse writes, even root's",
      write_error(f"{S}/nv_mem/registrations", "5") is not None)
check("a user reads them", as_nobody("cat", f"{S}/nv_mem/registrations")[1].rstrip("\n") == "0")
check("the view is root's only (0400)", lambda: mode(V) == "400")
check("a user cannot read the view", nobody_cannot, "cat", V)
check("a user cannot unload the module", nobody_cannot, "rmmod", "nv_peer_mem")
check("  still loaded", os.path.isdir(NVPM))
check("a user cannot write a parameter", nobody_cannot, "sh", "-c",
      f"echo 1 >{P}/enable_dbg")
check("  enable_dbg unchanged", slurp(f"{P}/enable_dbg").strip() == "0")

check("cudaMalloc 2 MiB", ctl_nv, f"alloc {GPU_VA:#x} 0x200000 shuffled")
check("cudaMalloc 256 KiB", ctl_nv, f"alloc {GPU_VA + 0x400000:#x} 0x40000 contiguous")
# One sg entry per page, so that the shuffled buffer's entry count is known (26-coalesced-sg
# covers merging).
check("one sg entry per page (coalesce_sg=0)", set_param, "coalesce_sg", "0")
check("register 2 MiB", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x200000")
check("register 256 KiB at +4 MiB, unaligned (+0x1000, 0x3e000 bytes)", ctl_ib,
      f"reg 2 edu1 {GPU_VA + 0x401000:#x} 0x3e000")
expect("nv_mem", "live_registrations=2", "pinned_bytes=0x200000 + 0x40000", "registrations=2",
       "deregistrations=0")
check("restore coalesce_sg=-1 (auto)", set_param, "coalesce_sg", "-1")
view = slurp(V)
check("the view lists both, mapped, with their NIC, 32 + 4 entries and the bytes held",
      re.search(rf"^[1-9][0-9]* nv_mem {GPU_VA:#x}-{GPU_VA + 0x200000:#x} 2097152 mapped "
                r"[0-9a-f:.]* 32 [0-9]* [1-9][0-9]*$", view, re.M)
      and re.search(rf"^[1-9][0-9]* nv_mem {GPU_VA + 0x401000:#x}-{GPU_VA + 0x43F000:#x} 253952 "
                    r"mapped [0-9a-f:.]* 4 [0-9]* [1-9][0-9]*$", view, re.M))
nics = {(line.split()[5:6] or [""])[0] for line in view.splitlines()[1:]}
check("the two NICs differ in the view", len(nics) == 2)
check("no kernel pointer in the view", not re.search(r"ffff[0-9a-f]{12}", view, re.I))
klog_flush()
expect_write_error("Bad address", "host memory is not nv_mem's", f"{IBC}/ctl",
                   "reg 3 edu0 0x7ffd00001000 0x10000")
expect("nv_mem", "err_not_mine=1", "live_registrations=2")
check("cudaFree under MR 1: invalidated", ctl_nv, f"free {GPU_VA:#x}")
expect("nv_mem", "invalidations=1", "live_registrations=1", "pinned_bytes=0x40000",
       "deregistrations=0")
write_error(f"{IBC}/ctl", "dereg 1")  # 4.9 released it inside the invalidation already
check("deregister MR 2", ctl_ib, "dereg 2")
expect("nv_mem", "live_registrations=0", "pinned_bytes=0", "registrations=2", "deregistrations=1",
       "invalidations=1")
check("the view is empty again", slurp(V).count("\n") == 1)

ctl_nv("inject get_pages -12 2")
expect_write_error("Cannot allocate memory", "BAR1 exhausted (ENOMEM)", f"{IBC}/ctl",
                   f"reg 4 edu0 {GPU_VA + 0x400000:#x} 0x40000")
ctl_nv("inject clear")
expect("nv_mem", "err_nvidia_enomem=1", "registrations=2", "live_registrations=0")
check("a stale context from ib_core (get_pages, dma_unmap, put_pages, release)", ctl_ib,
      "bogus-context nv_mem 1")
expect("nv_mem", "err_refused_context=4")
if nv_has_persistent():
    check("CQ buffer on nv_mem_nc", ctl_ib, f"reg 5 edu0 {GPU_VA + 0x400000:#x} 0x40000 cq")
    expect("nv_mem_nc", "live_registrations=1", "pinned_bytes=0x40000", "registrations=1")
    check("the view names its client", re.search(r"^[0-9]* nv_mem_nc ", slurp(V), re.M))
    check("deregister it", ctl_ib, "dereg 5")
    expect("nv_mem_nc", "live_registrations=0", "pinned_bytes=0", "deregistrations=1")
check("cudaFree", ctl_nv, f"free {GPU_VA + 0x400000:#x}")
expect_nv_clean()
check("unload", unload_world)
check("stats and the view went with the module",
      not os.path.exists(S) and not os.path.exists("/sys/kernel/debug/nv_peer_mem"))
finish()
