"""Helpers for the scenarios, run inside the test VM by python3 (vm/init, the stock world's
stock-vm.sh). A scenario prints "ok - ..." / "not ok - ..." lines; any "not ok", a non-zero exit
or a bad line in its kernel log fails it (vm/parse-log.py judges).

Every write to the doubles' control files is made by this process: NVIDIA recognises GPU memory
only in the process that allocated it, so a scenario never writes them from a child.
"""
import os
import re
import subprocess
import sys
import time

IBC = "/sys/kernel/debug/fake_ib_core"
NV = "/sys/kernel/debug/fake_nvidia"
PEERS = "/sys/kernel/mm/memory_peers"
GPU_VA = 0x7F0000000000  # where scenarios put their first GPU buffer
NVPM = "/sys/module/nv_peer_mem"

# Kernel reports: what fails a scenario's kernel log (vm/parse-log.py imports these), and what
# the scenarios that drain the kernel log themselves hand back to the harness. Besides the
# kernel's debugging reports (soft lockups are "BUG: soft lockup"): RCU stalls ("INFO:
# rcu_preempt detected stalls on CPUs/tasks", "... self-detected stall on CPU", expedited and RCU
# Tasks stalls), IOMMU faults ("DMAR: DRHD: handling fault status reg", "DMAR: [DMA Read
# NO_PASID] Request device [...] fault addr ...") and the module's own "bug:" lines (src/: every
# message that starts so is an invariant the module found broken).
KERNEL_REPORTS = (
    r"BUG:|WARNING:|KASAN|kmemleak:|possible circular locking|possible recursive locking"
    r"|inconsistent lock state|lockdep|INFO: task .* blocked|Oops|general protection"
    r"|FAKE-VIOLATION|Kernel panic|sleeping function called from invalid context|UBSAN"
    r"|list_add corruption|refcount_t:|INFO: [a-z_]+ (self-)?detected (expedited )?stall"
    r"|hard LOCKUP|DMAR: .*fault|nv_peer_mem: bug: "
)
# Boot-time notices that KERNEL_REPORTS' words match but that report nothing.
KERNEL_NOTICES = (
    r"[Cc]ommand line: |RCU lockdep checking is enabled"
    r"|kmemleak: Kernel memory leak detector initialized"
    r"|kmemleak: Automatic memory scanning thread started"
)

failed = False


def cmdline_arg(name):
    """nvpm.NAME=VALUE on the kernel command line, or ""."""
    try:
        words = open("/proc/cmdline").read().split()
    except OSError:
        return ""
    for w in words:
        if w.startswith(f"nvpm.{name}="):
            return w.split("=", 1)[1]
    return ""


# The emulated world of this boot (tests/README.md, "The matrix").
NV_GEN = cmdline_arg("nvidia") or "r580"
IB_CORE = cmdline_arg("ibcore") or "24.x"
# The scenario's name (vm/init, stock-vm.sh pass it).
SCENARIO = os.environ.get("NVPM_SCENARIO", "")


def nv_has_persistent():
    """nvidia.ko offers persistent pages (R515 and later)."""
    return NV_GEN != "r470"


def core_is_49():
    """MLNX_OFED 4.9: nv_mem is registered in the legacy form and ib_core unmaps inside
    invalidate."""
    return IB_CORE == "4.9"


def say(line):
    print(line, flush=True)


def ok(desc):
    say(f"ok - {desc}")


def not_ok(desc):
    global failed
    failed = True
    say(f"not ok - {desc}")


def check(desc, cond, *args):
    """ok or not ok: cond is a truth value, or a callable that must return a true value (None
    counts as success: the helpers below that only act raise OSError when they fail)."""
    if callable(cond):
        try:
            r = cond(*args)
            good = r is None or bool(r)
        except OSError:
            good = False
    else:
        good = bool(cond)
    if good:
        ok(desc)
    else:
        not_ok(desc)
    return good


def finish():
    sys.exit(1 if failed else 0)


def read(path):
    with open(path) as f:
        return f.read()


def write(path, line):
    """One write(2) of LINE and a newline, as `echo LINE >PATH` makes: raises OSError."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def try_write(path, line):
    """True when the write succeeded; its error's strerror text otherwise, printed on stderr as
    the shell would."""
    try:
        write(path, line)
        return True
    except OSError as e:
        print(f"write error: {e.strerror}", file=sys.stderr, flush=True)
        return False


def ctl_ib(line):
    return try_write(f"{IBC}/ctl", line)


def ctl_nv(line):
    return try_write(f"{NV}/ctl", line)


def write_error(path, line):
    """The strerror text of writing LINE into PATH, or None when it succeeded."""
    try:
        write(path, line)
        return None
    except OSError as e:
        return e.strerror or str(e)


def expect_write_error(want, desc, path, line):
    """Writing LINE into PATH must fail with WANT, the strerror text (e.g. "Bad address")."""
    err = write_error(path, line)
    if err is None:
        not_ok(f"{desc} (write succeeded, wanted '{want}')")
    elif want in err:
        ok(desc)
    else:
        not_ok(f"{desc} (got '{err}', wanted '{want}')")


def sh(cmd, **kw):
    """Runs a shell command line (busybox sh); True when it exits 0. Output goes to the console."""
    return subprocess.run(cmd, shell=True, **kw).returncode == 0


def run(*argv, quiet=False):
    """Runs a command; True when it exits 0 (quiet: its output is dropped)."""
    out = subprocess.DEVNULL if quiet else None
    sys.stdout.flush()
    return subprocess.run(argv, stdout=out, stderr=out).returncode == 0


def output(*argv, stderr=True):
    """(exit status, what the command printed: stdout, and stderr when asked, as one text)."""
    sys.stdout.flush()
    p = subprocess.run(argv, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT if stderr else None, text=True, errors="replace")
    return p.returncode, p.stdout


def refused(*argv):
    """The command fails; its output is dropped."""
    return not run(*argv, quiet=True)


def stat_of(path, key):
    """The value of KEY in a "key value" stats file ("" when absent)."""
    for line in read(path).splitlines():
        k, _, v = line.partition(" ")
        if k == key:
            return v
    return ""


def nv_stat(key):
    return stat_of(f"{NV}/stats", key)


def ib_stat(key):
    return stat_of(f"{IBC}/stats", key)


def num(s):
    """An integer from a counter's text (0 for an empty one)."""
    return int(s, 0) if s.strip() else 0


def peer_counter(client, counter):
    """ib_core's counter for a client. MLNX_OFED 24.x on kernels 6.6 and later has no
    /sys/kernel/mm/memory_peers, so this reads the fake's debugfs view of the same counters."""
    for line in read(f"{IBC}/clients").splitlines():
        if line.startswith(f"name={client} "):
            m = re.search(rf"\s{counter}=(\d+)", line)
            if m:
                return m.group(1)
    return ""


def regs():
    return read(f"{IBC}/regs")


def refcnt():
    return read(f"{NVPM}/refcnt").strip()


def nvpm_stat(client, name):
    """One of nv_peer_mem's counters (/sys/module/nv_peer_mem/stats/)."""
    return read(f"{NVPM}/stats/{client}/{name}").strip()


def dmesg():
    return output("dmesg", stderr=False)[1]


def wait_log(pattern, tenths=100):
    """Waits until the kernel log has a line matching PATTERN (default 10 s)."""
    for _ in range(tenths):
        if re.search(pattern, dmesg(), re.M):
            return True
        time.sleep(0.1)
    return False


def klog_flush():
    """The kernel log so far goes to the console as KLOG lines, where the judge reads it
    (parse-log.py), and leaves the ring buffer: what the scenario reads after is its own."""
    text = output("dmesg", "-c", stderr=False)[1]
    for line in text.splitlines():
        say(f"KLOG: {line}")


def lockdown_ctl():
    """Under kernel lockdown (the Secure Boot world, tests/secureboot/) debugfs refuses to open
    the doubles' writable files; the doubles offer them as misc devices too
    (/dev/fake_ib_core_ctl, ...), bind-mounted here over the debugfs files, so the scenarios
    write IBC/ctl as anywhere. Does nothing without lockdown."""
    try:
        mode = read("/sys/kernel/security/lockdown")
    except OSError:
        return True
    if "[none]" in mode:
        return True
    mounts = read("/proc/mounts")
    for f in ("fake_ib_core/ctl", "fake_ib_core/dma_buf", "fake_nvidia/ctl"):
        dev = "/dev/" + f.replace("/", "_")
        target = f"/sys/kernel/debug/{f}"
        if not (os.path.exists(dev) and os.path.exists(target)):
            continue
        if f" {target} " not in mounts and not run("mount", "--bind", dev, target):
            return False
    return True


def load_world(nvidia_ko="", ib_core_args="", nv_peer_mem_args=""):
    """The doubles and the module under test, as modprobe loads them on an admin's machine."""
    if nvidia_ko:
        if not run("insmod", nvidia_ko):
            return False
    elif not run("modprobe", "nvidia"):
        return False
    if not run("modprobe", "ib_core", *ib_core_args.split()):
        return False
    if not lockdown_ctl():
        return False
    return run("modprobe", "nv_peer_mem", *nv_peer_mem_args.split())


def unload_world():
    return run("rmmod", "nv_peer_mem") and run("rmmod", "ib_core") and run("rmmod", "nvidia")


def nv_left():
    """nvidia.ko's gauges that are not back to zero, as "name=value," (empty: nothing left)."""
    return "".join(f"{k}={v}," for k in ("pins", "persistent_pins", "mappings", "dead_tables")
                   if (v := nv_stat(k)) != "0")


def expect_stats_clean(what=""):
    """When nothing is pinned in nvidia, nv_peer_mem's own gauges agree: no live registration
    and no pinned byte in any client (stats.rs)."""
    stats = f"{NVPM}/stats"
    if not os.path.isdir(stats):
        return
    left = ""
    for client in sorted(os.listdir(stats)):
        live = read(f"{stats}/{client}/live_registrations").strip()
        pinned = read(f"{stats}/{client}/pinned_bytes").strip()
        if live + pinned != "00":
            left += f" {client}: live_registrations={live} pinned_bytes={pinned}"
    w = f" ({what})" if what else ""
    if not left:
        ok(f"nv_peer_mem's counters show nothing pinned{w}")
    else:
        not_ok(f"nv_peer_mem's counters{w}:{left}")


def expect_nv_clean(what=""):
    """NVIDIA pins, mappings and dead tables back to zero, and no P2P call was made from inside a
    free callback (the real driver refuses those with -EIO)."""
    left = nv_left()
    if "pins=" not in left:
        expect_stats_clean(what)
    r = nv_stat("reentry_refused")
    if r != "0":
        left += f"reentry_refused={r},"
    w = f" ({what})" if what else ""
    if not left:
        ok(f"no pins, mappings or tables left in nvidia{w}")
    else:
        not_ok(f"left in nvidia{w}: {left}")


def expected_sha(va):
    """The SHA-256 the host computed for the 4 KiB chunk of GPU memory at VA."""
    page = va & ~0xFFFF
    for line in read(f"{NV}/pages").splitlines():
        f = line.split()
        if f and int(f[0], 16) == page:
            gpu = f[2].removeprefix("gpu=")
            chunk = (int(f[1], 0) + (va & 0xFFFF)) // 4096
            shas = read(f"/etc/nvpm/gpu{gpu}.sha256").splitlines()
            return shas[chunk] if chunk < len(shas) else "no-such-chunk"
    return "no-such-page"


def dma_sha():
    import hashlib
    with open(f"{IBC}/dma_buf", "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def dma_check(mr, off, va):
    """The NIC DMA-reads 4 KiB at OFF of MR and compares with the host data of the GPU memory
    at VA (= MR address + OFF)."""
    if not ctl_ib(f"read {mr} {off} 4096"):
        not_ok(f"DMA read of MR {mr} at offset {off:#x} failed")
        return
    got, want = dma_sha(), expected_sha(va)
    if got == want:
        ok(f"MR {mr} offset {off:#x}: NIC read the host's data")
    else:
        not_ok(f"MR {mr} offset {off:#x}: NIC read {got}, host wrote {want}")


def expect_hazards(n):
    """How many REAL-DRIVER-HAZARD lines (the real driver's own use-after-free windows, see the
    fake's INTERFACE) this scenario may produce: N or "MIN-MAX"; parse-log.py checks."""
    say(f"hazards expected: {n}")


def race(*specs):
    """tests/vm/race.c: writes from threads of one process (see there); what it printed."""
    return output("race", "-q", *specs)[1]


def as_nobody(*argv):
    """(exit status, output) of ARGV run as user and group 65534, with no supplementary groups
    and no capabilities."""
    sys.stdout.flush()

    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       errors="replace", preexec_fn=drop)
    return p.returncode, p.stdout


def set_hung_timeout(seconds):
    with open("/proc/sys/kernel/hung_task_timeout_secs", "w") as f:
        f.write(f"{seconds}\n")


def canary_plant(kind):
    """The net's own test (tests/canaries/) plants one kernel report of that kind: the fake
    nvidia.ko's "canary KIND", the fake ib_core's "canary dmar-fault" (its NIC edu0 reads a bus
    address nothing mapped), and for "hung" a writer asleep in D state for 10 s while
    khungtaskd's timeout is 3 s (init sets 60)."""
    if kind == "hung":
        set_hung_timeout(3)
        ctl_nv("canary hung 10")
        set_hung_timeout(60)
    elif kind == "dmar-fault":
        ctl_ib("canary dmar-fault edu0")
        # The IOMMU driver reports it from its fault interrupt, after the transfer.
        wait_log(r"DMAR: .*fault addr")
    else:
        ctl_nv(f"canary {kind}")


CANARY = cmdline_arg("canary")


def plant_canary():
    """With nvpm.canary=KIND,KIND,... the stress and the sweep plant those kinds of kernel
    report, the next two not yet planted at each of their log drains (the stress of the
    canaries' boot has six drains), and must fail."""
    planted = 0
    for kind in filter(None, CANARY.split(",")):
        mark = f"/tmp/canary-{SCENARIO}.{kind}"
        if os.path.exists(mark):
            continue
        open(mark, "w").close()
        say(f"canary: planting {kind}")
        canary_plant(kind)
        planted += 1
        if planted >= 2:
            return


# --- py-worlds ---
def captured(*argv):
    """(exit status, output) of ARGV as the shell's $(ARGV 2>&1) held them: stdout and stderr
    as one text without its trailing newlines; a command that cannot run exits 127."""
    try:
        rc, out = output(*argv)
    except OSError as e:
        return 127, f"{argv[0]}: {e.strerror}"
    return rc, out.rstrip("\n")


def one_line(text):
    """TEXT (its trailing newlines aside) is a single line."""
    return "\n" not in text.rstrip("\n")


def has_line(text, pattern):
    """TEXT has a line matching the regular expression PATTERN (grep -q)."""
    return re.search(pattern, text, re.M) is not None


def show(text, prefix):
    """Prints each line of TEXT after PREFIX (an empty TEXT as one line)."""
    for line in text.rstrip("\n").split("\n"):
        say(prefix + line)
