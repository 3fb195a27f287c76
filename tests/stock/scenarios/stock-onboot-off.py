"""Before the second boot: the administrator sets ONBOOT=no."""
import os
import re

from lib import *

CONF = "/etc/infiniband/nv_peer_mem.conf"


def set_onboot(value):
    text = read(CONF)
    with open(CONF, "w") as f:
        f.write(re.sub(r"^ONBOOT=.*", f"ONBOOT={value}", text, flags=re.M))


check("set ONBOOT=no", set_onboot, "no")
check("  written", lambda: "ONBOOT=no" in read(CONF).splitlines())
os.sync()
finish()
