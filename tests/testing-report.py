#!/usr/bin/env python3
"""Rewrite the figures in Documentation/testing.md from VM console logs.

usage: testing-report.py COMMAND DOC CONSOLE-LOG...

COMMAND is the command that produced the logs (printed with the figures). From each log that
ran scenario 29 it takes the "stress: ..." lines (one block per world: a run of some worlds
keeps the blocks of the others); from each that ran scenario 28, the table
and its "bad inputs: N tried, N as expected" line; from each that ran the soak, its "soak: ..."
line; and when NVPM_SWEEP_SITES names the module's site list (tests/sweep/sites.py), the sweep's
report (scenario 30). The kernel and world of each log come from its VM-READY line. A section
whose scenario ran in none of the logs is left as it is.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep"))
import report as sweep_report  # noqa: E402

READY = re.compile(r"VM-READY kernel (\S+) nvidia (\S+) ib_core (\S+)")


def judged(path, name):
    """The judge's verdict on a scenario (vm/parse-log.py: exit code, "not ok" lines, kernel
    reports, hazards), not the scenario's exit code alone."""
    judge = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vm", "parse-log.py")
    out = subprocess.run([sys.executable, judge, path, name], capture_output=True, text=True).stdout
    return re.search(r"^PASS %s$" % re.escape(name), out, re.M) is not None


def block(text, name, path):
    """The scenario's lines and 0 when the judge passed it (1 otherwise)."""
    m = re.search(r"^=== BEGIN %s\r?$(.*?)^=== END %s rc=(\d+)" % (name, name), text, re.M | re.S)
    return (m.group(1), 0 if judged(path, name) else 1) if m else (None, None)


def stress_rows(body):
    rows = []
    for line in body.splitlines():
        if line.startswith("stress: kernel log lines:"):
            rows.append(("kernel", {}, "log lines " + line.split(":")[-1].strip()))
            continue
        m = re.match(r"stress: (\S+): (.*)", line.strip())
        if not m:
            continue
        race, rest = m.groups()
        kv = dict(re.findall(r"(\S+?)=(\S+)", rest))
        rows.append((race, kv, rest))
    return rows


def replace(doc, tag, text):
    begin, end = "<!-- %s:begin -->" % tag, "<!-- %s:end -->" % tag
    i, j = doc.index(begin) + len(begin), doc.index(end)
    return doc[:i] + "\n" + text.rstrip() + "\n" + doc[j:]


def section(doc, tag):
    begin, end = "<!-- %s:begin -->" % tag, "<!-- %s:end -->" % tag
    return doc[doc.index(begin) + len(begin):doc.index(end)]


def merge_worlds(old, new):
    """The section's blocks, one per world (from a line "**WORLD** ..." to the next): those of
    the worlds in NEW, a list of (world, text), replace the old ones in place or come last; the
    others stay as they were, with the command and date that produced them."""
    blocks, text = [], None
    for line in old.strip().splitlines():
        m = re.match(r"\*\*(.+?)\*\*", line)
        if m:
            text = [line]
            blocks.append([m.group(1), text])
        elif text is not None:
            text.append(line)
    fresh = dict(new)
    out = []
    for world, lines in blocks:
        out.append(fresh.pop(world) if world in fresh else "\n".join(lines).rstrip() + "\n")
    out += [text for world, text in new if world in fresh]
    return "\n".join(out)


def main():
    command, doc_path, logs = sys.argv[1], sys.argv[2], sys.argv[3:]
    stress, bad, soak, swept = [], [], [], []
    for path in logs:
        text = open(path, errors="replace").read()
        ready = READY.search(text)
        world = "kernel %s, nvidia %s x ib_core %s" % ready.groups() if ready else path
        body, rc = block(text, "29-stress", path)
        if body is not None:
            stress.append((world, rc, stress_rows(body)))
        body, rc = block(text, "soak-vm", path)
        if body is not None:
            line = [l.strip() for l in body.splitlines() if l.startswith("soak: ")]
            soak.append((world, rc, line[0] if line else "soak: did not finish"))
        body, rc = block(text, "30-sweep", path)
        if body is not None:
            swept.append((world, rc, path))
        body, rc = block(text, "28-bad-inputs", path)
        if body is not None:
            table = [l for l in body.splitlines() if l.startswith("| ")]
            summary = [l for l in body.splitlines() if l.startswith("bad inputs:")]
            bad.append((world, rc, table, summary[0] if summary else "bad inputs: did not finish"))

    when = time.strftime("%Y-%m-%d", time.gmtime(max(os.path.getmtime(p) for p in logs)))
    doc = open(doc_path).read()
    if stress:
        blocks = []
        for world, rc, rows in stress:
            out = ["**%s** (scenario %s), by `%s` on %s:" % (
                world, "passed" if rc == 0 else "FAILED", command, when)]
            out.append("")
            out.append("| race | iterations | seconds | outcomes | nv_peer_mem counters |")
            out.append("|---|---|---|---|---|")
            for race, kv, rest in rows:
                if race in ("rmmod", "kernel"):
                    continue
                outcomes = " ".join("%s=%s" % (k, v) for k, v in kv.items()
                                    if k not in ("iterations", "ms", "seconds") and v != "0"
                                    and not k.startswith("nv_peer_mem."))
                counters = " ".join("%s=%s" % (k[len("nv_peer_mem."):], v) for k, v in kv.items()
                                    if k.startswith("nv_peer_mem.") and v != "0")
                out.append("| %s | %s | %s | %s | %s |" % (race, kv.get("iterations", "?"),
                                                         kv.get("seconds", "?"), outcomes, counters))
            for race, kv, rest in rows:
                if race in ("rmmod", "kernel"):
                    out.append("")
                    out.append("%s: %s" % (race, rest))
            out.append("")
            if rc == 0:
                out.append("Kernel reports: 0 (any fails the scenario). Left behind: nothing (pins, "
                           "mappings, tables, MRs, contexts and module references checked after "
                           "the races; kmemleak after the boot).")
                out.append("")
            blocks.append((world, "\n".join(out)))
        doc = replace(doc, "stress", merge_worlds(section(doc, "stress"), blocks))
    if bad:
        out = ["Produced by `%s` on %s." % (command, when), ""]
        for world, rc, table, summary in bad:
            out.append("**%s**: %s (scenario %s)." % (world, summary, "passed" if rc == 0 else "FAILED"))
            out.append("")
        world, rc, table, summary = bad[0]
        out.append("The table as printed in %s:" % world)
        out.append("")
        out.append("| input | expected | observed |")
        out.append("|---|---|---|")
        for line in table[1:]:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            out.append("| " + " | ".join(cells) + " |")
        doc = replace(doc, "bad-inputs", "\n".join(out))
    if soak:
        out = ["Produced by `%s` on %s." % (command, when), ""]
        out.append("| world | scenario | " + " | ".join(
            k for k, _ in re.findall(r"(\S+?)=(\S+)", soak[0][2])) + " |")
        out.append("|---|---|" + "---|" * len(re.findall(r"(\S+?)=(\S+)", soak[0][2])))
        for world, rc, line in soak:
            kv = re.findall(r"(\S+?)=(\S+)", line)
            out.append("| %s | %s | %s |" % (world, "passed" if rc == 0 else "FAILED",
                                            " | ".join(v for _, v in kv)))
        doc = replace(doc, "soak", "\n".join(out))
    sites = os.environ.get("NVPM_SWEEP_SITES")
    if swept and sites:
        lines = sweep_report.report(sites, [p for _, _, p in swept])
        out = ["Produced by `%s` on %s, in %s." % (
            command, when, "; ".join("%s (scenario %s)" % (w, "passed" if rc == 0 else "FAILED")
                                     for w, rc, _ in swept)), ""]
        out += [l for l in lines if l.startswith("sites:")] + [""]
        out.append("| site (function, return offset) | class | callee | runs | phases | errnos seen | errnos expected | behaved |")
        out.append("|---|---|---|---|---|---|---|---|")
        for l in lines:
            if l.startswith("sweep: ") and " | " in l and not l.startswith("sweep: site |"):
                cells = l[len("sweep: "):].split(" | ")
                cells[0] = "`%s`" % cells[0]
                out.append("| " + " | ".join(cells) + " |")
        out.append("")
        out += [l[len("sweep: "):] for l in lines if l.startswith("sweep: runs outside")]
        doc = replace(doc, "sweep", "\n".join(out))
    open(doc_path, "w").write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
