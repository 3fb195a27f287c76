"""The second boot, with ONBOOT=no: the unit is enabled but leaves the module unloaded and says
why; a start by hand still loads it."""
import os

from lib import *

CONF = "/etc/infiniband/nv_peer_mem.conf"


def loaded(module="nv_peer_mem"):
    return os.path.isdir(f"/sys/module/{module}")


check("ONBOOT=no", lambda: "ONBOOT=no" in read(CONF).splitlines())
check("nv_peer_mem not loaded at boot", not loaded())
check("  though nvidia and ib_core are (udev loaded them for their devices)",
      loaded("nvidia") and loaded("ib_core"))
check("  though the unit is enabled", run("systemctl", "is-enabled", "--quiet", "nv_peer_mem"))
log = captured("journalctl", "-b", "-u", "nv_peer_mem", "--no-pager")[1]
check("  and the unit said why",
      has_line(log, "ONBOOT=no in /etc/infiniband/nv_peer_mem.conf: not loading at boot"))
check("systemctl start by hand loads it", run("systemctl", "start", "nv_peer_mem"))
check("  loaded", loaded())
check("systemctl stop", run("systemctl", "stop", "nv_peer_mem"))
check("  unloaded", not loaded())
finish()
