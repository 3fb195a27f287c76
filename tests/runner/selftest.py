#!/usr/bin/env python3
"""The harness's own test: each way a result can go missing, planted, must turn into a FAIL with
the right name. Runs the real runner (execute.py) on small jobs, and the real judges
(tests/vm/parse-log.py, tests/sweep/report.py) on planted logs. Prints "PASS harness:<case>" or
"FAIL harness:<case>: <why>" per case; exits 1 when any failed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path.insert(0, str(HERE))

from execute import Runner  # noqa: E402
from plan import Context, Job  # noqa: E402

failed = 0


def verdict(case: str, ok: bool, why: str) -> None:
    global failed
    if ok:
        print(f"PASS harness:{case}")
    else:
        failed = 1
        print(f"FAIL harness:{case}: {why}")


def run(jobs: list[Job], tmp: Path) -> dict:
    ctx = Context(jobs, tmp, tmp)
    runner = Runner(jobs, ctx, 2, tmp, echo=lambda s: None)
    runner.run()
    return {r.name: r for r in runner.results()}


def sh(script: str):
    return lambda ctx: ["sh", "-c", script]


def console(body: str, tmp: Path, name: str) -> Path:
    p = tmp / name
    p.write_text(body)
    return p


BOOT = "VM-READY kernel 7.3.4 nvidia r580 ib_core 24.x\n=== BEGIN boot\nok - booted\n=== END boot rc=0\n"


def parse_log(log: Path, *scenarios: str) -> str:
    return subprocess.run([sys.executable, str(TESTS / "vm/parse-log.py"), str(log), *scenarios],
                          capture_output=True, text=True).stdout


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)

        # A VM killed in the middle of a scenario: its console stops after BEGIN; the judge fails
        # that scenario and every later one by name, and the runner names what never came.
        log = console(BOOT + "=== BEGIN 03-register-dma\nok - one check\n", tmp, "killed.log")
        out = parse_log(log, "03-register-dma", "07-invalidate")
        job = Job("boot:7:r580", lambda ctx: [sys.executable, str(TESTS / "vm/parse-log.py"), str(log),
                                               "03-register-dma", "07-invalidate"],
                  "7", ["boot", "03-register-dma", "07-invalidate", "kmemleak"],
                  prefix=lambda ctx: "7.3.4:r580:24.x:")
        res = run([job], tmp)
        want = ["7.3.4:r580:24.x:03-register-dma", "7.3.4:r580:24.x:07-invalidate", "7.3.4:r580:24.x:kmemleak"]
        ok = ("FAIL 03-register-dma" in out and "FAIL 07-invalidate" in out
              and all(n in res and not res[n].ok for n in want) and res["7.3.4:r580:24.x:boot"].ok)
        verdict("killed-mid-scenario", ok, f"parse-log said {out.splitlines()[:3]}; runner: "
                f"{[(n, r.ok) for n, r in res.items()]}")

        # A scenario that ran and printed nothing, not even one check: a FAIL, not a pass.
        log = console(BOOT + "=== BEGIN 05-many\n=== END 05-many rc=0\n=== BEGIN kmemleak\nok - none\n"
                      "=== END kmemleak rc=0\nVM-DONE\n", tmp, "silent.log")
        out = parse_log(log, "05-many")
        verdict("silent-scenario", "FAIL 05-many" in out and "PASS boot" in out, f"parse-log said: {out!r}")

        # KTAP: the VM's plan counts fewer results than the host asked for (a driver that
        # dropped a scenario), and a result line that contradicts its block.
        log = console("VM-READY kernel 7.3.4 nvidia r580 ib_core 24.x\nKTAP version 1\n1..2\n"
                      "=== BEGIN boot\nok - booted\n=== END boot rc=0\nok 1 boot\n"
                      "=== BEGIN 05-many\nok - one\n=== END 05-many rc=0\nnot ok 2 05-many\n"
                      "=== BEGIN kmemleak\nok - none\n=== END kmemleak rc=0\nok 3 kmemleak\nVM-DONE\n",
                      tmp, "ktap.log")
        out = parse_log(log, "05-many")
        # A boot cut off inside the kmemleak scan it planned: kmemleak fails, the plan agrees.
        log = console("VM-READY kernel 7.3.4 nvidia r580 ib_core 24.x\nKTAP version 1\n1..3\n"
                      "=== BEGIN boot\nok - booted\n=== END boot rc=0\nok 1 boot\n"
                      "=== BEGIN 05-many\nok - one\n=== END 05-many rc=0\nok 2 05-many\n"
                      "=== BEGIN kmemleak\n", tmp, "ktap-cut.log")
        cut = parse_log(log, "05-many")
        verdict("ktap-checked", "FAIL 05-many" in out and "FAIL ktap-plan" in out and "PASS boot" in out
                and "FAIL kmemleak" in cut and "PASS 05-many" in cut and "ktap-plan" not in cut,
                f"parse-log said: {out!r}; of a boot cut off in kmemleak: {cut!r}")

        # A sweep whose injection is disabled: no SWEEP line in its log. report.py must fail it.
        sites = tmp / "sites.txt"
        sites.write_text("nv_peer_mem::x+0x10\tslab\t__kmalloc\tx\n")
        log = console(BOOT + "=== BEGIN 30-sweep\nok - the sweep ran\n=== END 30-sweep rc=0\n", tmp,
                      "sweep.log")
        p = subprocess.run([sys.executable, str(TESTS / "sweep/report.py"), str(sites), str(log)],
                           capture_output=True, text=True)
        verdict("sweep-injects-nothing", "FAIL sweep:sites" in p.stdout and "no SWEEP lines" in p.stdout,
                f"report.py exit {p.returncode}: {p.stdout.strip()[-300:]}")

        # A job that exits non-zero with no output at all: each of its planned results fails,
        # naming the job and its exit status.
        res = run([Job("mute", sh("exit 3"), "host", ["a", "b"])], tmp)
        ok = all(n in res and not res[n].ok and "job mute (exit 3)" in res[n].detail for n in ("a", "b"))
        verdict("exit-without-output", ok, str({n: r.detail for n, r in res.items()}))

        # A job that reports every result passed and then exits non-zero fails as itself.
        res = run([Job("liar", sh("echo 'PASS a'; exit 2"), "host", ["a"])], tmp)
        verdict("exit-after-passing", res["a"].ok and "liar" in res and not res["liar"].ok
                and "exited 2" in res["liar"].detail, str({n: (r.ok, r.detail) for n, r in res.items()}))

        # A result nobody planned is a failure too (a renamed or added check without its plan row).
        res = run([Job("chatty", sh("echo 'PASS a'; echo 'PASS surprise'"), "host", ["a"])], tmp)
        verdict("unplanned-result", res.get("a") and res["a"].ok and "surprise" in res
                and not res["surprise"].ok, str({n: (r.ok, r.detail) for n, r in res.items()}))

        # A job that cannot run because what it needs failed: its results fail as not run.
        res = run([Job("world:7", sh("echo 'FAIL build: planted'; exit 1"), "7", ["build"]),
                   Job("boot:7:x", sh("echo 'PASS boot'"), "7", ["boot", "03-register-dma"],
                       deps=["world:7"])], tmp)
        ok = (not res["build"].ok and not res["boot"].ok and "not run: world:7 exited 1" in res["boot"].detail
              and not res["03-register-dma"].ok)
        verdict("missing-job-result", ok, str({n: (r.ok, r.detail) for n, r in res.items()}))
        vm_harness(tmp)
    return failed


# A stand-in for QEMU (tests/vm/run-vm.sh runs qemu-system-x86_64 from PATH): it numbers its
# boots, notes when each starts and ends, and prints the console log STUB_MODE asks for.
STUB_QEMU = r"""#!/bin/bash
exec 9>>"$STUB_DIR/lock"
flock 9; n=$(($(cat "$STUB_DIR/boots" 2>/dev/null || echo 0) + 1)); echo $n >"$STUB_DIR/boots"
echo "start $n" >>"$STUB_DIR/events"; flock -u 9
case $STUB_MODE:$n in
int3:1) printf 'clocksource: Switched to clocksource tsc\nOops: int3: 0000 [#1] SMP\nModules linked in:\n'; exit 0 ;;
int3-module:*) printf 'Oops: int3: 0000 [#1] SMP\nModules linked in: nv_peer_mem fake_ib_core\n'; exit 0 ;;
esac
sleep "${STUB_SLEEP:-0}"
printf 'VM-READY kernel 7.3.4 nvidia r580 ib_core 24.x\n=== BEGIN boot\nok - booted\n=== END boot rc=0\n'
printf '=== BEGIN 05-x\nok - one\n=== END 05-x rc=0\nVM-DONE\n'
flock 9; echo "end $n" >>"$STUB_DIR/events"
"""


def vm_harness(tmp: Path) -> None:
    """run-vm.sh itself, on a stand-in QEMU: a boot that met the emulator's int3 before any module
    was loaded is made again, once; one with a module loaded is judged as it is; and no more
    machines run at once than NVPM_VM_MAX allows."""
    bindir, stub = tmp / "bin", tmp / "stub"
    for d in (bindir, stub, tmp / "bars"):
        d.mkdir(exist_ok=True)
    for g in (0, 1):
        (tmp / "bars" / f"gpu{g}.img").write_bytes(b"")
    qemu = bindir / "qemu-system-x86_64"
    qemu.write_text(STUB_QEMU)
    qemu.chmod(0o755)

    def boot(mode: str, name: str, extra=None) -> subprocess.Popen:
        env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "STUB_DIR": str(stub),
               "STUB_MODE": mode, "NVPM_VM_SLOT_DIR": str(tmp / "slots"), **(extra or {})}
        return subprocess.Popen([str(TESTS / "vm/run-vm.sh"), str(tmp / "kbuild"), str(tmp / "initrd"),
                                 str(tmp / name), "05-x"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def fresh():
        for f in ("boots", "events"):
            (stub / f).unlink(missing_ok=True)

    fresh()
    out, err = boot("int3", "vm-int3").communicate()
    boots = (stub / "boots").read_text().strip()
    verdict("emulator-crash-retried", "PASS 05-x" in out and boots == "2" and "booting again, once" in err
            and (tmp / "vm-int3/console-emulator-crash.log").exists(),
            f"boots {boots}; run-vm.sh said {out!r} {err[-300:]!r}")
    fresh()
    out, err = boot("int3-module", "vm-int3-module").communicate()
    boots = (stub / "boots").read_text().strip()
    verdict("emulator-crash-with-module-judged", "FAIL 05-x" in out and boots == "1",
            f"boots {boots}; run-vm.sh said {out!r} {err[-300:]!r}")
    fresh()
    ps = [boot("ok", f"vm-limit-{i}", {"NVPM_VM_MAX": "2", "STUB_SLEEP": "2"}) for i in range(4)]
    outs = [p.communicate()[0] for p in ps]
    running = most = 0
    events = (stub / "events").read_text().split()
    for word in events[::2]:
        running += 1 if word == "start" else -1
        most = max(most, running)
    verdict("machine-limit", most == 2 and all("PASS 05-x" in o for o in outs),
            f"at most {most} machines at once with NVPM_VM_MAX=2 (events {events}); outputs {outs}")


if __name__ == "__main__":
    sys.exit(main())
