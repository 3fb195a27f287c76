"""What the module exposes, and to whom (Documentation/design.md, "What the module exposes"):
every file it creates has the least mode that works and is root's; a user without root changes
nothing and cannot load or unload it; no kernel address reaches the kernel log, even with debug
logging on."""
import os
import re
import stat

from lib import *

M = NVPM
V = "/sys/kernel/debug/nv_peer_mem/registrations"
VDIR = os.path.dirname(V)


def mode_is(mode, path):
    """PATH has octal MODE (as stat -c %a prints it) and is root's (user and group)."""
    st = os.stat(path)
    return f"{stat.S_IMODE(st.st_mode):o} {st.st_uid}:{st.st_gid}" == f"{mode} 0:0"


def nobody_cannot(*argv):
    return as_nobody(*argv)[0] != 0


def counters_modes():
    """Every file under stats/ 0444, every directory 0755, everything root's."""
    every = [f"{M}/stats"]
    for d, dirs, files in os.walk(f"{M}/stats"):
        every += [os.path.join(d, n) for n in dirs + files]
    for p in every:
        st = os.lstat(p)
        want = {stat.S_IFREG: 0o444, stat.S_IFDIR: 0o755}.get(stat.S_IFMT(st.st_mode))
        if want is not None and stat.S_IMODE(st.st_mode) != want:
            return False
        if st.st_uid != 0 or st.st_gid != 0:
            return False
    return True


def view_dir_alone():
    """The view's directory is 0755, root's, and holds the view alone."""
    st = os.stat(VDIR)
    return (f"{stat.S_IMODE(st.st_mode):o} {st.st_uid}" == "755 0"
            and os.listdir(VDIR) == ["registrations"])


PARAMETERS = ["coalesce_sg", "enable_dbg", "peerdirect_support", "persistent_api_support",
              "probe_then_pin"]


def param(name):
    try:
        return read(f"{M}/parameters/{name}").strip()
    except OSError:
        return ""


klog_flush()
check("a user cannot load the module", nobody_cannot, "modprobe", "nv_peer_mem")
check("  not loaded", not os.path.exists(M))
check("load, debug logging on (enable_dbg=1)", load_world, "", "", "enable_dbg=1")

check("exactly the five documented parameters",
      lambda: sorted(os.listdir(f"{M}/parameters")) == PARAMETERS)
for p in ("enable_dbg", "probe_then_pin", "coalesce_sg"):
    check(f"parameter {p}: 0644 (an admin may change it at run time)",
          mode_is, "644", f"{M}/parameters/{p}")
for p in ("peerdirect_support", "persistent_api_support"):
    check(f"parameter {p}: 0444 (read once, at load)", mode_is, "444", f"{M}/parameters/{p}")
check("counters: 0444 files in 0755 directories, all root's", counters_modes)
check("the registration view: 0400", mode_is, "400", V)
check("  its directory: 0755, nothing else in it", view_dir_alone)

for p in ("enable_dbg", "probe_then_pin", "coalesce_sg"):
    before = param(p)
    check(f"a user cannot write {p}", nobody_cannot, "sh", "-c", f"echo 0 >{M}/parameters/{p}")
    check(f"  {p} unchanged", param(p) == before)
check("a user cannot write a counter", nobody_cannot, "sh", "-c",
      f"echo 0 >{M}/stats/nv_mem/registrations")
check("a user cannot read the view", nobody_cannot, "cat", V)
check("a user cannot unload the module (rmmod)", nobody_cannot, "rmmod", "nv_peer_mem")
check("  nor with modprobe -r", nobody_cannot, "modprobe", "-r", "nv_peer_mem")
check("  still loaded", os.path.isdir(M))

# Every log line of a registration's life, with debug logging on: registration, DMA,
# invalidation by cudaFree, deregistration, a refused context, the persistent client.
check("cudaMalloc 2 MiB", ctl_nv, f"alloc {GPU_VA:#x} 0x200000 shuffled")
check("register it", ctl_ib, f"reg 1 edu0 {GPU_VA:#x} 0x200000")
dma_check(1, 0x10000, GPU_VA + 0x10000)
check("cudaFree under it: invalidated", ctl_nv, f"free {GPU_VA:#x}")
write_error(f"{IBC}/ctl", "dereg 1")  # 4.9 released it inside the invalidation already
check("a stale context from ib_core", ctl_ib, "bogus-context nv_mem 1")
check("a foreign one, the size of a kernel address", ctl_ib,
      "bogus-context nv_mem 0xffff888012345678")
if nv_has_persistent():
    check("cudaMalloc, CQ buffer on nv_mem_nc",
          lambda: ctl_nv(f"alloc {GPU_VA:#x} 0x40000 contiguous")
          and ctl_ib(f"reg 2 edu0 {GPU_VA:#x} 0x40000 cq") and ctl_ib("dereg 2")
          and ctl_nv(f"free {GPU_VA:#x}"))
check("host memory refused", write_error(f"{IBC}/ctl", "reg 3 edu0 0x7ffd00001000 0x10000"))
expect_nv_clean()
check("unload", unload_world)
log = [line for line in dmesg().splitlines() if "nv_peer_mem" in line]
check("the module logged (debug logging was on)", log != [])
check("no kernel address in its log lines",
      not any(re.search(r"ffff[0-9a-f]{12}", line, re.I) for line in log))
finish()
