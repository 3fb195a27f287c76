"""The service on a systemd machine, both ways an administrator calls it: systemctl and
service(8). The module was loaded at boot (stock-boot); this leaves it unloaded."""
import os

from lib import *


def loaded():
    return os.path.isdir("/sys/module/nv_peer_mem")


rc, out = captured("systemctl", "status", "nv_peer_mem")
check("systemctl status: exit 0 while loaded", rc == 0)
check("  says active", "Active: active (exited)" in out)
check("systemctl stop", run("systemctl", "stop", "nv_peer_mem"))
check("  unloaded", not loaded())
check("systemctl status: exit 3 when stopped",
      captured("systemctl", "status", "nv_peer_mem")[0] == 3)
check("systemctl start", run("systemctl", "start", "nv_peer_mem"))
check("  loaded", loaded())
rc, out = captured("service", "nv_peer_mem", "status")
check("service nv_peer_mem status: exit 0", rc == 0)
check("service nv_peer_mem restart", run("service", "nv_peer_mem", "restart"))
check("  loaded", loaded())
check("service nv_peer_mem stop", run("service", "nv_peer_mem", "stop"))
check("  unloaded", not loaded())
check("service nv_peer_mem start", run("service", "nv_peer_mem", "start"))
check("  loaded", loaded())
rc, out = captured("nv_peer_mem", "status")
check("nv_peer_mem status: exit 0", rc == 0)
show(out, "  | ")
check("systemctl stop, for the scenarios after", run("systemctl", "stop", "nv_peer_mem"))
check("  unloaded", not loaded())
finish()
