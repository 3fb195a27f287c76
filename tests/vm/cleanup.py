"""Between scenarios (tests/vm/init, the stock world's stock-vm.sh: python3 cleanup.py): drop
every registration and buffer a scenario left, and unload the modules under test, so that one
failure does not cascade. Every error is ignored: what is not there needs no cleaning."""
import os
import re
import subprocess

IBC = "/sys/kernel/debug/fake_ib_core"
NV = "/sys/kernel/debug/fake_nvidia"


def lines_of(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except OSError:
        return []


def ctl(path, line):
    """One write of LINE, as `echo LINE >PATH`; a refusal is no matter here."""
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


if os.path.exists(f"{IBC}/regs"):
    for line in lines_of(f"{IBC}/regs"):
        if m := re.match(r"id=([0-9]*) ", line):
            ctl(f"{IBC}/ctl", f"dereg {m.group(1)}")
if os.path.exists(f"{NV}/buffers"):
    for line in lines_of(f"{NV}/buffers"):
        if m := re.match(r"va=(0x[0-9a-f]*) .*freed=0", line):
            ctl(f"{NV}/ctl", f"free {m.group(1)}")
    ctl(f"{NV}/ctl", "inject clear")
for module in ("nv_peer_mem", "nvidia_peermem", "ib_core", "nvidia"):
    if any(line.startswith(f"{module} ") for line in lines_of("/proc/modules")):
        subprocess.run(["rmmod", module])
