"""The Secure Boot machine with DKMS's key not in the MOK list: the signed modules are rejected,
the service says so in one line, and nv_peer_mem doctor names Secure Boot, the key and the fix."""
import os
import re

from lib import *

FIX = "mokutil --import /var/lib/dkms/mok.pub, reboot, and confirm it in MokManager"
k = re.escape(os.uname().release)

lockdown = captured("cat", "/sys/kernel/security/lockdown")[1]
check(f"the kernel is locked down ({lockdown})",
      has_line(lockdown, r"\[integrity\]|\[confidentiality\]"))
check("mokutil: Secure Boot enabled",
      has_line(captured("mokutil", "--sb-state")[1], "^SecureBoot enabled"))
key = captured("mokutil", "--test-key", "/var/lib/dkms/mok.pub")[1]
say(f"  mokutil --test-key /var/lib/dkms/mok.pub: {key}")
check("DKMS's key is not enrolled", "is not enrolled" in key)
check("nv_peer_mem was not loaded at boot", not os.path.isdir("/sys/module/nv_peer_mem"))
check("  the unit failed", run("systemctl", "is-failed", "--quiet", "nv_peer_mem"))
journal = captured("journalctl", "-b", "-o", "cat", "-u", "nv_peer_mem")[1]
boot_said = "\n".join(ln for ln in journal.split("\n") if ln.startswith("nv_peer_mem: "))
show(boot_said, "  journal| ")
check("  and said why at boot, in one line", one_line(boot_said))
check("  naming Secure Boot and the fix",
      has_line(boot_said, "Secure Boot is on and the kernel rejected .*" + re.escape(FIX)))
# The service's own script (service(8) hands a start to systemd, whose words these are not).
rc, out = captured("nv_peer_mem", "start")
say(f"  $ nv_peer_mem start: rc={rc}: {out}")
check("nv_peer_mem start: exit 1", rc == 1)
check("  one line", one_line(out))
check("  naming Secure Boot, the signer and the fix",
      has_line(out, r"Secure Boot is on and the kernel rejected the .* "
               r"\(DKMS module signing key\); enroll DKMS's key: " + re.escape(FIX)))
rc, out = captured("modprobe", "nv_peer_mem")
say(f"  modprobe nv_peer_mem: exit {rc}: {out}")
check("modprobe nv_peer_mem fails", rc != 0)
check("  the key was rejected", "Key was rejected by service" in out)
check("the kernel says why", "Loading of module with unavailable key is rejected" in dmesg())
rc, out = captured("nv_peer_mem", "doctor")
show(out, "  doctor| ")
check("nv_peer_mem doctor: exit 1", rc == 1)
check("  FAIL naming Secure Boot and the key that signed the module", has_line(
    out, r"^FAIL module.signature: Secure Boot is on and the kernel does not trust the key that "
    rf"signed (/usr)?/lib/modules/{k}/updates/dkms/nv_peer_mem.ko.xz \('DKMS module signing key', "
    r"serial [0-9A-F]*, /var/lib/dkms/mok.pub\)"))
check("  and the fix", has_line(
    out, "^FAIL module.signature: .* -> fix: mokutil --import /var/lib/dkms/mok.pub, reboot, "
    "and confirm the key in MokManager"))
finish()
