"""The bad-input table: every row of /tests/bad-inputs.txt (tests/bad-inputs/table.txt in the
repository) is tried and printed with what was expected and what happened: the outcome, how many
lines the module logged, and, if anything was left behind (a pin, a mapping, a context, a module
reference), what. A row passes when all of that is as expected and nothing is left."""
import errno
import os
import re

from lib import *

T = "/tests/bad-inputs.txt"
M = NVPM
klog = []  # the kernel log of every row, handed to the harness at the end

# The errno names the table uses, by number; any other error shows as its strerror text.
ERRNO_NAMES = {errno.EFAULT: "EFAULT", errno.EINVAL: "EINVAL", errno.ENOMEM: "ENOMEM",
               errno.EOPNOTSUPP: "EOPNOTSUPP", errno.EIO: "EIO", errno.ENODEV: "ENODEV",
               errno.EBUSY: "EBUSY"}


def addr(a):
    """GPU and GPU+OFFSET in the table are addresses in this VM's GPU memory."""
    if a == "GPU":
        return f"{GPU_VA:#x}"
    if a.startswith("GPU+"):
        return f"{GPU_VA + int(a[4:], 0):#x}"
    return a


def attempt(path, line):
    """Writes LINE into PATH: "ok" or the errno's name. Everything that reaches nvidia.ko is
    written by this process: NVIDIA finds GPU memory by the calling process."""
    try:
        write(path, line)
        return "ok"
    except OSError as e:
        return ERRNO_NAMES.get(e.errno, f"error({e.strerror})")


def module_loaded():
    return os.path.isdir(M)


def load_module():
    return module_loaded() or run("modprobe", "nv_peer_mem")


def drain():
    """The kernel log so far leaves the ring buffer and is kept for the end."""
    klog.append(output("dmesg", "-c", stderr=False)[1])


def run_setup(setup, action):
    """The setup commands, ";"-separated: 0 when they all worked, 2 when the row needs what this
    world lacks, 1 on a failure. Every row but a load finds the module loaded (loads come one
    after another, so the module is unloaded and loaded once for them)."""
    if not action.startswith("load") and not load_module():
        return 1
    if setup == "-":
        return 0
    for cmd in setup.split(";"):
        w = cmd.split()
        verb = w[0] if w else ""
        if verb == "needs":
            if not nv_has_persistent():
                return 2
            continue
        if verb == "alloc":
            done = ctl_nv(f"alloc {GPU_VA + int(w[1], 0):#x} {w[2]} contiguous")
        elif verb == "free":
            done = ctl_nv(f"free {GPU_VA + int(w[1], 0):#x}")
        elif verb == "inject":
            done = ctl_nv(" ".join(w))
        elif verb == "reg":
            done = ctl_ib(f"reg {w[1]} {w[2]} {addr(w[3])} {w[4]}")
        else:
            say(f"setup: unknown command '{cmd}'")
            return 1
        if not done:
            return 1
    return 0


def act(verb, *a):
    """The action's outcome, in the table's words."""
    if verb == "reg":
        return attempt(f"{IBC}/ctl", f"reg {a[0]} {a[1]} {addr(a[2])} {a[3]}")
    if verb == "call":
        ops = ""
        for op in a[4:]:
            if op.startswith("get_pages:"):
                where, _, length = op.removeprefix("get_pages:").partition(":")
                op = f"get_pages:{addr(where)}:{length}"
            ops += f" {op}"
        wr = attempt(f"{IBC}/ctl", f"call {a[0]} {a[1]} {addr(a[2])} {a[3]}{ops}")
        return read(f"{IBC}/calls").rstrip("\n") if wr == "ok" else f"call: {wr}"
    if verb == "bogus":
        before = int(nvpm_stat(a[0], "err_refused_context"))
        wr = attempt(f"{IBC}/ctl", f"bogus-context {a[0]} {a[1]}")
        after = int(nvpm_stat(a[0], "err_refused_context"))
        return f"refused={after - before}{wr.removeprefix('ok')}"
    if verb == "load":
        if module_loaded():
            run("rmmod", "nv_peer_mem")
        outcome = "loaded" if run("modprobe", "nv_peer_mem", *a, quiet=True) else "refused"
        if module_loaded():
            run("rmmod", "nv_peer_mem")
        return outcome
    if verb == "set":
        param = f"{M}/parameters/{a[0]}"
        before = read(param).rstrip("\n")
        outcome = "accepted" if attempt(param, a[1]) == "ok" else "refused"
        now = read(param).rstrip("\n")
        return outcome if now == before else f"{outcome} (changed to {now})"
    if verb == "rmmod":
        outcome = "unloaded" if run("rmmod", "nv_peer_mem", quiet=True) else "refused"
        return outcome if module_loaded() else f"{outcome} (gone)"
    return f"unknown verb {verb}"


def leftovers():
    """What a row left behind, or ""."""
    stats = {}
    for line in read(f"{NV}/stats").splitlines():
        key, _, value = line.partition(" ")
        stats[key] = value.strip()
    p, q, m, d = (stats.get(k, "?") for k in ("pins", "persistent_pins", "mappings",
                                                "dead_tables"))
    refs = refcnt() if module_loaded() else "0"
    if p + q + m + d + refs == "00000":
        return ""
    return f"LEFT: pins={p} persistent={q} mappings={m} dead_tables={d} refs={refs}"


def module_log_lines(verb):
    """How many lines the module logged. The kernel's parameter parser also says "nv_peer_mem:
    '<v>' invalid for parameter '<p>'", which is not the module's. Busybox's modprobe tries a
    failing load twice (finit_module, then init_module), so a load counts each distinct line
    once."""
    lines = [re.sub(r"^\[[^]]*\] *", "", ln) for ln in dmesg().splitlines()
             if "nv_peer_mem: " in ln and "invalid for parameter" not in ln]
    return len(set(lines)) if verb == "load" else len(lines)


def cleanup_row():
    ctl_nv("inject clear")
    for mr in (1, 2, 3):
        write_error(f"{IBC}/ctl", f"dereg {mr}")
    for off in (0, 0x10000, 0x20000):
        write_error(f"{NV}/ctl", f"free {GPU_VA + off:#x}")


def row_line(*cells):
    return "| {:<55} | {:<40} | {:<40} |".format(*cells)


check("load", load_world)
with open(T) as f:
    table_lines = f.read().splitlines()
rows = good = 0
printed = [row_line("input", "expected", "observed")]
for line in table_lines:
    fields = line.split("|", 3) + [""] * 3
    if fields[0].startswith("#") or fields[0] == "":
        continue
    inp, setup, action, expected = (x.strip(" ") for x in fields[:4])
    drain()
    words = action.split()
    verb = ""
    rc = run_setup(setup, action)
    if rc == 0:
        drain()  # the setup's own lines do not count
        verb = words[0] if words else ""
        outcome = act(*words) if words else "unknown verb "
    elif rc == 2:
        say(f"skipped in this world: {inp}")
        cleanup_row()
        continue
    else:
        outcome = "setup failed"
    rows += 1
    log = module_log_lines(verb)
    drain()
    cleanup_row()
    left = leftovers()
    observed = f"{outcome} log={log}" + (f" {left}" if left else "")
    printed.append(row_line(inp, expected, observed))
    if observed == expected:
        good += 1
        ok(f"{inp}: {observed}")
    else:
        not_ok(f"{inp}: expected '{expected}', got '{observed}'")
    drain()
for line in printed:
    say(line)
say(f"bad inputs: {rows} tried, {good} as expected")
# Every row of the table ran, but those this driver generation cannot have (no persistent API).
data = [ln for ln in table_lines if not ln.startswith("#")]
total = sum(1 for ln in data if "|" in ln)
needs = sum(1 for ln in data if "needs persistent" in (ln.split("|") + [""])[1])
want = total if nv_has_persistent() else total - needs
check(f"every row of the table: {want} of {total} in this world", rows == want)
load_module()
expect_nv_clean()
check("unload", unload_world)
# The kernel log of every row, for the harness's KASAN/lockdep/kmemleak/WARN scan.
for text in klog:
    for line in text.splitlines():
        say(f"KLOG: {line}")
finish()
