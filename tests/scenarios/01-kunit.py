"""The module's KUnit suites (`#[kunit_tests]` in src/, Documentation/testing.md): the pure logic
no emulated world can reach, such as an sg entry at the 4 GiB limit. KUnit runs them when
nv_peer_mem loads, on kernels with the macro (6.15 and later) and CONFIG_KUNIT=y; vm/init
filters them out of every other scenario's loads, this one lets them run. One line per suite
here; parse-log.py judges the same KTAP lines again as kunit:<suite> results."""
import os
import re
import sys

from lib import *

SUITES = ("nv_peer_mem_sg", "nv_peer_mem_gpu_range", "nv_peer_mem_versions",
          "nv_peer_mem_peer_mem", "nv_peer_mem_slots", "nv_peer_mem_registry")
GLOB = "/sys/module/kunit/parameters/filter_glob"
kver = os.uname().release
major, _, minor = kver.partition(".")
minor = re.match(r"[0-9]*", minor).group(0)


def put(path, text):
    """TEXT into PATH, without a newline (printf %s): the parameter keeps what it is given, and
    a glob ending in one matches no suite. A failure is reported on stderr, as the shell did."""
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)
    except OSError as e:
        print(f"write error: {e.strerror}", file=sys.stderr, flush=True)


glob0 = ""
if os.path.exists(GLOB):
    glob0 = read(GLOB).rstrip("\n")
    put(GLOB, "nv_peer_mem_*")
check("load (KUnit runs the suites)", load_world)
if glob0:
    put(GLOB, glob0)

if not os.path.exists(f"{NVPM}/sections/.kunit_test_suites"):
    if not os.path.exists(GLOB):
        ok(f"no KUnit on this kernel (Linux {kver} is built without CONFIG_KUNIT=y)")
    elif int(major) < 6 or (major == "6" and minor and int(minor) < 15):
        ok(f"no KUnit on this kernel (Linux {kver} has no #[kunit_tests])")
    else:
        not_ok(f"Linux {kver} has #[kunit_tests] and KUnit, but nv_peer_mem has no suites"
               " (Kbuild's nvpm_kunit)")
    check("unload", unload_world)
    finish()

# The kernel log without its timestamps. Read, not drained: vm/init hands it to the judge.
ktap = [re.sub(r"^\[[^\]]*\] ", "", line) for line in dmesg().splitlines()]


def suite_result(s):
    """The words "<verdict> <cases run> <cases planned> <failed or skipped cases>..." of suite S
    in the KTAP lines (each time it ran, one after the other), or ["missing"]."""
    out = []
    on = False
    for line in ktap:
        if line == f"    # Subtest: {s}":
            on, n, plan, bad = True, 0, "?", ""
            continue
        if not on:
            continue
        f = line.split()
        if re.match(r"    1\.\.[0-9]+$", line):
            plan = f[0][3:]
        if re.match(r"    ok [0-9]+ ", line):
            n += 1
            if " # SKIP" in line:
                bad += f" {f[2]}(skipped)"
        if re.match(r"    not ok [0-9]+ ", line):
            n += 1
            bad += f" {f[3]}"
        if re.match(rf"(not )?ok [0-9]+ {s}( |$)", line):
            out.append(f"{'ok' if f[0] == 'ok' else 'failed'} {n} {plan}{bad}")
            on = False
    return " ".join(out).split() if out else ["missing"]


for s in SUITES:
    r = suite_result(s)
    if r[0] == "ok" and len(r) == 3:
        if r[1] == r[2] and int(r[1]) > 0:
            ok(f"kunit {s}: {r[1]} cases")
        else:
            not_ok(f"kunit {s}: {r[1]} cases of {r[2]} ran")
    elif r[0] == "missing":
        not_ok(f"kunit {s}: no result in the kernel log")
    else:
        v, n, plan = (r + ["", ""])[:3]
        rest = "".join(f" {w}" for w in r[3:])
        not_ok(f"kunit {s}: {v}, {n} of {plan} cases ran, not ok:{rest}")
# Every suite that ran is one the harness knows (SUITES, tests/README.md).
for line in ktap:
    m = re.match(r"(not )?ok [0-9]+ (nv_peer_mem_[a-z0-9_]*)", line)
    if m and m.group(2) not in SUITES:
        not_ok(f"kunit {m.group(2)}: a suite this scenario does not know")
# The tests put back every context they made (each holds a module reference).
check("no module reference left by the tests", refcnt() == "0")
check("unload", unload_world)
finish()
