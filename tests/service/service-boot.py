"""ONBOOT in /etc/infiniband/nv_peer_mem.conf. This VM booted with ONBOOT=no and ran the init
script as sysvinit does at boot (PREVLEVEL=N); a start by hand still loads the module."""
import os
import re

from lib import *

CONF = "/etc/infiniband/nv_peer_mem.conf"
SVC = "/etc/init.d/nv_peer_mem"


def text_of(path):
    """PATH's text without its trailing newlines ("" when it cannot be read), as $(cat PATH)."""
    try:
        return read(path).rstrip("\n")
    except OSError:
        return ""


def set_onboot(value):
    text = read(CONF)
    with open(CONF, "w") as f:
        f.write(re.sub(r"^ONBOOT=.*", f"ONBOOT={value}", text, flags=re.M))


def loaded():
    return os.path.isdir("/sys/module/nv_peer_mem")


say(f"  boot-time start printed: {text_of('/tmp/boot-rc.log')}")
check("boot ran with ONBOOT=no", has_line(text_of(CONF), "^ONBOOT=no"))
check("boot-time start exited 0", text_of("/tmp/boot-rc.rc") == "0")
check("  and said why it did not load",
      has_line(text_of("/tmp/boot-rc.log"),
               "ONBOOT=no in /etc/infiniband/nv_peer_mem.conf: not loading at boot"))
check("nv_peer_mem not loaded after boot", not loaded())
check("manual start loads it anyway", run(SVC, "start"))
check("  loaded", loaded())
check("stop", run(SVC, "stop"))

set_onboot("yes")
check("boot-time start with ONBOOT=yes", run("env", "PREVLEVEL=N", "RUNLEVEL=2", SVC, "start"))
check("  loaded", loaded())
check("stop", run(SVC, "stop"))

set_onboot("perhaps")
rc, out = captured("env", "PREVLEVEL=N", "RUNLEVEL=2", SVC, "start")
check("invalid ONBOOT: exit 6 (not configured)", rc == 6)
check("  one line", one_line(out))
check(f"  naming the value ({out})", has_line(out, "ONBOOT=perhaps"))
check("  not loaded", not loaded())
set_onboot("no")
finish()
