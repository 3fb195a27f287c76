#!/usr/bin/env python3
"""The design's diagrams, checked against the code and rendered (issue 35).

Documentation/diagrams/*.dot are the sources; graphviz renders them. Checks:
  diagrams:lifecycle    every variant of `enum Phase` (src/registration.rs) is a node of
                        lifecycle.dot, and every node is a variant;
  diagrams:reg-mr-path  every call written `name()` in reg-mr-path.dot is named in src/;
  diagrams:rendered     graphviz renders every source (into OUTDIR when given).
--self-test plants a new Phase variant and a call src/ does not make, each in a copy, and
prints diagrams-canary: PASS when both checks catch their plant.
usage: diagrams.py [--render OUTDIR] [--self-test]
"""
import argparse
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

TOP = pathlib.Path(__file__).resolve().parents[2]
DIAGRAMS = "Documentation/diagrams"


def phase_variants(top):
    """The variants of `enum Phase`, in order."""
    text = (top / "src/registration.rs").read_text()
    m = re.search(r"pub\(crate\) enum Phase \{\n(.*?)\n\}", text, re.S)
    if not m:
        return None
    return re.findall(r"^    ([A-Z][A-Za-z0-9]*)\b", m.group(1), re.M)


def dot_nodes(path):
    """Names of the nodes a .dot file declares (`Name [label=...]`)."""
    text = re.sub(r"//[^\n]*", "", path.read_text())
    return re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\[label=", text, re.M)


def check_lifecycle(top):
    variants = phase_variants(top)
    if not variants:
        return "no `pub(crate) enum Phase` in src/registration.rs"
    nodes = dot_nodes(top / DIAGRAMS / "lifecycle.dot")
    missing = [v for v in variants if v not in nodes]
    stale = [n for n in nodes if n not in variants]
    if missing or stale:
        return ("lifecycle.dot " + "; ".join(
            x for x in ((f"lacks Phase::{', Phase::'.join(missing)}" if missing else ""),
                        (f"has nodes that are no variant: {', '.join(stale)}" if stale else ""))
            if x))
    return None


def src_names(top):
    names = set()
    for f in sorted((top / "src").rglob("*")):
        if f.suffix in (".rs", ".c"):
            names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", f.read_text()))
    return names


def check_path(top):
    text = re.sub(r"//[^\n]*", "", (top / DIAGRAMS / "reg-mr-path.dot").read_text())
    calls = sorted(set(re.findall(r"([a-z_][a-z0-9_]*)\(\)", text)))
    if not calls:
        return "reg-mr-path.dot names no call"
    known = src_names(top)
    gone = [c for c in calls if c not in known]
    if gone:
        return f"reg-mr-path.dot names calls src/ does not: {', '.join(gone)}"
    return None


def render(top, outdir):
    dot = shutil.which("dot")
    if not dot:
        return "graphviz's dot is not installed (tests/kernel/setup-host.sh installs graphviz)"
    for src in sorted((top / DIAGRAMS).glob("*.dot")):
        out = pathlib.Path(outdir) / (src.stem + ".svg")
        r = subprocess.run([dot, "-Tsvg", str(src), "-o", str(out)], capture_output=True, text=True)
        if r.returncode != 0 or not out.is_file() or "<svg" not in out.read_text():
            return f"dot failed on {src.name}: {r.stderr.strip()[:200]}"
    return None


def report(name, err):
    print(f"FAIL {name}: {err}" if err else f"PASS {name}")
    return err is None


def self_test():
    """Each check must fail on its plant, and pass on the unplanted copy."""
    with tempfile.TemporaryDirectory() as d:
        copy = pathlib.Path(d)
        shutil.copytree(TOP / "src", copy / "src")
        shutil.copytree(TOP / DIAGRAMS, copy / DIAGRAMS)
        if check_lifecycle(copy) or check_path(copy):
            return "the unplanted copy fails"
        reg = copy / "src/registration.rs"
        reg.write_text(reg.read_text().replace(
            "pub(crate) enum Phase {\n", "pub(crate) enum Phase {\n    Planted,\n", 1))
        if not check_lifecycle(copy):
            return "a new Phase variant missing from lifecycle.dot passed"
        path = copy / DIAGRAMS / "reg-mr-path.dot"
        path.write_text(path.read_text().replace(
            "nvidia_p2p_dma_map_pages()", "nvidia_p2p_planted_call()", 1))
        if not check_path(copy):
            return "a call src/ does not make, in reg-mr-path.dot, passed"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", metavar="OUTDIR")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return 0 if report("diagrams-canary", self_test()) else 1
    ok = report("diagrams:lifecycle", check_lifecycle(TOP))
    ok &= report("diagrams:reg-mr-path", check_path(TOP))
    if a.render:
        pathlib.Path(a.render).mkdir(parents=True, exist_ok=True)
        ok &= report("diagrams:rendered", render(TOP, a.render))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
