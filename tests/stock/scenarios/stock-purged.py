"""Right after apt purge, on the same boot: no module, no unit, nothing of the packages. Nothing
can load nv_peer_mem at the next boot when no nv_peer_mem.ko is left on the disk or in the
initramfs, so the reboot that used to follow (85 s of a core, 2026-11-25) is not needed."""
import os

from lib import *


def sources():
    """/usr/src's nv_peer_mem-* (DKMS's sources)."""
    try:
        return [n for n in os.listdir("/usr/src") if n.startswith("nv_peer_mem-")]
    except OSError:
        return []


def absent(*paths):
    return not any(os.path.exists(p) for p in paths)


check("nothing loaded nv_peer_mem", not os.path.isdir("/sys/module/nv_peer_mem"))
check("modprobe finds no nv_peer_mem", refused("modinfo", "nv_peer_mem"))
check("no nv_peer_mem.ko in /lib/modules",
      output("find", "/lib/modules", "-name", "nv_peer_mem.ko*", stderr=False)[1] == "")
initrd = captured("lsinitramfs", f"/boot/initrd.img-{os.uname().release}")[1]
check("the initramfs lists its /init", has_line(initrd, "^init$"))
check("  and no nv_peer_mem", "nv_peer_mem" not in initrd)
check("systemd knows no nv_peer_mem unit", refused("systemctl", "cat", "nv_peer_mem.service"))
check("  no unit file, no enablement link, no init script",
      absent("/lib/systemd/system/nv_peer_mem.service",
             "/etc/systemd/system/multi-user.target.wants/nv_peer_mem.service",
             "/etc/init.d/nv_peer_mem"))
check("dkms knows no nv_peer_mem", captured("dkms", "status", "nv_peer_mem")[1] == "")
check("no config file, no source, no cache",
      absent("/etc/infiniband/nv_peer_mem.conf", "/var/cache/nv_peer_mem") and not sources())
finish()
