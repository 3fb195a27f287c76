"""The flavour booted is the one asked for (nvpm.flavour=cloud|rt on the command line), and the
machine under it is the one the other scenarios need: the Intel IOMMU translating, the two GPUs
and two NICs on PCI, the root on virtio. The rt flavour must run PREEMPT_RT. What these
kernels cannot judge is said, not checked: Debian builds no flavour with lockdep."""
import glob
import os

from lib import *

FLAVOUR = cmdline_arg("flavour")
KVER = os.uname().release
version = read("/proc/version").rstrip("\n")
say(f"  {version}")
check(f"the kernel is Debian's {FLAVOUR} flavour ({KVER})",
      FLAVOUR != "" and KVER.endswith(f"-{FLAVOUR}-amd64") and "Debian" in version)
# Mainline PREEMPT_RT (6.12 and later) says so in uname -v; /sys/kernel/realtime was the
# out-of-tree patch set's and is gone (absent on Debian's 7.3.4 rt, 2026-11-28).
rt_config = has_line(captured("cat", f"/boot/config-{KVER}")[1], r"^CONFIG_PREEMPT_RT=y$")
rt_uname = "PREEMPT_RT" in os.uname().version
say(f"  uname -v: {os.uname().version}")
if FLAVOUR == "rt":
    check("PREEMPT_RT: uname -v says so, and /boot/config has CONFIG_PREEMPT_RT=y",
          rt_uname and rt_config)
else:
    check("not PREEMPT_RT (uname -v, /boot/config)", not rt_uname and not rt_config)
check("the Intel IOMMU is there (/sys/class/iommu/dmar*)", glob.glob("/sys/class/iommu/dmar*"))
check("  and translating: the devices have IOMMU groups",
      lambda: len(os.listdir("/sys/kernel/iommu_groups")) > 0)


def pci(vendor, device):
    """The PCI functions with these IDs."""
    found = []
    for d in glob.glob("/sys/bus/pci/devices/*"):
        try:
            if (read(f"{d}/vendor").strip(), read(f"{d}/device").strip()) == (vendor, device):
                found.append(os.path.basename(d))
        except OSError:
            pass
    return found


gpus, nics = pci("0x1af4", "0x1110"), pci("0x1234", "0x11e8")
check(f"two GPUs (ivshmem: {' '.join(gpus)}) and two NICs (edu: {' '.join(nics)})",
      len(gpus) == 2 and len(nics) == 2)
check("  each in an IOMMU group", len(gpus + nics) == 4 and
      all(os.path.exists(f"/sys/bus/pci/devices/{d}/iommu_group") for d in gpus + nics))
check("the root file system is on virtio (vda)", os.path.isdir("/sys/block/vda"))
# The kernel's own lock checker: none of Debian's flavours has it (CONFIG_PROVE_LOCKING is not
# set), so a lock-order problem shows here only if it deadlocks (the hung-task detector) or
# sleeps in atomic context ("BUG: scheduling while atomic"); the test kernels' lockdep judges
# the order (tests/kernel/config.fragment).
lockdep = os.path.exists("/proc/lockdep")
say("  lockdep: " + ("in this kernel" if lockdep
                    else "not in this kernel: no lock-order verdict here"))
finish()
