"""NVIDIA's nvidia_peermem loaded after nv_peer_mem. The real module does not look for
nv_peer_mem: it loads whenever ib_core takes its nv_mem client (kernel-open/nvidia-peermem,
tests/fakes/INTERFACE.md), and so does the double. With MLNX_OFED 24.x on Linux 6.6+ (no
memory_peers) ib_core takes it: both are loaded, status says so, the doctor fails
peer_modules.conflict, metrics carry it, and start refuses until one is gone. With a core that
has memory_peers (5.x) ib_core refuses the second nv_mem: nvidia_peermem fails to load (EINVAL,
one line) and nv_peer_mem keeps serving."""
import ctypes
import errno
import os
import re

from lib import *

SVC = "/etc/init.d/nv_peer_mem"
NVPM_CMD = "/usr/sbin/nv_peer_mem"  # the command the package installs (not on the VM's PATH)


def service(*args):
    rc, out = captured(SVC, *args)
    say(f"  $ service nv_peer_mem {' '.join(args)}: rc={rc}: {out}")
    return rc, out


def loaded(module):
    return os.path.isdir(f"/sys/module/{module}")


def finit_module(path):
    """0, or the errno of one finit_module(2) of PATH (busybox's modprobe retries a failed one
    with init_module(2), which runs the module's init, and prints its line, a second time)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        return 0 if libc.syscall(313, fd, b"", 0) == 0 else ctypes.get_errno()  # x86_64
    finally:
        os.close(fd)


def nv_mem_clients():
    return len(re.findall(r"^name=nv_mem ", read(f"{IBC}/clients"), re.M))


rc, out = service("start")
check("start: exit 0, nv_peer_mem loaded", rc == 0 and loaded("nv_peer_mem"))
check(f"  ib_core without memory_peers (24.x on {os.uname().release})", not os.path.isdir(PEERS))
klog_flush()
rc, out = output("modprobe", "nvidia_peermem")
check("then modprobe nvidia_peermem: loads (nothing in it looks for nv_peer_mem)",
      rc == 0 and loaded("nvidia_peermem"))
check("  ib_core holds two nv_mem clients", nv_mem_clients() == 2)
rc, out = service("status")
check("status: exit 0 (nv_peer_mem is loaded)", rc == 0)
check("  says nvidia_peermem is loaded too, and what to do",
      has_line(out, "^  NVIDIA's nvidia_peermem is loaded too: ib_core holds two clients named "
               r"nv_mem .*keep one \(nv_peer_mem stop, or modprobe -r nvidia_peermem\)"))
rc, out = captured(NVPM_CMD, "doctor")
show(out, "  | ")
check("doctor: exit 1", rc == 1)
check("  FAIL peer_modules.conflict: both loaded",
      has_line(out, "^FAIL peer_modules.conflict: both nv_peer_mem and nvidia_peermem are loaded"))
rc, out = captured(NVPM_CMD, "metrics")
check("metrics: exit 0", rc == 0)
check("  both modules' gauges 1", has_line(out, "^nv_peer_mem_loaded 1$")
      and has_line(out, "^nv_peer_mem_nvidia_peermem_loaded 1$"))
check("  peer_modules.conflict 3 (FAIL), gpudirect_rdma 0",
      has_line(out, r'^nv_peer_mem_doctor_check\{check="peer_modules\.conflict"\} 3$')
      and has_line(out, "^nv_peer_mem_doctor_gpudirect_rdma 0$"))
rc, out = service("start")
check("start while both are loaded: exit 1, the one line",
      rc == 1 and one_line(out) and has_line(out, "^nv_peer_mem: cannot start: NVIDIA's "
                                             "nvidia_peermem is loaded .*only one may be loaded"))
check("rmmod nvidia_peermem", run, "rmmod", "nvidia_peermem")
rc, out = service("status")
check("  status: no word of it any more", rc == 0 and "nvidia_peermem" not in out)
rc, out = service("stop")
check("stop", rc == 0 and not loaded("nv_peer_mem"))

check("a core with memory_peers (MLNX_OFED 5.x): rmmod ib_core, modprobe ib_core memory_peers=1",
      lambda: run("rmmod", "ib_core") and run("modprobe", "ib_core", "memory_peers=1"))
rc, out = service("start")
check("start: exit 0, nv_peer_mem holds memory_peers/nv_mem",
      rc == 0 and os.path.isdir(f"{PEERS}/nv_mem"))
klog_flush()
err = finit_module(f"/lib/modules/{os.uname().release}/extra/nvidia_peermem.ko")
check(f"then loading nvidia_peermem fails with EINVAL (errno {err}): ib_core refused the "
      "second nv_mem", err == errno.EINVAL and not loaded("nvidia_peermem"))
log = [line for line in dmesg().splitlines() if "nvidia_peermem double: " in line]
check("  one kernel line of its own",
      len(log) == 1 and log[0].endswith("ib_core refused its nv_mem client: not loading (EINVAL)"))
rc, out = output("modprobe", "nvidia_peermem")
say(f"  $ modprobe nvidia_peermem: rc={rc}: {out.strip()}")
check("  modprobe nvidia_peermem fails too", rc != 0 and not loaded("nvidia_peermem"))
check("  nv_peer_mem's client is still the one registered", nv_mem_clients() == 1)
rc, out = service("status")
check("  status: exit 0, no conflict", rc == 0 and "nvidia_peermem" not in out)
rc, out = service("stop")
check("stop", rc == 0 and not loaded("nv_peer_mem"))
finish()
