"""The fallback kernel (issue 36): booted into a kernel built without Rust (trixie's 6.12, kept
installed beside the backports kernel), the service skips the boot-time start instead of
failing it, in one line naming the kernels that have the module; a start by hand refuses with
LSB's 5 and the same facts. A Rust kernel whose module is missing still fails loudly."""
import os
import shutil

from lib import *

SVC = "/etc/init.d/nv_peer_mem"
HELPER = "/usr/libexec/nv_peer_mem/nv_peer_mem-service"
KREL = os.uname().release
KO = f"/lib/modules/{KREL}/updates/dkms/nv_peer_mem.ko"
OTHER = "7.99.0-rust-amd64"  # a Rust kernel that has the module, as DKMS leaves it
CONFIG = f"/boot/config-{KREL}"


def service(*args, boot=False):
    """(exit status, output) of the service; boot: as sysvinit's rc runs it at boot."""
    env = dict(os.environ, PREVLEVEL="N", RUNLEVEL="2") if boot else \
        {k: v for k, v in os.environ.items() if k not in ("PREVLEVEL", "RUNLEVEL")}
    sys.stdout.flush()
    p = subprocess.run([SVC if args[0] != "onboot-check" else HELPER, *args], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    say(f"  $ {'(boot) ' if boot else ''}service nv_peer_mem {' '.join(args)}: "
        f"rc={p.returncode}: {p.stdout.strip()}")
    return p.returncode, p.stdout.strip()


def kernel_config(rust):
    os.makedirs("/boot", exist_ok=True)
    with open(CONFIG, "w") as f:
        f.write("CONFIG_RUST=y\n" if rust else "# CONFIG_RUST is not set\n")


# This VM's package config says ONBOOT=no (service-vm.sh): the boot-time cases need yes.
CONF = "/etc/infiniband/nv_peer_mem.conf"
conf_before = read(CONF)
with open(CONF, "w") as f:
    f.write("ONBOOT=yes\n")
check("nv_peer_mem not loaded to begin with", not os.path.isdir(NVPM))
check("the module DKMS built is installed for the running kernel", os.path.isfile(KO))
os.makedirs(f"/lib/modules/{OTHER}/updates/dkms", exist_ok=True)
shutil.copy(KO, f"/lib/modules/{OTHER}/updates/dkms/nv_peer_mem.ko")
shutil.move(KO, "/tmp/nv_peer_mem.ko")
kernel_config(rust=False)

rc, out = service("start", boot=True)
check("without Rust, at boot: exit 0 (the boot goes on)", rc == 0)
check("  one line", len(out.splitlines()) == 1)
check("  naming the kernel to boot",
      out == f"nv_peer_mem: not loading at boot: kernel {KREL} was built without Rust and cannot "
      f"have the nv_peer_mem module; boot a kernel built with Rust that has it: {OTHER}")
check("  nv_peer_mem not loaded", not os.path.isdir(NVPM))
rc, out = service("onboot-check", boot=True)
check("  systemd's ExecCondition: exit 1, the unit is skipped, not failed", rc == 1)
rc, out = service("start")
check("without Rust, by hand: exit 5 (not installed)", rc == 5)
check("  one line with the same facts",
      out == f"nv_peer_mem: cannot start: kernel {KREL} was built without Rust and cannot have "
      f"the nv_peer_mem module; boot a kernel built with Rust that has it: {OTHER}")
check("  nothing about reinstalling or dkms", "reinstall" not in out and "dkms" not in out)

kernel_config(rust=True)
rc, out = service("onboot-check", boot=True)
check("a Rust kernel without the module: the boot-time start is not skipped", rc == 0)
rc, out = service("start", boot=True)
check("  it fails loudly: exit 5", rc == 5)
check("  saying the module is missing for this kernel",
      out == f"nv_peer_mem: cannot start: no nv_peer_mem module for kernel {KREL} "
      "(reinstall the package or rebuild it with dkms)")

shutil.move("/tmp/nv_peer_mem.ko", KO)
shutil.rmtree(f"/lib/modules/{OTHER}")
os.remove(CONFIG)
with open(CONF, "w") as f:
    f.write(conf_before)
rc, out = service("start")
check("with the module back, start works", rc == 0 and os.path.isdir(NVPM))
check("stop", service("stop")[0] == 0)
finish()
