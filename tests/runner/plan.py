"""The declared plan: tests/plan.toml expanded into jobs, each with the results it owes.

Nothing here runs anything. `make_plan()` returns the jobs of a profile in the order they are
listed; every job knows its command (a function of what its dependencies produced), its
dependencies, whether it takes a VM slot, and the names of the results it must report.
"""
from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

TESTS = Path(__file__).resolve().parent.parent
TOP = TESTS.parent


@dataclass
class Job:
    """One command the runner starts, and what it owes."""

    name: str
    # The command, built when the job starts: ctx maps a dependency's name to its Job.
    argv: Callable[["Context"], list[str]]
    group: str  # what the closing per-group line counts it under: a kernel line, "stock", "host"
    expected: list[str]  # result names, relative to the prefix
    prefix: Callable[["Context"], str] = lambda ctx: ""
    deps: list[str] = field(default_factory=list)
    # Jobs this one starts after when they are in the run (apt and dpkg take one at a time).
    after: list[str] = field(default_factory=list)
    vm: bool = False  # takes one of the VM slots
    cost: float = 1.0  # jobs waiting for a slot start largest first
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 4 * 3600.0
    # Where the job's own log is (a VM's console), for a missing result's detail.
    console: Callable[["Context"], Path | None] = lambda ctx: None
    # filled in by the run
    rc: int | None = None
    skipped: str = ""  # why it did not run
    output: list[str] = field(default_factory=list)
    vars: dict[str, str] = field(default_factory=dict)  # "WORLD key=value" lines


class Context:
    """What the jobs of one run share: the jobs by name, the cache and work directories."""

    def __init__(self, jobs: list[Job], cache: Path, work: Path):
        self.jobs = {j.name: j for j in jobs}
        self.cache = cache
        self.work = work

    def world(self, line: str) -> dict[str, str]:
        return self.jobs[f"world:{line}"].vars

    def krel(self, line: str) -> str:
        return self.world(line).get("krel", line)


def load(path: Path = TESTS / "plan.toml") -> dict:
    with open(path, "rb") as f:
        return tomllib.load(f)


def scenario_names() -> list[str]:
    return sorted({p.stem for p in (TESTS / "scenarios").glob("*.sh")} |
                  {p.stem for p in (TESTS / "scenarios").glob("*.py")})


def expand(spec: list[str], data: dict) -> list[str]:
    """A boot's scenario list: names, "@set" (every scenario of a set) and "-name" removals."""
    special = set(data.get("alone", {})) | set(data.get("switched", {}))
    sets = dict(data.get("sets", {}))
    sets["ordinary"] = [s for s in scenario_names() if s not in special]
    out: list[str] = []
    for item in spec:
        if item.startswith("@"):
            for s in expand(sets[item[1:]], data):
                if s not in out:
                    out.append(s)
        elif item.startswith("-"):
            out = [s for s in out if s != item[1:]]
        elif item not in out:
            out.append(item)
    return out


def boot_tag(boot: dict, data: dict) -> tuple[str, str]:
    """(tag, machine) of a boot: tag is the world, with :switch for the doctor's machine and
    :<suffix> (stress, sweep) for a scenario booted alone."""
    sc = boot["scenarios"]
    world = boot["world"]
    if len(sc) == 1 and sc[0] in data.get("switched", {}):
        return f"{world}:switch", data["switched"][sc[0]]
    if len(sc) == 1 and sc[0] in data.get("alone", {}):
        return f"{world}:{sc[0].split('-', 1)[1]}", data["alone"][sc[0]]
    return world, boot.get("machine", "flat")


def _deb(ctx: Context, name: str) -> str:
    debs = sorted((ctx.cache / "packages" / "deb").glob(f"{name}_*_all.deb"))
    return str(debs[-1]) if debs else f"{ctx.cache}/packages/deb/no-{name}-deb"


def make_plan(profile: str, lines: list[str] | None = None, repeat: int | None = None,
              append: str = "", vm_timeout: int | None = None) -> list[Job]:
    data = load()
    prof = data["profile"][profile]
    lines = lines or prof["lines"]
    repeat = repeat or prof.get("repeat", 1)
    vm_only = prof.get("vm_only", False)
    append = " ".join(x for x in (prof.get("append", ""), append) if x)
    first = lines[0]
    jobs: list[Job] = []
    bash = ["bash"]

    def vm_env() -> dict[str, str]:
        env = {}
        t = vm_timeout or prof.get("timeout")
        if t:
            env["NVPM_VM_TIMEOUT"] = str(t)
        return env

    if not vm_only:
        jobs.append(Job("packages", lambda ctx: [str(TESTS / "packaging/build-packages.sh"),
                                                 str(ctx.cache / "packages")],
                        "host", data["jobs"]["packages"]["results"]))
        jobs.append(Job("systemd-verify", lambda ctx: [str(TESTS / "packaging/systemd-verify.sh")],
                        "host", data["jobs"]["systemd-verify"]["results"]))
    # The host's tools and the private package lists, once, before anything that needs them.
    jobs.append(Job("setup", lambda ctx: bash + ["-c", '. "$1/kernel/env.sh" && "$1/kernel/setup-host.sh" '
                                                  '&& { refresh_lists || say "cannot refresh the Debian '
                                                  'package lists; the cached ones are used"; }', "setup",
                                                  str(TESTS)],
                    "host", [], after=["packages"]))
    if not vm_only:
        jobs.append(Job("stock", lambda ctx: [str(TESTS / "stock/stock-world.sh"), str(ctx.cache / "packages")],
                        "stock", data["jobs"]["stock"]["results"], deps=["setup", "packages"]))
        jobs.append(Job("secureboot", lambda ctx: [str(TESTS / "secureboot/secureboot-world.sh"),
                                                   str(ctx.cache / "packages")],
                        "secureboot", data["jobs"]["secureboot"]["results"], deps=["setup", "packages"]))
        jobs.append(Job("upgrade", lambda ctx: [str(TESTS / "upgrade/upgrade-world.sh"),
                                                str(ctx.cache / "packages")],
                        "upgrade", data["jobs"]["upgrade"]["results"], deps=["setup", "packages"]))
        # The cloud and rt flavours; make fullcheck adds the rt boot's stress and the newest 7.x
        # of sid (releases:*).
        full = profile == "full"
        fl = data["jobs"]["flavours"]
        jobs.append(Job("flavours", lambda ctx, full=full: [
            str(TESTS / "flavours/flavours-world.sh"), *(["--full"] if full else []),
            str(ctx.cache / "packages")],
            "flavours", fl["results"] + (fl["full"] if full else []), deps=["setup", "packages"]))
    prev_world = "setup"
    for line in lines:
        def kp(ctx, line=line):
            return ctx.krel(line) + ":"
        jobs.append(Job(f"world:{line}", lambda ctx: [str(TESTS / "vm/world.sh")], line,
                        data["line_jobs"]["world"], prefix=kp, deps=[prev_world],
                        env={"KLINE": line}, cost=0))
        prev_world = f"world:{line}"
        boots = [b for b in prof["boot"] if b["line"] == line]
        sweep_boot = None
        for b in boots:
            scen = expand(b["scenarios"], data)
            if not scen:
                continue
            tag, machine = boot_tag(b, data)
            world = b["world"]
            for rep in range(1, repeat + 1):
                t = tag if repeat == 1 else f"{tag}:run{rep}"
                d = "vm-" + t.replace(":", "-")
                app = f"nvpm.nvidia={world.split(':')[0]} nvpm.ibcore={world.split(':')[1]}"
                if append:
                    app += " " + append

                def argv(ctx, line=line, d=d, scen=scen):
                    w = ctx.world(line)
                    return [str(TESTS / "vm/run-vm.sh"), w["kbuild"], w["initrd"], f"{w['work']}/{d}", *scen]
                env = {"NVPM_VM_TOPOLOGY": machine, "NVPM_VM_APPEND": app, **vm_env()}
                kunit = data.get("kunit", {})
                suites = ([f"kunit:{x}" for x in kunit.get("suites", [])]
                          if kunit.get("scenario") in scen and line in kunit.get("lines", []) else [])
                job = Job(f"boot:{line}:{t}", argv, line, ["boot", *scen, "kmemleak", *suites],
                          prefix=lambda ctx, line=line, t=t: f"{ctx.krel(line)}:{t}:",
                          deps=[f"world:{line}"], vm=True, cost=10 + 3 * len(scen), env=env,
                          console=lambda ctx, line=line, d=d: Path(ctx.world(line)["work"]) / d / "console.log")
                if "30-sweep" in scen:
                    job.cost += 200
                    sweep_boot = job
                if "29-stress" in scen:
                    job.cost += 40
                jobs.append(job)
        if vm_only:
            if prof.get("report"):
                jobs.append(testing_report(line, prof, jobs, repeat))
            continue
        if sweep_boot is not None:
            jobs.append(Job(f"sweep-report:{line}", lambda ctx, line=line, sb=sweep_boot.name: [
                "python3", str(TESTS / "sweep/report.py"), ctx.world(line)["build_dir"] + "/sweep-sites.txt",
                str(ctx.jobs[sb].console(ctx))], line, data["line_jobs"]["sweep-report"], prefix=kp,
                deps=[sweep_boot.name]))
        jobs.append(Job(f"line-checks:{line}", lambda ctx: [str(TESTS / "line-checks.sh")], line,
                        data["line_jobs"]["line-checks"], prefix=kp, deps=[f"world:{line}"],
                        env={"KLINE": line}))
        jobs.append(Job(f"dkms:{line}", lambda ctx, line=line: [
            str(TESTS / "packaging/dkms.sh"), _deb(ctx, "nvidia-peer-memory-dkms"), ctx.world(line)["kbuild"],
            ctx.world(line)["work"] + "/dkms", ctx.world(line)["build_dir"] + "/ib_core/Module.symvers",
            ctx.world(line)["build_dir"] + "/nvidia/Module.symvers"], line, data["line_jobs"]["dkms"],
            prefix=lambda ctx, line=line: f"dkms:{ctx.krel(line)}:", deps=[f"world:{line}", "packages"]))
        if line == first or profile == "full":
            svc = ["boot", *sorted(p.stem for p in (TOP / data["line_jobs"]["service"]).glob("*.[sp][hy]")), "kmemleak"]
            jobs.append(Job(f"service:{line}", lambda ctx, line=line: [
                str(TESTS / "packaging/service-vm.sh"), ctx.world(line)["kbuild"], ctx.world(line)["work"],
                _deb(ctx, "nvidia-peer-memory"),
                f"{ctx.world(line)['work']}/dkms/lib-modules/{ctx.krel(line)}/updates/dkms/nv_peer_mem.ko",
                ctx.world(line)["build_dir"]], line, svc,
                prefix=lambda ctx, line=line: f"{ctx.krel(line)}:service:", deps=[f"dkms:{line}"], vm=True,
                cost=12, console=lambda ctx, line=line: Path(ctx.world(line)["work"]) / "vm-service/console.log"))
        if line == first:
            # The packaged service's boot again with tests/conflict/*.py: NVIDIA's nvidia_peermem
            # loaded before and after nv_peer_mem (names conflict:<scenario>, the first line only).
            conf_dir = TOP / data["line_jobs"]["conflict"]
            conf = ["boot", *sorted(p.stem for p in conf_dir.glob("*.py")), "kmemleak"]

            def conflict_argv(ctx, line=line):
                w = ctx.world(line)
                ko = f"{w['work']}/dkms/lib-modules/{ctx.krel(line)}/updates/dkms/nv_peer_mem.ko"
                return [str(TESTS / "packaging/service-vm.sh"), w["kbuild"], w["work"],
                        _deb(ctx, "nvidia-peer-memory"), ko, w["build_dir"], "conflict"]
            jobs.append(Job(f"conflict:{line}", conflict_argv, "conflict", conf,
                            prefix=lambda ctx: "conflict:", deps=[f"dkms:{line}"], vm=True, cost=8,
                            console=lambda ctx, line=line: (
                                Path(ctx.world(line)["work"]) / "vm-conflict/console.log")))
            can = data["canaries"]
            names = [f"canary:{n}:{s}" for n in can["boots"] for s in ("boot", "kmemleak")]
            names += [f"canary:{h}" for h in can["hosts"]]
            jobs.append(Job(f"canaries:{line}", lambda ctx, line=line: [
                str(TESTS / "canaries/canary-vm.sh"), ctx.world(line)["kbuild"], ctx.world(line)["initrd"],
                ctx.world(line)["work"], "nvpm.nvidia=r580 nvpm.ibcore=24.x"], line, names, prefix=kp,
                deps=[f"world:{line}"], vm=True, cost=90))
    if not vm_only:
        last = lines[-1]
        jobs.append(Job("host-checks", lambda ctx: [str(TESTS / "host-checks.sh")], "host",
                        data["jobs"]["host-checks"]["results"], deps=[f"world:{last}"], env={"KLINE": last}))
        cases = sorted(p.stem for p in (TOP / data["jobs"]["doctor"]["cases"]).glob("*.json"))
        jobs.append(Job("doctor", lambda ctx: [str(TESTS / "doctor/run.py")], "host",
                        [f"doctor:{c}" for c in cases] + data["jobs"]["doctor"]["results"]))
        jobs.append(Job("metrics", lambda ctx: [str(TESTS / "metrics/run.py")], "host",
                        data["jobs"]["metrics"]["results"], after=["setup"]))
        jobs.append(Job("deb-lifecycle", lambda ctx: [str(TESTS / "packaging/deb-lifecycle.sh"),
                                                      str(ctx.cache / "packages")],
                        "host", data["jobs"]["deb-lifecycle"]["results"], deps=["packages"]))
        jobs.append(Job("harness-selftest", lambda ctx: ["python3", str(TESTS / "runner/selftest.py")], "host",
                        data["jobs"]["harness-selftest"]["results"]))
    return jobs


def testing_report(line: str, prof: dict, jobs: list[Job], repeat: int) -> Job:
    """make stress / make soak: their figures go to Documentation/testing.md, with the command."""
    boots = [j for j in jobs if j.name.startswith(f"boot:{line}:")]
    command = prof["report"]

    def argv(ctx):
        return ["env", f"NVPM_SWEEP_SITES={ctx.world(line)['build_dir']}/sweep-sites.txt", "python3",
                str(TESTS / "testing-report.py"), os.environ.get("NVPM_TESTING_REPORT", command),
                str(TOP / "Documentation/testing.md"), *(str(b.console(ctx)) for b in boots)]
    return Job(f"testing-report:{line}", argv, line, [], deps=[b.name for b in boots])


def planned_name(j: Job, r: str) -> str:
    """A result's name in the plan's listing (before the kernel's release is known): a boot's
    <line>:<tag>:<result>, a line's other jobs' <line>:<result>, the rest as they report it."""
    if j.name.startswith("boot:"):
        return f"{j.group}:{j.name.split(':', 2)[-1]}:{r}"
    return r if j.group in ("host", "stock", "secureboot", "upgrade", "flavours") else f"{j.group}:{r}"


def select(jobs: list[Job], patterns: list[str], only: str | None) -> list[Job]:
    """The plan filtered: jobs of one kind (--only vm|stock|host), results whose names match one
    of the glob patterns (-k; a boot keeps the matching scenarios). What a kept job needs is kept."""
    keep: dict[str, Job] = {}
    kunit_scenario = load().get("kunit", {}).get("scenario")
    for j in jobs:
        kind = ("vm" if j.vm or j.name.startswith(("world:", "setup", "sweep-report", "testing-report"))
                else "stock" if j.name in ("stock", "secureboot", "upgrade", "flavours", "packages", "setup")
                else "host")
        if only and only != kind and not (only == "stock" and j.name in ("packages", "setup")):
            continue
        if patterns:
            full = [planned_name(j, r) for r in j.expected]
            hit = [r for r, f in zip(j.expected, full) if any(fnmatch.fnmatch(f, p) for p in patterns)]
            if not hit:
                continue
            if j.name.startswith("boot:"):
                ran = [r for r in j.expected if r not in ("boot", "kmemleak") and not r.startswith("kunit:")]
                scen = [r for r in hit if r in ran]
                if not scen:
                    continue
                old = j.argv
                j.argv = lambda ctx, old=old, n_old=len(ran), scen=scen: old(ctx)[:-n_old] + scen
                suites = ([r for r in j.expected if r.startswith("kunit:")]
                          if kunit_scenario in scen else [])
                j.expected = ["boot", *scen, "kmemleak", *suites]
        keep[j.name] = j
    changed = True
    while changed:
        changed = False
        for j in list(keep.values()):
            for d in j.deps:
                if d not in keep:
                    dep = next(x for x in jobs if x.name == d)
                    keep[d] = dep
                    changed = True
    return [j for j in jobs if j.name in keep]
