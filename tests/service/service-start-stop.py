"""The nv_peer_mem service as an admin drives it, with the package's files installed and the
module that DKMS built: start loads it (modprobe pulls in nvidia and ib_core), status reports
the registrations, stop refuses while registrations are live and leaves the module loaded."""
import hashlib
import os
import re

from lib import *

SVC = "/etc/init.d/nv_peer_mem"


def svc(*args):
    """(exit status, output) of the service with ARGS, both shown on the console."""
    rc, out = captured(SVC, *args)
    say(f"  $ service nv_peer_mem {' '.join(args)}: rc={rc}: {out}")
    return rc, out


def user(*args):
    """(exit status, output) of the service with ARGS, run by a user (uid 65534)."""
    rc, out = as_nobody(SVC, *args)
    return rc, out.rstrip("\n")


def loaded(module="nv_peer_mem"):
    return os.path.isdir(f"/sys/module/{module}")


def same_bytes(ko):
    """KO is the file DKMS installed: its SHA-256 is the one the host took."""
    with open(ko, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    return got == read("/etc/nvpm/dkms-module.sha256").split()[0]


rc, out = svc("status")
check("status before start: exit 3", rc == 3)
check("  says not loaded", out == "nv_peer_mem: not loaded")
rc, out = svc("start")
check("start: exit 0", rc == 0)
check("  nv_peer_mem loaded", loaded())
check("  modprobe resolved nvidia and ib_core", loaded("nvidia") and loaded("ib_core"))
check("  both clients registered with ib_core",
      lambda: has_line(read(f"{IBC}/clients"), r"^name=nv_mem ")
      and has_line(read(f"{IBC}/clients"), r"^name=nv_mem_nc "))
ko = output("modinfo", "-n", "nv_peer_mem", stderr=False)[1].rstrip("\n")
if not ko.startswith("/"):
    ko = f"/lib/modules/{os.uname().release}/{ko}"
check(f"  the module is the one DKMS built ({ko})", "/updates/dkms/" in ko)
check("  same bytes as DKMS installed", same_bytes, ko)
rc, out = svc("start")
check("start again: exit 0, nothing to do", f"{rc}:{out}" == "0:nv_peer_mem: already loaded")
rc, out = user("stop")
check("stop by a user: exit 4 (LSB: insufficient privilege)", rc == 4)
check("  in one line", one_line(out))
check("  saying why", has_line(out, "only root can load or unload"))
check("  module still loaded", loaded())
rc, out = user("restart")
check("restart by a user: exit 4, module still loaded", rc == 4 and loaded())
rc, out = user("status")
check("status by a user: exit 0", rc == 0)
rc, out = svc("status")
check("status: exit 0", rc == 0)
check("  loaded, version, no registrations",
      has_line(out, re.escape("loaded (version 1.4.0), 0 live registrations") + "$"))

check("cudaMalloc", ctl_nv, f"alloc {GPU_VA:#x} 0x20000 contiguous")
check("register", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x20000")
dma_check(1, 0x10000, GPU_VA + 0x10000)
rc, out = svc("status")
check("status counts the registration", has_line(out, "1 live registration$"))
check("  per client, from the module's own counters",
      has_line(out, "^  client nv_mem: 1 live registration, 131072 bytes of GPU memory pinned; "
               "1 registered, 0 deregistered, 0 invalidations, 0 errors so far$"))
check("  nv_mem_nc too", has_line(out, "^  client nv_mem_nc: 0 live registrations, 0 bytes"))
check("  and what a missing memory_peers means (24.x on 6.6+)",
      has_line(out, "ib_core has no /sys/kernel/mm/memory_peers "
               ".*NCCL will not detect GPUDirect RDMA.*nv_peer_mem doctor"))
rc, out = svc("stop")
check("stop with a live registration fails", rc == 1)
check("  in one line", one_line(out))
check("  naming the registrations", has_line(out, "1 GPU memory registration still live"))
check("  module still loaded", loaded())
rc, out = svc("restart")
check("restart with a live registration fails too, module kept", rc == 1 and loaded())
dma_check(1, 0, GPU_VA)
check("deregister", ctl_ib, "dereg 1")

rc, out = svc("stop")
check("stop: exit 0", rc == 0)
check("  nv_peer_mem unloaded", not loaded())
check("  nvidia and ib_core left alone", loaded("nvidia") and loaded("ib_core"))
rc, out = svc("stop")
check("stop when stopped: exit 0", rc == 0)
rc, out = user("start")
check("start by a user: exit 4, nothing loaded", rc == 4 and not loaded())
rc, out = svc("restart")
check("restart from stopped: loaded", rc == 0 and loaded())
rc, out = svc("force-reload")
check("force-reload: loaded", rc == 0 and loaded())
rc, out = svc("stop")
check("stop", rc == 0)
rc, out = svc("doctor")
check("doctor through the service: runs, exit 0 or 1", 0 <= rc <= 1)
check("  one finding per line", has_line(out, r"^(OK|INFO|WARN|FAIL) nvidia.loaded: "))
check("nv_peer_mem is also a command (/usr/sbin/nv_peer_mem)",
      sh("/usr/sbin/nv_peer_mem status; test $? = 3"))
rc, out = svc("bogus")
check("unknown action: exit 2", rc == 2)
check("  with usage", has_line(out, "usage"))
expect_nv_clean()
finish()
