"""What `make demo` (tests/demo.sh) shows inside the emulated world: the service loads
nv_peer_mem with its dependencies, a GPU buffer is registered for a NIC that DMA-reads the
host's data from it, cudaFree under the registration invalidates it, and the service unloads
the module. Prints "demo: ..." lines, which tests/demo.sh shows, and an ok line for each
check that passed (the judge, vm/parse-log.py, fails a scenario that printed none)."""
import glob
import os
import re

from lib import *

SVC = "/etc/init.d/nv_peer_mem"


def demo(text):
    say(f"demo: {text}")


def count_pci(vendor, device):
    """PCI functions with that id."""
    return sum(1 for d in glob.glob("/sys/bus/pci/devices/*")
               if read(f"{d}/vendor").strip() + read(f"{d}/device").strip() == vendor + device)


def service(*args):
    """The service's command, its output (stdout and stderr) indented under the demo's lines."""
    text = output(SVC, *args)[1]
    for line in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
        say(f"demo:   {line}")


def loaded(module):
    return any(line.startswith(f"{module} ") for line in read("/proc/modules").splitlines())


def regs_lines(pattern):
    """The lines of ib_core's registrations matching PATTERN, as its group 1."""
    return "\n".join(m.group(1) for line in regs().splitlines()
                     if (m := re.match(pattern, line)))


demo(f"kernel {os.uname().release}; GPUs: {count_pci('0x1af4', '0x1110')} (ivshmem BARs),"
     f" NICs: {count_pci('0x1234', '0x11e8')} (edu)")
demo("service nv_peer_mem start:")
service("start")
if not loaded("nv_peer_mem"):
    not_ok("the service did not load nv_peer_mem")
    finish()
ok("the service loaded nv_peer_mem")
demo("loaded with its dependencies (modprobe):")
for line in read("/proc/modules").splitlines():
    f = line.split()
    if re.match(r"(nv_peer_mem|ib_core|nvidia) ", line):
        say(f"demo:   {f[0]} (used by {f[2]})")
clients = "".join(f"{m.group(1)} ({m.group(2)}) " for line in read(f"{IBC}/clients").splitlines()
                  if (m := re.match(r"name=([^ ]*) version=([^ ]*)", line)))
demo(f"peer memory clients in ib_core: {clients}")
ctl_nv(f"alloc {GPU_VA:#x} 0x400000 shuffled")
demo(f"cudaMalloc: 4 MiB of GPU memory at {GPU_VA:#x} (64 pages, shuffled in the BAR)")
if ctl_ib(f"reg 1 edu0 {GPU_VA:#x} 0x400000"):
    ok("registration")
else:
    not_ok("registration failed")
demo(f"ibv_reg_mr for NIC edu0: {regs_lines(r'id=1 (.*)')}")
for off in ("0", "0x1ff000", "0x3ff000"):
    ctl_ib(f"read 1 {off} 4096")
    got, want = dma_sha(), expected_sha(GPU_VA + int(off, 0))
    if got == want:
        demo(f"NIC DMA-read 4 KiB at +{off}: matches what the host wrote into the GPU BAR")
        ok(f"NIC DMA-read at +{off}: the host's data")
    else:
        not_ok(f"NIC DMA-read at +{off}: got {got}, host wrote {want}")
demo("service nv_peer_mem status:")
service("status")
demo(f"nvidia.ko: pins {nv_stat('pins')}, DMA mappings {nv_stat('mappings')}")
ctl_nv(f"free {GPU_VA:#x}")
demo(f"cudaFree under the live registration:"
     f" invalidated={regs_lines(r'id=1 .*invalidated=([01])')}, free callbacks counted by"
     f" ib_core={peer_counter('nv_mem', 'num_free_callbacks')}")
ctl_ib("dereg 1")
demo(f"deregistered; pins left in nvidia: {nv_stat('pins')}, mappings: {nv_stat('mappings')}")
demo("service nv_peer_mem stop:")
service("stop")
if loaded("nv_peer_mem"):
    not_ok("the service did not unload nv_peer_mem")
else:
    ok("the service unloaded nv_peer_mem")
finish()
