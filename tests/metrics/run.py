#!/usr/bin/env python3
"""Checks `nv_peer_mem metrics` (scripts/nv_peer_mem-metrics) against fake roots: the doctor's
fixture trees (tests/doctor/mktree.py) and the cases of tests/metrics/cases/, which extend them
with counter files. promtool (Debian's `prometheus` package) judges the text format.

usage: tests/metrics/run.py
Prints "PASS metrics:<check>" or "FAIL metrics:<check>: <why>"; exits 1 when any failed.
"""
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOP = HERE.parent.parent
METRICS = TOP / "scripts/nv_peer_mem-metrics"
DOCTOR = TOP / "scripts/nv_peer_mem-doctor"
MKTREE = TOP / "tests/doctor/mktree.py"
LEVELS = {"OK": 0, "INFO": 1, "WARN": 2, "FAIL": 3}
# Trees the metrics are made from: ours, and two of the doctor's as they are.
CASES = {"counters": HERE / "cases/counters.json", "not-loaded": HERE / "cases/not-loaded.json",
         "odd-version": HERE / "cases/odd-version.json",
         "both-peer-modules": TOP / "tests/doctor/cases/both-peer-modules.json",
         "no-memory-peers": TOP / "tests/doctor/cases/no-memory-peers.json"}
# Planted faults promtool must reject, each appended to a good output: a label value without
# quotes (a parse error), a counter without _total and a metric without HELP (lint).
CANARIES = {
    "unquoted-label": "# HELP nv_peer_mem_planted planted\n# TYPE nv_peer_mem_planted gauge\n"
                      "nv_peer_mem_planted{client=nv_mem} 1\n",
    "counter-without-total": "# HELP nv_peer_mem_planted_bytes planted\n"
                             "# TYPE nv_peer_mem_planted_bytes counter\n"
                             "nv_peer_mem_planted_bytes 1\n",
    "no-help": "nv_peer_mem_planted 1\n",
}
failed = False


def result(name, why=None):
    global failed
    if why:
        failed = True
        print(f"FAIL metrics:{name}: {why}", flush=True)
    else:
        print(f"PASS metrics:{name}", flush=True)


def metrics(tree, *args):
    """(exit status, stdout, stderr) of nv_peer_mem-metrics on TREE."""
    p = subprocess.run([sys.executable, str(METRICS), "--root", str(tree), "--kernel-log",
                        str(tree / "kernel.log"), "--doctor", str(DOCTOR), *args],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def promtool(text):
    """None when `promtool check metrics` accepts TEXT, else what it said."""
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True)
    if p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip():
        return None
    said = (p.stdout + p.stderr).strip().replace("\n", " | ")
    return f"exit {p.returncode}: {said or 'nothing said'}"


def samples(text):
    """{'name{labels}': value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = value
    return out


def expect(got, want):
    """The first of WANT's samples that GOT lacks or has with another value, as a sentence."""
    for key, value in want.items():
        if got.get(key) != value:
            return f"{key} is {got.get(key, 'missing')}, expected {value}"
    return None


def main():
    if not shutil.which("promtool"):
        for name in ("promtool", "alert-rules", "canary:bad-rule", "values", "doctor-verdicts",
                     "conflict", "not-loaded",
                     "escaping", "no-doctor", "atomic-write", "unwritable",
                     *(f"canary:{c}" for c in CANARIES)):
            result(name, "promtool is missing (apt-get install prometheus; "
                   "tests/kernel/setup-host.sh installs it)")
        return 1
    work = Path(tempfile.mkdtemp(prefix="nvpm-metrics-"))
    try:
        run_checks(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def run_checks(work):
    outs, bad = {}, []
    for name, case in CASES.items():
        tree = work / name
        p = subprocess.run([sys.executable, str(MKTREE), str(case), str(tree)],
                           capture_output=True, text=True)
        if p.returncode:
            bad.append(f"{name}: mktree.py: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        rc, out, err = metrics(tree)
        outs[name] = (tree, out)
        why = f"exit {rc}: {err.strip()}" if rc or err else promtool(out)
        if why:
            bad.append(f"{name}: {why}")
    result("promtool", "; ".join(bad) if bad else None)

    if "counters" in outs:
        got = samples(outs["counters"][1])
        want = {"nv_peer_mem_loaded": "1", "nv_peer_mem_info{version=\"1.4.0\"}": "1",
                "nv_peer_mem_nvidia_peermem_loaded": "0",
                'nv_peer_mem_live_registrations{client="nv_mem"}': "3",
                'nv_peer_mem_pinned_bytes{client="nv_mem"}': "196608",
                'nv_peer_mem_registrations_total{client="nv_mem"}': "17",
                'nv_peer_mem_deregistrations_total{client="nv_mem"}': "14",
                'nv_peer_mem_invalidations_total{client="nv_mem"}': "2",
                'nv_peer_mem_not_mine_total{client="nv_mem"}': "40",
                'nv_peer_mem_live_registrations{client="nv_mem_nc"}': "1",
                'nv_peer_mem_pinned_bytes{client="nv_mem_nc"}': "65536"}
        for reason, value in (("nvidia_einval", 1), ("nvidia_enomem", 5), ("nvidia_eio", 0),
                              ("nvidia_eopnotsupp", 0), ("nvidia_other", 0),
                              ("freed_during_registration", 6), ("mapping", 7), ("alloc", 8),
                              ("refused_context", 9)):
            want[f'nv_peer_mem_errors_total{{client="nv_mem",reason="{reason}"}}'] = str(value)
        why = expect(got, want)
        # Every counter file of the tree is in the output once, and nothing else per client.
        files = sum(len(os.listdir(outs["counters"][0] / f"sys/module/nv_peer_mem/stats/{c}"))
                    for c in ("nv_mem", "nv_mem_nc"))
        per_client = [k for k in got if 'client="' in k]
        if not why and len(per_client) != files:
            why = f"{len(per_client)} per-client samples for {files} counter files"
        result("values", why)

        # The doctor's verdicts: each check's worst level, as the doctor's own --json says.
        tree = outs["counters"][0]
        p = subprocess.run([sys.executable, str(DOCTOR), "--json", "--root", str(tree),
                            "--kernel-log", str(tree / "kernel.log")], capture_output=True,
                           text=True)
        doc = json.loads(p.stdout)
        worst = {}
        for f in doc["findings"]:
            worst[f["check"]] = max(worst.get(f["check"], 0), LEVELS[f["level"]])
        want = {f'nv_peer_mem_doctor_check{{check="{c}"}}': str(v) for c, v in worst.items()}
        want["nv_peer_mem_doctor_up"] = "1"
        want["nv_peer_mem_doctor_gpudirect_rdma"] = "1" if doc["gpudirect_rdma"] else "0"
        for level in LEVELS:
            n = sum(1 for f in doc["findings"] if f["level"] == level)
            want[f'nv_peer_mem_doctor_findings{{level="{level}"}}'] = str(n)
        checks = [k for k in got if k.startswith("nv_peer_mem_doctor_check{")]
        why = expect(got, want)
        if not why and len(checks) != len(worst):
            why = f"{len(checks)} checks in the metrics, {len(worst)} in the doctor's JSON"
        result("doctor-verdicts", why)

    if "both-peer-modules" in outs:
        got = samples(outs["both-peer-modules"][1])
        result("conflict", expect(got, {
            "nv_peer_mem_loaded": "1", "nv_peer_mem_nvidia_peermem_loaded": "1",
            'nv_peer_mem_doctor_check{check="peer_modules.conflict"}': "3",
            "nv_peer_mem_doctor_gpudirect_rdma": "0"}))

    if "not-loaded" in outs:
        text = outs["not-loaded"][1]
        got = samples(text)
        why = expect(got, {"nv_peer_mem_loaded": "0",
                           'nv_peer_mem_doctor_check{check="nv_peer_mem.loaded"}': "2"})
        if not why and any("client=" in k or k.startswith("nv_peer_mem_info") for k in got):
            why = "samples of a module that is not loaded"
        if not why and "# TYPE nv_peer_mem_registrations_total counter" not in text:
            why = "the counter families lost their HELP and TYPE"
        result("not-loaded", why)

    if "odd-version" in outs:
        got = samples(outs["odd-version"][1])
        result("escaping", expect(got, {'nv_peer_mem_info{version="1.4.0\\"x\\\\y"}': "1"}))

    # The doctor cannot run: its metrics say so, the counters are still there, exit 0.
    if "counters" in outs:
        tree = outs["counters"][0]
        p = subprocess.run([sys.executable, str(METRICS), "--root", str(tree),
                            "--doctor", str(work / "no-such-doctor")], capture_output=True,
                           text=True)
        got = samples(p.stdout)
        why = f"exit {p.returncode}" if p.returncode else None
        why = why or expect(got, {"nv_peer_mem_doctor_up": "0", "nv_peer_mem_loaded": "1"})
        if not why and any(k.startswith("nv_peer_mem_doctor_check") for k in got):
            why = "verdicts without a doctor"
        if not why and not re.fullmatch(r"nv_peer_mem: metrics: cannot run .*no-such-doctor: "
                                        r"[^\n]*\(nv_peer_mem_doctor_up 0\)\n", p.stderr):
            why = f"stderr is not one line naming the doctor: {p.stderr!r}"
        result("no-doctor", why or promtool(p.stdout))

        atomic_write(work, tree, outs["counters"][1])

    alert_rules(work)
    good = outs.get("counters", (None, ""))[1]
    for name, planted in CANARIES.items():
        said = promtool(good + planted) if good else None
        result(f"canary:{name}", None if said else "promtool accepted the planted fault")


def check_rules(path):
    """None when `promtool check rules` accepts PATH, else what it said."""
    p = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True, text=True)
    if p.returncode == 0:
        return None
    return f"exit {p.returncode}: " + (p.stdout + p.stderr).strip().replace("\n", " | ")


def alert_rules(work):
    """The example alerting rules of Documentation/metrics.md pass `promtool check rules`; the
    same with a planted expression that does not parse must not."""
    doc = (TOP / "Documentation/metrics.md").read_text()
    m = re.search(r"^```yaml\n(.*?)^```", doc, re.M | re.S)
    if not m:
        result("alert-rules", "no ```yaml block in Documentation/metrics.md")
        return
    good, bad = work / "rules.yml", work / "planted-rules.yml"
    good.write_text(m.group(1))
    bad.write_text(m.group(1).replace("nv_peer_mem_doctor_check >= 3",
                                      "nv_peer_mem_doctor_check >=", 1))
    result("alert-rules", check_rules(good))
    result("canary:bad-rule", None if check_rules(bad) else "promtool accepted the planted rule")


def atomic_write(work, tree, printed):
    """--write FILE: the same text as printed, mode 0644, through a rename (a hard link to the
    old file keeps the old text), no temporary file left; a missing directory and a name
    without .prom are refused with one line."""
    d = work / "textfile"
    d.mkdir()
    target = d / "nv_peer_mem.prom"
    target.write_text("old\n")
    os.link(target, d / "old-link")
    os.umask(0o077)
    rc, out, err = metrics(tree, "--write", str(target))
    os.umask(0o022)
    left = sorted(n for n in os.listdir(d) if n not in ("nv_peer_mem.prom", "old-link"))
    mode = stat.S_IMODE(os.stat(target).st_mode)
    why = None
    if rc or out or err:
        why = f"exit {rc}, printed {out[:80]!r}, said {err.strip()!r}"
    elif target.read_text() != printed:
        why = "the file differs from what the command prints"
    elif (d / "old-link").read_text() != "old\n":
        why = "the old file was rewritten in place, not replaced by a rename"
    elif mode != 0o644:
        why = f"mode {mode:o}, expected 644 (node_exporter runs as another user)"
    elif left:
        why = f"left behind: {left}"
    result("atomic-write", why)

    rc, out, err = metrics(tree, "--write", str(work / "no-such-dir/nv_peer_mem.prom"))
    why = None
    if rc != 1 or out or len(err.splitlines()) != 1 or "does not exist" not in err:
        why = f"missing directory: exit {rc}, said {err.strip()!r}"
    if not why:
        rc, out, err = metrics(tree, "--write", str(d / "nv_peer_mem.txt"))
        if rc != 2 or "only files named *.prom" not in err:
            why = f"a name without .prom: exit {rc}, said {err.strip()[-120:]!r}"
    result("unwritable", why)


if __name__ == "__main__":
    sys.exit(main())
