"""nv_peer_mem doctor on the emulated machine (tests/README.md): gpu1 and edu1 share a PCIe
switch (PIX), the other pairs meet at the root complex (PHB); the IOMMU translates; the
memory_peers files NCCL looks for exist only where this world's core creates them."""
import glob
import json
import os
import re

from lib import *

D = "/usr/libexec/nv_peer_mem/nv_peer_mem-doctor"
KLOG = "/tmp/kernel.log"
out, rc = "", 0


def doctor(*args):
    """Runs the doctor (its stdout and stderr as OUT, its status as RC) and shows its output."""
    global out, rc
    rc, out = output(D, *args)
    for line in out.rstrip("\n").split("\n"):
        say(f"  | {line}")


def has(pattern):
    """The doctor's last output has a line matching PATTERN."""
    return re.search(pattern, out, re.M)


def bdf_of(link):
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return ""


def json_says_rdma(text):
    """TEXT is valid JSON with gpudirect_rdma true and 4 GPU-NIC pairs."""
    try:
        d = json.loads(text)
        return d["gpudirect_rdma"] is True and len(d["pairs"]) == 4
    except (ValueError, KeyError, TypeError):
        return False


check("load", load_world)
gpus = [os.path.basename(p) for p in sorted(glob.glob("/sys/bus/pci/drivers/nvidia/0000:*"))]
gpu0, gpu1 = (gpus + ["", ""])[:2]
edu0 = bdf_of("/sys/class/infiniband/edu0/device")
edu1 = bdf_of("/sys/class/infiniband/edu1/device")
check("two GPUs bound to the nvidia driver, two NICs in /sys/class/infiniband",
      all((gpu0, gpu1, edu0, edu1)))
G0, G1, E0, E1 = map(re.escape, (gpu0, gpu1, edu0, edu1))
with open(KLOG, "w") as f:
    f.write(dmesg())
doctor("--kernel-log", KLOG)
check("GPUDirect RDMA can work: exit 0", rc == 0)
check("no FAIL line", not has("^FAIL"))
check("no traceback", "Traceback" not in out)
check("sees both GPUs", has(f"^OK gpu.devices: .*{G0}.*{G1}"))
check("sees both NICs", has(rf"^OK rdma.devices: .*edu0 \({E0}\).*edu1 \({E1}\)"))
check("PeerDirect API found in ib_core", has("^OK ib_core.peerdirect: PeerDirect API present"))
check("nv_peer_mem found for this kernel",
      has(f"^OK nv_peer_mem.installed: .*{re.escape(os.uname().release)}"))
check("loaded, with its version", has("^OK nv_peer_mem.loaded: loaded, version 1.4.0"))
check("gpu1 - edu1: PIX (one PCIe switch)",
      has(rf"^OK topology: GPU {G1} .* NIC edu1 \({E1}\): PIX"))
check("gpu0 - edu0: PHB (root complex)",
      has(rf"^WARN topology: GPU {G0} .* NIC edu0 \({E0}\): PHB"))
check("gpu1 - edu0: PHB", has(rf"^WARN topology: GPU {G1} .* NIC edu0 \({E0}\): PHB"))
check("IOMMU translating (intel_iommu=on, strict)", has("^WARN iommu.mode: .*translated"))
check("16 MiB BAR: small",
      has(f"^WARN gpu.bar1: GPU {G0}: .*16 MiB: registrations are capped by it"))
check("UCX finds /sys/module/nv_peer_mem/version",
      has("^OK ucx.detect: .*/sys/module/nv_peer_mem/version"))
if os.path.isdir(PEERS):
    check(f"with memory_peers ({IB_CORE}): NCCL finds nv_mem",
          has("^OK nccl.detect: .*memory_peers/nv_mem/version"))
else:
    check(f"without memory_peers ({IB_CORE}): NCCL will not see GPUDirect RDMA, and the doctor "
          "says so", has("^WARN nccl.detect: "))
    check("  the memory_peers finding", has("^INFO memory_peers: "))
doctor("--json", "--kernel-log", KLOG)
check("--json: exit 0 and valid JSON with gpudirect_rdma true and 4 pairs",
      rc == 0 and json_says_rdma(out))
rc, out = as_nobody(D, "--kernel-log", KLOG)
check("a user can run it: exit 0 or 1, findings, no traceback",
      0 <= rc <= 1 and has("^OK nvidia.loaded") and "Traceback" not in out)

check("unload nv_peer_mem and ib_core",
      lambda: run("rmmod", "nv_peer_mem") and run("rmmod", "ib_core"))
doctor("--kernel-log", KLOG)
check("without ib_core: exit 1", rc == 1)
check("  FAIL ib_core.loaded with a fix", has("^FAIL ib_core.loaded: .* -> fix: "))
check("unload nvidia", run, "rmmod", "nvidia")
finish()
