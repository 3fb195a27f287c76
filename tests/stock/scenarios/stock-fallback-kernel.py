"""The third boot: the fallback kernel. Debian 13's 6.12, built without Rust, stays installed
beside the Rust kernel, and a machine boots it when the newer one fails. nv_peer_mem cannot
exist for it: the unit is skipped, not failed, says in one line which kernels have the module,
and the system is "running" (a "degraded" one raises an alarm on every fleet monitor)."""
import os
import re

from lib import *

release = os.uname().release
check(f"booted the fallback kernel {release}", release.startswith("6.12."))
config = read(f"/boot/config-{release}")
check("  built without Rust", not re.search(r"^CONFIG_RUST=y$", config, re.M))
check("  no nv_peer_mem module for it", not any(
    f.startswith("nv_peer_mem.ko") for _d, _s, files in os.walk(f"/lib/modules/{release}")
    for f in files))
_rc, state = output("systemctl", "is-system-running", stderr=False)
check(f"the system is running, not degraded ({state.strip()})", state.strip() == "running")
_rc, failed_units = output("systemctl", "--failed", "--no-legend", "--plain", stderr=False)
check("no failed unit", failed_units.strip() == "")
check("the nv_peer_mem unit is enabled", run("systemctl", "is-enabled", "--quiet", "nv_peer_mem"))
_rc, active = output("systemctl", "show", "-p", "ActiveState", "--value", "nv_peer_mem",
                     stderr=False)
check(f"  and inactive, not failed ({active.strip()})", active.strip() == "inactive")
check("nv_peer_mem not loaded", not os.path.isdir(NVPM))
_rc, log = output("journalctl", "-b", "-u", "nv_peer_mem", "--no-pager", "-o", "cat",
                  stderr=False)
ours = [line for line in log.splitlines() if line.startswith("nv_peer_mem: ")]
say("  journal: " + " | ".join(ours))
check("  the unit said why in one line", len(ours) == 1)
check("  naming a kernel with Rust that has the module",
      bool(ours) and re.fullmatch(
          rf"nv_peer_mem: not loading at boot: kernel {re.escape(release)} was built without "
          r"Rust and cannot have the nv_peer_mem module; boot a kernel built with Rust that has "
          r"it: (\S*7\.\S+ ?)+", ours[0]) is not None)
rc, out = output("systemctl", "start", "nv_peer_mem")
check("a start by hand fails (the module cannot be there)", rc != 0)
rc, out = output("/usr/libexec/nv_peer_mem/nv_peer_mem-service", "start")
check("  exit 5, LSB's 'not installed'", rc == 5)
check("  with the same line", out.strip().startswith(
    f"nv_peer_mem: cannot start: kernel {release} was built without Rust"))
finish()
