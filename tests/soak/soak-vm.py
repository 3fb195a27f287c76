"""make soak: SOAK_MINUTES (kernel command line nvpm.soak_minutes=, default 10) of random
registrations and frees from several processes (NVIDIA finds GPU memory by process: each worker
is a forked process that allocates and registers its own buffers), each registration's data
DMA-read by the NIC and compared with what the host wrote, while the nv_peer_mem service is
stopped, started and restarted at random moments. A stop with live registrations must fail and
leave the module loaded and working; a registration while the module is gone finds no client
(EFAULT). At the end: every DMA read was right, nothing is left, no kernel report. Prints one
"soak: ..." line (tests/testing-report.py keeps it)."""
import os
import re
import sys
import time

from lib import *

MINUTES = int(cmdline_arg("soak_minutes") or "10")
WORKERS = 3
SVC = "/etc/init.d/nv_peer_mem"
# The kernel reports met, from the log drains.
bad = []

check("load the fakes", lambda: run("modprobe", "nvidia") and run("modprobe", "ib_core"))
check("service start", run, SVC, "start")


def now():
    return int(read("/proc/uptime").split(".")[0])


end = now() + MINUTES * 60


def rnd(n):
    """A random number in [0, N), from the kernel."""
    return int.from_bytes(os.urandom(2), "little") % n


def worker(i):
    """Until the end, a GPU buffer at a time: cudaMalloc, register on a random NIC, DMA-read a
    random 4 KiB and compare, then one of: deregister and free; free under the registration (the
    free callback invalidates it: the NIC must lose access) and deregister; deregister on a
    kernel worker and free. Counts into /tmp/soak.I."""
    k = made = unloaded = checks = wrong = invalidated = lost = other = 0
    base = 0x7F0000000000 + i * 0x100000000
    try:
        while now() < end:
            k += 1
            rid, pages = i * 1000000 + k, rnd(16) + 1
            va, length = f"{base + (k % 16) * 0x1000000:#x}", f"{pages * 0x10000:#x}"
            layout = "contiguous" if rnd(2) == 0 else "shuffled"
            nic = f"edu{rnd(2)}"
            if write_error(f"{NV}/ctl", f"alloc {va} {length} {layout}") is not None:
                other += 1
                continue
            # Written by this process: its GPU memory is not another process's.
            err = write_error(f"{IBC}/ctl", f"reg {rid} {nic} {va} {length}")
            if err is not None:
                if "Bad address" in err:
                    unloaded += 1
                else:
                    other += 1
                write_error(f"{NV}/ctl", f"free {va}")
                continue
            made += 1
            off = rnd(pages) * 0x10000 + rnd(16) * 0x1000
            # The fake ib_core keeps one DMA buffer for every reader: one read and hash at a time.
            while True:
                try:
                    os.mkdir("/tmp/soak.dma.lock")
                    break
                except OSError:
                    time.sleep(0.001)
            if write_error(f"{IBC}/ctl", f"read {rid} {off} 4096") is None:
                got = dma_sha()
                checks += 1
                if got != expected_sha(int(va, 0) + off):
                    wrong += 1
            else:
                other += 1
            os.rmdir("/tmp/soak.dma.lock")
            how = rnd(3)
            if how == 0:
                ctl_ib(f"dereg {rid}")
                ctl_nv(f"free {va}")
            elif how == 1:
                ctl_nv(f"free {va}")
                invalidated += 1
                if write_error(f"{IBC}/ctl", f"read {rid} 0 4096") is not None:
                    lost += 1
                ctl_ib(f"dereg {rid}")
            else:
                ctl_ib(f"dereg {rid} worker")
                ctl_nv(f"free {va}")
            # Now and then a pause, so that the service's stops find moments with no registration.
            if rnd(4) == 0:
                time.sleep(rnd(3) + 1)
    finally:
        with open(f"/tmp/soak.{i}", "w") as f:
            f.write(f"{made} {unloaded} {checks} {wrong} {invalidated} {lost} {other}\n")


def module_client_registered():
    try:
        return re.search(r"^name=nv_mem ", read(f"{IBC}/clients"), re.M)
    except OSError:
        return False


def admin():
    """Every 2-20 s a stop, a start or a restart of the service."""
    stops = refused = starts = restarts = broken = 0
    try:
        while now() < end:
            time.sleep(rnd(19) + 2)
            what = rnd(3)
            if what == 0:
                if run(SVC, "stop", quiet=True):
                    stops += 1
                    if os.path.isdir("/sys/module/nv_peer_mem"):
                        broken += 1
                else:
                    refused += 1
                    # Refused: still loaded, its client still registered.
                    if not module_client_registered():
                        broken += 1
            elif what == 1:
                if run(SVC, "start", quiet=True):
                    starts += 1
            elif run(SVC, "restart", quiet=True):
                restarts += 1
    finally:
        with open("/tmp/soak.admin", "w") as f:
            f.write(f"{stops} {refused} {starts} {restarts} {broken}\n")


def spawn(fn, *args):
    """FN in a forked process of its own."""
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn(*args)
            code = 0
        except BaseException as e:
            print(f"soak: {fn.__name__} {args} stopped: {e!r}", file=sys.stderr, flush=True)
        finally:
            sys.stdout.flush()
            os._exit(code)
    return pid


def drain():
    """The kernel log out of the ring buffer, reports kept."""
    for line in output("dmesg", "-c", stderr=False)[1].split("\n"):
        if re.search(KERNEL_REPORTS, line):
            bad.append(line)


def counts(path, n):
    """The N counts a process left in PATH (zeros when it left none)."""
    try:
        got = [int(x) for x in read(path).split()]
    except (OSError, ValueError):
        got = []
    return (got + [0] * n)[:n]


children = [spawn(worker, w) for w in range(WORKERS)]
children.append(spawn(admin))
# Kernel log out of the ring buffer every 30 s.
while now() < end:
    time.sleep(30)
    drain()
for pid in children:
    os.waitpid(pid, 0)
drain()

made = unloaded = checks = wrong = invalidated = lost = other = 0
for w in range(WORKERS):
    a, b, c, d, e, f, g = counts(f"/tmp/soak.{w}", 7)
    made, unloaded, checks, wrong = made + a, unloaded + b, checks + c, wrong + d
    invalidated, lost, other = invalidated + e, lost + f, other + g
stops, refused, starts, restarts, broken = counts("/tmp/soak.admin", 5)
say(f"soak: minutes={MINUTES} workers={WORKERS} registrations={made} dma_checks={checks}"
    f" dma_wrong={wrong} invalidations={invalidated} nic_lost_access={lost}"
    f" refused_while_stopped={unloaded} other_errors={other} service_stops={stops}"
    f" stops_refused={refused} starts={starts} restarts={restarts} broken={broken}"
    f" kernel_reports={len(bad)}")
check(f"registrations were made ({made})", made > 0)
check(f"every DMA read was right ({checks})", wrong == 0)
check(f"the NIC lost access after every free ({invalidated})", lost == invalidated)
check("no other errors", other == 0)
check(f"a refused stop left the module working, a stop unloaded it ({broken} broken)",
      broken == 0)
check("the service was stopped, started or restarted", stops + refused + starts + restarts > 0)
check("service start at the end", run, SVC, "start")
check("no MR left in ib_core", lambda: read(f"{IBC}/regs").rstrip("\n") == "")
expect_nv_clean("after the soak")
check("no context holds the module", lambda: refcnt() == "0")
check("service stop", run, SVC, "stop")
check("unload the fakes", lambda: run("rmmod", "ib_core") and run("rmmod", "nvidia"))
for line in bad:
    say(f"KLOG: {line}")
finish()
