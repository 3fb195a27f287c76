"""The first boot of the stock machine, as the packages left it (ONBOOT=yes): systemd is PID 1,
the kernel is Debian's own, and the nv_peer_mem unit loaded the module DKMS built for it, on
top of the NVIDIA driver and ib_core."""
import os
import re

from lib import *

KVER = os.uname().release
CONF = "/etc/infiniband/nv_peer_mem.conf"
TREE = f"/var/cache/nv_peer_mem/rust-trees/{KVER}/.nv_peer_mem-rust-tree"


def clients():
    """How many of ib_core's clients are nv_mem or nv_mem_nc."""
    return len(re.findall(r"^name=nv_mem(_nc)? ", read(f"{IBC}/clients"), re.M))


check("PID 1 is systemd", lambda: read("/proc/1/comm").rstrip("\n") == "systemd")
check(f"the kernel is Debian's {KVER}", lambda: "Debian" in read("/proc/version"))
check("ONBOOT=yes, as installed", lambda: "ONBOOT=yes" in read(CONF).splitlines())
check("the nv_peer_mem unit is enabled", run("systemctl", "is-enabled", "--quiet", "nv_peer_mem"))
check("  and loaded the module at boot", run("systemctl", "is-active", "--quiet", "nv_peer_mem"))
check("nv_peer_mem is loaded", os.path.isdir("/sys/module/nv_peer_mem"))
check("  on top of nvidia", os.path.exists("/sys/module/nvidia/holders/nv_peer_mem"))
check("  and of ib_core", os.path.exists("/sys/module/ib_core/holders/nv_peer_mem"))
check("  ordered after the boot's module loading",
      "systemd-modules-load.service" in output("systemctl", "show", "-p", "After", "nv_peer_mem",
                                              stderr=False)[1])
check("  with both clients registered with ib_core", lambda: clients() == 2)
ko = captured("modinfo", "-n", "nv_peer_mem")[1]
k = re.escape(KVER)
check(f"the module is DKMS's ({ko})",
      has_line(ko, rf"^/lib/modules/{k}/updates/dkms/nv_peer_mem\.ko"))
vermagic = captured("modinfo", "-F", "vermagic", "nv_peer_mem")[1]
check(f"  built for {KVER} ({vermagic})", has_line(vermagic, rf"^{k} "))
check("  against the headers DKMS completed", lambda: os.path.getsize(TREE) > 0)
say(f"  {captured('cat', TREE)[1]}")
t = int(read("/proc/sys/kernel/tainted"))
# 4096: out-of-tree module (O), 8192: unsigned module (E); anything else is a report.
check(f"kernel taint only out-of-tree and unsigned ({t})", (t & ~12288) == 0)
finish()
