"""The Secure Boot machine with DKMS's key enrolled in the firmware's MokList (as mokutil --import
and MokManager leave it): booted through shim and grub with Secure Boot on, the kernel locked
down, the key in the kernel's keys, and the signed modules loaded at boot (ONBOOT=yes)."""
import os

from lib import *

check("PID 1 is systemd", lambda: read("/proc/1/comm").rstrip("\n") == "systemd")
lockdown = captured("cat", "/sys/kernel/security/lockdown")[1]
say(f"  lockdown: {lockdown}")
check("the kernel is locked down", has_line(lockdown, r"\[integrity\]|\[confidentiality\]"))
sb = captured("mokutil", "--sb-state")[1]
say(f"  mokutil --sb-state: {sb}")
check("mokutil: Secure Boot enabled", has_line(sb, "^SecureBoot enabled"))
check("  the kernel saw it too", "Secure boot enabled" in dmesg())
key = captured("mokutil", "--test-key", "/var/lib/dkms/mok.pub")[1]
say(f"  mokutil --test-key /var/lib/dkms/mok.pub: {key}")
check("DKMS's key is enrolled", "is already enrolled" in key)
check("  and the kernel loaded it from the MOK list",
      "Loaded X.509 cert 'DKMS module signing key" in dmesg())
check("nv_peer_mem loaded at boot (ONBOOT=yes)",
      run("systemctl", "is-active", "--quiet", "nv_peer_mem"))
check("  the module is in", os.path.isdir("/sys/module/nv_peer_mem"))
# Debian's layout of the driver: the file is nvidia-current.ko (module name nvidia).
for m in ("nv_peer_mem", "nvidia-current", "ib_core"):
    check(f"{m} signed by DKMS's key",
          captured("modinfo", "-F", "signer", m)[1] == "DKMS module signing key")
say(f"  module.sig_enforce: {captured('cat', '/sys/module/module/parameters/sig_enforce')[1]}")
t = int(read("/proc/sys/kernel/tainted"))
# 4096: out-of-tree module (O); 8192 (E, unsigned) must not be there: the modules are signed.
check(f"kernel taint only out-of-tree ({t})", (t & ~4096) == 0)
finish()
