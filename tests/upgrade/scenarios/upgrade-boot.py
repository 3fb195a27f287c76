"""The first boot after the upgrade from Mellanox's 1.3 double (tests/upgrade/): systemd's unit
loaded this package's module, version 1.4.0 from DKMS's updates/dkms, not 1.3's, and nothing of
1.3's service is left to start."""
import os
import re

from lib import *

KVER = os.uname().release
VERSION = "1.4.0"

check("PID 1 is systemd", lambda: read("/proc/1/comm").rstrip("\n") == "systemd")
check("the nv_peer_mem unit is enabled", run("systemctl", "is-enabled", "--quiet", "nv_peer_mem"))
check("  and active: it loaded the module at boot",
      run("systemctl", "is-active", "--quiet", "nv_peer_mem"))
check("nv_peer_mem is loaded", os.path.isdir("/sys/module/nv_peer_mem"))
version = read("/sys/module/nv_peer_mem/version").strip() if os.path.exists(
    "/sys/module/nv_peer_mem/version") else "(none)"
check(f"  version {VERSION}, not 1.3 ({version})", version == VERSION)
check("  on top of nvidia and ib_core",
      os.path.exists("/sys/module/nvidia/holders/nv_peer_mem")
      and os.path.exists("/sys/module/ib_core/holders/nv_peer_mem"))
ko = captured("modinfo", "-n", "nv_peer_mem")[1]
check(f"modprobe finds DKMS's {VERSION} module ({ko})",
      has_line(ko, rf"^/lib/modules/{re.escape(KVER)}/updates/dkms/nv_peer_mem\.ko"))
left = [p for p in (f"/lib/modules/{KVER}/updates/nv_peer_mem.ko", "/etc/init/nv_peer_mem.conf",
                    "/usr/src/nv_peer_mem-1.3", "/var/lib/dkms/nv_peer_mem/1.3")
        if os.path.exists(p)]
check(f"nothing of 1.3 left ({' '.join(left) or 'none'})", not left)
check("the service's status says loaded", run("service", "nv_peer_mem", "status"))
finish()
