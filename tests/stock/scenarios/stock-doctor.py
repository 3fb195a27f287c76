"""nv_peer_mem doctor on the stock machine with everything in place: GPUDirect RDMA can work,
and it says how the module was built for Debian's kernel."""
import os
import re

from lib import *

KVER = os.uname().release
k = re.escape(KVER)
# What the doctor must say: (the pattern as the checks' descriptions show it, in grep's basic
# syntax as they always have, the same as a Python regular expression).
SAYS = [(w, w) for w in ("^OK nvidia.loaded", "^OK ib_core.loaded", "^OK ib_core.peerdirect")] + [
    (f"^OK nv_peer_mem.installed: \\(/usr\\)\\{{0,1\\}}/lib/modules/{KVER}/updates/dkms/"
     f"nv_peer_mem.ko.* (vermagic {KVER})",
     rf"^OK nv_peer_mem.installed: (/usr)?/lib/modules/{k}/updates/dkms/"
     rf"nv_peer_mem.ko.* \(vermagic {k}\)"),
    (f"^INFO kernel.rust: built against the headers of {KVER} with their Rust build artifacts "
     "rebuilt: completed from /usr/src/linux-source-",
     rf"^INFO kernel.rust: built against the headers of {k} with their Rust build artifacts "
     "rebuilt: completed from /usr/src/linux-source-"),
] + [(w, w) for w in ("^OK nv_peer_mem.loaded", "^OK service.onboot")]

check("start", run("systemctl", "start", "nv_peer_mem"))
rc, out = captured("nv_peer_mem", "doctor")
show(out, "  | ")
check("doctor: GPUDirect RDMA can work (exit 0)", rc == 0)
check("  no FAIL", not has_line(out, "^FAIL"))
for shown, want in SAYS:
    check(f"  says: {shown}", has_line(out, want))
check("stop", run("systemctl", "stop", "nv_peer_mem"))
finish()
