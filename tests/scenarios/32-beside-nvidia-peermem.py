"""NVIDIA's nvidia_peermem registers a PeerDirect client named nv_mem, as nv_peer_mem does: while
it is loaded nv_peer_mem refuses to load (EBUSY, one kernel line naming it and the ways out) and
leaves nothing registered; once it is unloaded nv_peer_mem loads as usual (Documentation/design.md,
"One nv_mem at a time")."""
import ctypes
import errno
import os
import re

from lib import *

SYS_FINIT_MODULE = 313  # x86_64


def finit_module(path):
    """0, or the errno of one finit_module(2) of PATH with no options."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        return 0 if libc.syscall(SYS_FINIT_MODULE, fd, b"", 0) == 0 else ctypes.get_errno()
    finally:
        os.close(fd)


def nv_mem_clients():
    return len(re.findall(r"^name=nv_mem ", read(f"{IBC}/clients"), re.M))


check("load nvidia and ib_core",
      lambda: run("modprobe", "nvidia") and run("modprobe", "ib_core") and lockdown_ctl())
check("load NVIDIA's nvidia_peermem (the double: an nv_mem client that claims nothing)",
      run, "modprobe", "nvidia_peermem")
check("  ib_core holds its nv_mem client", nv_mem_clients() == 1)
klog_flush()
# One load attempt, as kmod's modprobe makes it: busybox's modprobe retries a failed
# finit_module(2) with init_module(2), which runs the module's init, and prints its line, twice.
err = finit_module(f"/lib/modules/{os.uname().release}/extra/nv_peer_mem.ko")
check(f"one finit_module of nv_peer_mem.ko fails with EBUSY (errno {err})", err == errno.EBUSY)
ours = [line for line in dmesg().splitlines() if "nv_peer_mem: " in line]
check("  one kernel line", len(ours) == 1)
check("  naming nvidia_peermem and the two ways out", bool(ours) and ours[-1].endswith(
    "nv_peer_mem: nvidia_peermem is loaded and registers nv_mem with ib_core too: not loading "
    "beside it (EBUSY); unload it first (rmmod nvidia_peermem), or keep it and leave nv_peer_mem "
    "out"))
rc, out = output("modprobe", "nv_peer_mem")
say(f"  $ modprobe nv_peer_mem: rc={rc}: {out.strip()}")
check("modprobe nv_peer_mem fails: EBUSY", rc != 0 and "Device or resource busy" in out)
check("  nv_peer_mem not loaded", not os.path.isdir(NVPM))
check("  ib_core still holds one nv_mem client, nvidia_peermem's, and no nv_mem_nc",
      nv_mem_clients() == 1 and "name=nv_mem_nc " not in read(f"{IBC}/clients"))
klog_flush()
check("rmmod nvidia_peermem", run, "rmmod", "nvidia_peermem")
check("  its client is gone", nv_mem_clients() == 0)
check("then nv_peer_mem loads", run, "modprobe", "nv_peer_mem")
check("  and registers nv_mem", nv_mem_clients() == 1)
check("unload", unload_world)
finish()
