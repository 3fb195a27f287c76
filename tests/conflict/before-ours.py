"""NVIDIA's nvidia_peermem loaded first (the double: tests/fakes/nvidia_peermem), then the
nv_peer_mem service asked to start: it refuses in one line naming both modules and the two
choices, by hand and at boot with ONBOOT=yes (a failure, not a skip: Documentation/install.md);
ONBOOT=no skips. status, doctor and metrics say NVIDIA's module is the one loaded. Once it is
unloaded the service starts."""
import os
import re

from lib import *

SVC = "/etc/init.d/nv_peer_mem"
NVPM_CMD = "/usr/sbin/nv_peer_mem"  # the command the package installs (not on the VM's PATH)
CONF = "/etc/infiniband/nv_peer_mem.conf"
# The parts of the refusal's one line (nv_peer_mem-service's conflict()).
REFUSAL = (r"^nv_peer_mem: cannot start: NVIDIA's nvidia_peermem is loaded and registers nv_mem "
           r"with ib_core as nv_peer_mem does; only one may be loaded: to use nv_peer_mem, "
           r"modprobe -r nvidia_peermem and blacklist it \(echo 'blacklist nvidia_peermem' "
           r">/etc/modprobe\.d/nvidia_peermem\.conf\); to keep NVIDIA's, set ONBOOT=no in "
           + re.escape(CONF) + "$")


def service(*args, boot=False):
    """(exit status, output) of the service; boot: as sysvinit's rc runs it at boot."""
    env = dict(os.environ, PREVLEVEL="N", RUNLEVEL="2") if boot else \
        {k: v for k, v in os.environ.items() if k not in ("PREVLEVEL", "RUNLEVEL")}
    sys.stdout.flush()
    p = subprocess.run([SVC, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    say(f"  $ {'(boot) ' if boot else ''}service nv_peer_mem {' '.join(args)}: "
        f"rc={p.returncode}: {p.stdout.strip()}")
    return p.returncode, p.stdout.strip()


def loaded(module):
    return os.path.isdir(f"/sys/module/{module}")


def onboot(value):
    with open(CONF, "w") as f:
        f.write(conf_before.replace("ONBOOT=no", f"ONBOOT={value}"))


conf_before = read(CONF)
check("modprobe nvidia_peermem (the double; it pulls in ib_core)", run, "modprobe",
      "nvidia_peermem")
check("  loaded, nv_peer_mem not", loaded("nvidia_peermem") and not loaded("nv_peer_mem"))

rc, out = service("start")
check("start: exit 1", rc == 1)
check("  in one line", one_line(out))
check("  naming both modules and the two choices", has_line(out, REFUSAL))
check("  nv_peer_mem not loaded", not loaded("nv_peer_mem"))
check("  nothing loaded nvidia for it", not loaded("nvidia"))

onboot("yes")
rc, out = service("start", boot=True)
check("at boot with ONBOOT=yes: exit 1, the same line (the unit fails)",
      rc == 1 and one_line(out) and has_line(out, REFUSAL))
onboot("no")
rc, out = service("start", boot=True)
check("at boot with ONBOOT=no: exit 0, skipped (NVIDIA's module chosen)",
      rc == 0 and has_line(out, "^nv_peer_mem: ONBOOT=no in .*not loading at boot$"))
check("  nv_peer_mem not loaded", not loaded("nv_peer_mem"))

rc, out = service("status")
check("status: exit 3, NVIDIA's module loaded instead",
      rc == 3 and out == "nv_peer_mem: not loaded; NVIDIA's nvidia_peermem is loaded instead")
rc, out = captured(NVPM_CMD, "doctor")
show(out, "  | ")
check("doctor: INFO peer_modules.conflict, nvidia_peermem instead",
      has_line(out, "^INFO peer_modules.conflict: nvidia_peermem is loaded instead of "
               "nv_peer_mem$"))
rc, out = captured(NVPM_CMD, "metrics")
check("metrics: exit 0", rc == 0)
check("  nv_peer_mem_loaded 0, nv_peer_mem_nvidia_peermem_loaded 1",
      has_line(out, "^nv_peer_mem_loaded 0$")
      and has_line(out, "^nv_peer_mem_nvidia_peermem_loaded 1$"))
check("  nv_peer_mem_doctor_check{check=\"peer_modules.conflict\"} 1 (INFO)",
      has_line(out, r'^nv_peer_mem_doctor_check\{check="peer_modules\.conflict"\} 1$'))

rc, out = captured("env", "NV_PEER_MEM_METRICS=/nonexistent", NVPM_CMD, "metrics")
check("metrics without its script: exit 5, one line", rc == 5 and out == (
    "nv_peer_mem: cannot print the metrics: no /nonexistent (reinstall the package)"))
rc, out = captured(NVPM_CMD, "no-such-action")
check("an unknown action: exit 2, the usage line naming metrics", rc == 2 and out.endswith(
    "usage: ... start|stop|restart|force-reload|status|doctor [--json]|metrics [--write FILE]"
    .replace("...", "/usr/sbin/nv_peer_mem")))

check("rmmod nvidia_peermem", run, "rmmod", "nvidia_peermem")
rc, out = service("start")
check("then start: exit 0, loaded", rc == 0 and loaded("nv_peer_mem"))
rc, out = service("stop")
check("stop", rc == 0 and not loaded("nv_peer_mem"))
with open(CONF, "w") as f:
    f.write(conf_before)
finish()
