"""modprobe resolves nvidia and ib_core; the clients are registered in the form this world's
core understands (extended with PEER_MEM_INVALIDATE_UNMAPS on 5.x/24.x, legacy on 4.9 through
the admin's peerdirect_support=1); nv_mem_nc only where nvidia.ko has persistent pages."""
import os
import re
import subprocess

from lib import *


def clients():
    return read(f"{IBC}/clients")


def modprobe_quiet(*args):
    """modprobe with its complaints dropped (2>/dev/null); True when it loaded."""
    return subprocess.run(("modprobe",) + args, stderr=subprocess.DEVNULL).returncode == 0


check("modprobe nv_peer_mem pulls in nvidia and ib_core", run, "modprobe", "nv_peer_mem")
check("nvidia loaded", re.search(r"^nvidia ", read("/proc/modules"), re.M))
check("ib_core loaded", re.search(r"^ib_core ", read("/proc/modules"), re.M))
if core_is_49():
    check("nv_mem registered in the legacy form (MLNX_OFED 4.9)",
          re.search(r"name=nv_mem .*ex=0 flags=0x0 invalidate=1", clients()))
    check("memory_peers/nv_mem/version exists (4.9 creates it)",
          lambda: os.stat(f"{PEERS}/nv_mem/version").st_size > 0)
else:
    check("nv_mem registered extended with PEER_MEM_INVALIDATE_UNMAPS",
          re.search(r"name=nv_mem .*ex=1 flags=0x1 invalidate=1", clients()))
if IB_CORE == "24.x":
    check("no memory_peers directory (24.x on Linux 6.6+)", not os.path.exists(PEERS))
if nv_has_persistent():
    check("nv_mem_nc registered without invalidation",
          re.search(r"name=nv_mem_nc .*invalidate=0", clients()))
else:
    check(f"no nv_mem_nc: nvidia.ko ({NV_GEN}) has no persistent pages",
          "nv_mem_nc" not in clients())
check("parameters visible in sysfs", os.path.exists(f"{NVPM}/parameters/enable_dbg"))
check("enable_dbg writable at run time", write, f"{NVPM}/parameters/enable_dbg", "1")
check("refcount 0 when idle", refcnt() == "0")
check("rmmod nv_peer_mem", run, "rmmod", "nv_peer_mem")
check("clients gone from ib_core", clients().rstrip("\n") == "")
check("memory_peers entries gone", not os.path.exists(f"{PEERS}/nv_mem"))
if modprobe_quiet("nv_peer_mem", "peerdirect_support=2"):
    not_ok("peerdirect_support=2 accepted")
else:
    ok("peerdirect_support=2 refused")
check("bad parameter explained in the log", "peerdirect_support must be 0 or 1" in dmesg())
check("nothing registered after refused load", clients().rstrip("\n") == "")
if nv_has_persistent():
    check("persistent_api_support=1: a single persistent nv_mem",
          run, "modprobe", "nv_peer_mem", "persistent_api_support=1")
    check("  nv_mem is non-invalidating", re.search(r"name=nv_mem .*invalidate=0", clients()))
    check("  no nv_mem_nc", "nv_mem_nc" not in clients())
else:
    check("persistent_api_support=1 without persistent pages: loads",
          run, "modprobe", "nv_peer_mem", "persistent_api_support=1")
    check("  falls back to the invalidating nv_mem, and says so",
          re.search(r"name=nv_mem .*invalidate=1", clients())
          and "offers no persistent pages" in dmesg())
check("unload", unload_world)
finish()
