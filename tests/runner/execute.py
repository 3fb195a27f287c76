"""Run the plan's jobs and account for every planned result.

Jobs start when their dependencies have finished; VM jobs share a number of slots (one TCG
machine keeps about one host core busy) and start largest first. A job's output is read for
"PASS name" / "FAIL name: detail" lines (the leaf scripts' one result dialect) and "WORLD
key=value" lines. When every job is done, each planned result is judged: reported, or a FAIL
that names the job that owed it, how that job ended and its last lines.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from plan import Context, Job

RESULT = re.compile(r"^(PASS|FAIL) (\S+?)(?::? (.*))?$")


@dataclass
class Result:
    name: str
    ok: bool
    detail: str
    job: str
    group: str


class Slots:
    """VM slots: a waiting job of higher cost is served first."""

    def __init__(self, n: int):
        self.free = n
        self.waiting: list[tuple[float, int]] = []
        self.cv = threading.Condition()
        self.seq = 0

    def acquire(self, cost: float) -> None:
        with self.cv:
            self.seq += 1
            me = (-cost, self.seq)
            self.waiting.append(me)
            while not (self.free > 0 and min(self.waiting) == me):
                self.cv.wait()
            self.waiting.remove(me)
            self.free -= 1
            self.cv.notify_all()

    def release(self) -> None:
        with self.cv:
            self.free += 1
            self.cv.notify_all()


def tail(path: Path | None, n: int = 8) -> list[str]:
    if not path or not path.exists():
        return []
    lines = [l.rstrip() for l in path.read_text(errors="replace").splitlines() if l.strip()]
    return lines[-n:]


class Runner:
    def __init__(self, jobs: list[Job], ctx: Context, slots: int, logdir: Path, echo=print):
        self.jobs = jobs
        self.ctx = ctx
        self.slots = Slots(slots)
        self.logdir = logdir
        self.done = {j.name: threading.Event() for j in jobs}
        self.echo = echo
        self.lock = threading.Lock()

    def log_of(self, job: Job) -> Path:
        return self.logdir / (re.sub(r"[^A-Za-z0-9_.-]", "_", job.name) + ".log")

    def run_job(self, job: Job) -> None:
        try:
            for d in job.deps + [a for a in job.after if a in self.done]:
                self.done[d].wait()
            # A dependency that did not run, or a world that did not build, stops the job; other
            # dependencies that reported failures leave what it needs behind.
            bad = [d for d in job.deps if self.ctx.jobs[d].skipped
                   or (d.startswith("world:") and self.ctx.jobs[d].rc != 0)]
            if bad:
                dep = self.ctx.jobs[bad[0]]
                job.skipped = f"not run: {dep.name} " + (dep.skipped or f"exited {dep.rc}")
                return
            if job.vm:
                self.slots.acquire(job.cost)
            try:
                self.execute(job)
            finally:
                if job.vm:
                    self.slots.release()
        except Exception as e:  # a bug of the runner's own is that job's failure, not a hang
            job.skipped = f"the runner failed to run it: {e!r}"
        finally:
            self.done[job.name].set()

    def execute(self, job: Job) -> None:
        argv = job.argv(self.ctx)
        log = self.log_of(job)
        env = {**os.environ, **job.env}
        start = time.monotonic()
        with open(log, "w") as f:
            f.write("+ " + " ".join(argv) + "\n")
            f.flush()
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=f, stdin=subprocess.DEVNULL, text=True,
                                 errors="replace", env=env, start_new_session=True)
            timer = threading.Timer(job.timeout, lambda: os.killpg(p.pid, signal.SIGKILL))
            timer.start()
            for line in p.stdout:
                f.write(line)
                line = line.rstrip("\n")
                job.output.append(line)
                m = re.match(r"^WORLD (\w+)=(.*)$", line)
                if m:
                    job.vars[m.group(1)] = m.group(2)
            job.rc = p.wait()
            timer.cancel()
            f.write(f"+ exit {job.rc} after {time.monotonic() - start:.0f} s\n")
        with self.lock:
            self.echo(f"[run] {job.name}: exit {job.rc} after {time.monotonic() - start:.0f} s")

    def run(self) -> None:
        threads = [threading.Thread(target=self.run_job, args=(j,), daemon=True) for j in self.jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def results(self) -> list[Result]:
        """Every planned result, judged; then every unplanned one, as a failure."""
        out: list[Result] = []
        for job in self.jobs:
            prefix = job.prefix(self.ctx)
            reported: dict[str, Result] = {}
            extra: list[Result] = []
            for line in job.output:
                m = RESULT.match(line)
                if not m:
                    continue
                name = m.group(2)
                if name.startswith(prefix):  # a job that names its results in full already
                    name = name[len(prefix):]
                r = Result(prefix + name, m.group(1) == "PASS", (m.group(3) or "").strip(), job.name, job.group)
                if name in job.expected:
                    if name not in reported or not r.ok:  # a FAIL of the same name wins
                        reported[name] = r
                else:
                    extra.append(r)
            for name in job.expected:
                if name in reported:
                    out.append(reported[name])
                    continue
                if job.skipped:
                    why = f"never reported: job {job.name} {job.skipped}"
                else:
                    why = f"never reported by job {job.name} (exit {job.rc})"
                    last = tail(job.console(self.ctx), 5) if job.console(self.ctx) else []
                    last = last or tail(self.log_of(job), 5)
                    if last:
                        why += "; its last lines: " + " | ".join(last)
                out.append(Result(prefix + name, False, why, job.name, job.group))
            for r in extra:
                out.append(Result(r.name, False, f"not in the plan (reported by job {job.name}"
                                  f"{': ' + r.detail if r.detail else ''})", job.name, job.group))
            # A job that failed without a failed result to show for it fails as itself.
            if job.rc not in (0, None) and job.expected and all(r.ok for r in out if r.job == job.name):
                out.append(Result(f"{prefix}{job.name}", False,
                                  f"exited {job.rc} though every result it reported passed; see "
                                  f"{self.log_of(job)}", job.name, job.group))
        return out
