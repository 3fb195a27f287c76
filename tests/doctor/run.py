#!/usr/bin/env python3
"""Runs nv_peer_mem-doctor against the fake roots described in cases/*.json and compares its
findings with cases/<name>.expected and its exit status with the case's "exit".

usage: tests/doctor/run.py [CASE...]     (default: every case, and doctor:json-keys)
  PYTHON=python3.6 ...  runs the doctor with another interpreter
  UPDATE=1 ...          rewrites the .expected files from the doctor's output (review them!)
Prints "PASS doctor:<case>" or "FAIL doctor:<case>: <why>" per case; exits 1 when any failed.
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCTOR = HERE.parent.parent / "scripts/nv_peer_mem-doctor"
PYTHON = os.environ.get("PYTHON", "python3")
failed = False


def fail(case, why):
    global failed
    failed = True
    print(f"FAIL doctor:{case}: {why}", flush=True)


def make_tree(json_path, tree):
    """The fake root of a case (mktree.py); None, or the last line of its complaint."""
    p = subprocess.run([sys.executable, str(HERE / "mktree.py"), str(json_path), str(tree)],
                       capture_output=True, text=True)
    if p.returncode:
        return (p.stderr.strip().splitlines() or ["failed"])[-1]
    return None


def doctor(tree, *args):
    """(exit status, output: stdout and stderr) of the doctor on TREE."""
    p = subprocess.run([PYTHON, str(DOCTOR), *args, "--root", str(tree), "--kernel-log",
                        str(tree / "kernel.log")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def run_case(name, work):
    case, expected = HERE / f"cases/{name}.json", HERE / f"cases/{name}.expected"
    tree = work / name
    why = make_tree(case, tree)
    if why:
        return fail(name, f"mktree.py: {why}")
    want = json.loads(case.read_text())["exit"]
    got, out = doctor(tree)
    if os.environ.get("UPDATE") == "1":
        expected.write_text(out)
    if not expected.exists():
        return fail(name, f"no {name}.expected")
    exp_lines, out_lines = expected.read_text().splitlines(), out.splitlines()
    if exp_lines != out_lines or expected.read_text() != out:
        i = next((i for i, (a, b) in enumerate(zip(exp_lines, out_lines)) if a != b),
                 min(len(exp_lines), len(out_lines)))
        line = lambda ls: ls[i] if i < len(ls) else ""  # noqa: E731
        return fail(name, f"line {i + 1}: expected '{line(exp_lines)}', got '{line(out_lines)}'")
    if got != want:
        return fail(name, f"exit status {got}, expected {want}")
    print(f"PASS doctor:{name}", flush=True)


def json_keys(work):
    """The --json output of the good-pix tree parses, has every key, and agrees with the text
    output."""
    tree = work / "json-keys"
    if make_tree(HERE / "cases/good-pix.json", tree):
        return fail("json-keys", "mktree.py failed")
    status, out = doctor(tree, "--json")
    lines = doctor(tree)[1].splitlines()
    try:
        doc = json.loads(out)
        assert set(doc) == {"gpudirect_rdma", "findings", "pairs"}, sorted(doc)
        assert doc["gpudirect_rdma"] is (status == 0), "gpudirect_rdma vs exit status"
        assert len(doc["findings"]) == len(lines), \
            f"{len(doc['findings'])} findings, {len(lines)} text lines"
        for f, line in zip(doc["findings"], lines):
            assert set(f) == {"level", "check", "subject", "message", "fix"}, sorted(f)
            assert line.startswith(f"{f['level']} {f['check']}: {f['message']}"), line
        assert doc["pairs"] and all(set(p) == {"gpu", "nic", "nic_name", "relation"}
                                    for p in doc["pairs"])
        assert [p["relation"] for p in doc["pairs"]] == ["PIX", "PIX"], doc["pairs"]
    except (AssertionError, ValueError) as e:
        return fail("json-keys", str(e) or type(e).__name__)
    print("PASS doctor:json-keys", flush=True)


def main():
    names = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if not names:
            names = sorted(p.stem for p in (HERE / "cases").glob("*.json"))
            json_keys(work)
        for name in names:
            run_case(name, work)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
