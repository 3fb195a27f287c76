#!/usr/bin/env python3
"""The test suite's runner: the declared plan (tests/plan.toml), its jobs, every result accounted for.

usage: tests/run.py PROFILE [--lines "7 6.12"] [--only vm|stock|host] [-k GLOB]... [--list]
  PROFILE    check (make check), full (make fullcheck), race, stress, soak (tests/plan.toml)
  --lines    the kernel lines to run (default: the profile's)
  --only     one kind of job: vm (the test kernels' boots), stock (the stock world), host
  -k GLOB    keep the results whose planned name matches (e.g. '*:03-register-dma'; a boot keeps
             the matching scenarios); what they need is kept
  --repeat N boots each world N times (make racetest)
  --append W adds kernel command-line words to every test-kernel boot
  --list     print the plan and exit

Before anything runs it prints how many results the plan expects and writes the whole list to
<work>/plan.txt; it ends with a line per kernel line and "N passed, N failed" over the planned
results (plus any failure no plan could name: a job that exited non-zero with nothing failed,
a result nobody planned). Exits non-zero when anything failed.
"""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "runner"))

from execute import Runner  # noqa: E402
from plan import Context, make_plan, planned_name, select  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile", choices=["check", "full", "race", "stress", "soak"])
    ap.add_argument("--lines")
    ap.add_argument("--only", choices=["vm", "stock", "host"])
    ap.add_argument("-k", dest="patterns", action="append", default=[])
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--append", default="")
    ap.add_argument("--vm-timeout", type=int)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("NVPM_VM_JOBS") or os.cpu_count() or 2))
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()

    cache = Path(os.environ.get("NVPM_CACHE") or
                 Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nv_peer_mem-rs")
    work = Path(os.environ.get("NVPM_WORK") or cache / "work")
    lines = a.lines.split() if a.lines else None
    jobs = make_plan(a.profile, lines, a.repeat, a.append, a.vm_timeout)
    jobs = select(jobs, a.patterns, a.only)
    ctx = Context(jobs, cache, work)

    plan = [(j.name, planned_name(j, r)) for j in jobs for r in j.expected]
    logdir = work / "run"
    logdir.mkdir(parents=True, exist_ok=True)
    (logdir / "plan.txt").write_text("".join(f"{name}\t{job}\n" for job, name in plan))
    if a.list:
        for job, name in plan:
            print(f"{name}\t{job}")
        print(f"{len(plan)} results planned in {len(jobs)} jobs")
        return 0
    print(f"plan: {len(plan)} results in {len(jobs)} jobs ({logdir / 'plan.txt'}); "
          f"{a.jobs} VM slots", flush=True)

    start = time.monotonic()
    runner = Runner(jobs, ctx, a.jobs, logdir, echo=lambda s: print(s, flush=True))
    runner.run()
    results = runner.results()

    groups: dict[str, list[int]] = {}
    for r in results:
        print(f"{'PASS' if r.ok else 'FAIL'} {r.name}{'' if r.ok or not r.detail else ': ' + r.detail}")
        g = groups.setdefault(r.group, [0, 0])
        g[0 if r.ok else 1] += 1
    for g, (p, f) in groups.items():
        label = {"host": "host and packaging checks", "stock": "stock Debian 13 kernel",
                 "secureboot": "stock kernel under Secure Boot",
                 "upgrade": "upgrade from Mellanox's 1.3",
                 "conflict": "one peer client at a time (the service VM)",
                 "flavours": "stock cloud and rt flavours (and sid's release)"}.get(
            g, f"kernel {ctx.krel(g) if f'world:{g}' in ctx.jobs else g}")
        print(f"{label}: {p} passed, {f} failed")
    failed = [r.name for r in results if not r.ok]
    if failed:
        print("failed: " + " ".join(failed))
    print(f"run took {time.monotonic() - start:.0f} s; logs in {logdir}")
    passed = len(results) - len(failed)
    print(f"{passed} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
