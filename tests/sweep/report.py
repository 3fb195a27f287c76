#!/usr/bin/env python3
"""Join the sweep's runs with the module's failure sites.

    report.py SITES CONSOLE_LOG...

SITES is what sites.py wrote for the module the VMs ran; each console log may hold the
"SWEEP ..." lines of tests/scenarios/30-sweep.sh (one world each). Prints a table of the
sites (which phases and injections reached each, how it behaved), the runs that reached no
nv_peer_mem site (the doubles' own allocations under a call from the module), and the line

    sites: N injected, N behaved (of N listed; N runs)

then "PASS sweep:sites" when every listed site was injected and every run behaved, else
"FAIL sweep:sites: ..." (the lines run.sh counts).
"""
import re
import sys

RUN = re.compile(r"^SWEEP (.*)$")


def report(sites_path, logs):
    """The report's lines, the last one PASS or FAIL."""
    out = []
    sites = []
    for line in open(sites_path):
        if line.strip() and not line.startswith("#"):
            key, cls, callee, func = line.rstrip("\n").split("\t")
            sites.append((key, cls, callee, func))
    runs = []
    for path in logs:
        world = path.rstrip("/").split("/")[-2].removeprefix("vm-")
        try:
            text = open(path, errors="replace").read()
        except OSError:
            continue
        for line in text.splitlines():
            m = RUN.match(line.strip())
            if m:
                fields = dict(f.split("=", 1) for f in m.group(1).split() if "=" in f)
                fields["world"] = world
                runs.append(fields)
    by_site = {}
    for r in runs:
        by_site.setdefault(r.get("site", "none"), []).append(r)
    listed = {k for k, _, _, _ in sites}
    injected = [s for s in sites if s[0] in by_site]
    behaved = [s for s in injected if all(r.get("behaved") == "yes" for r in by_site[s[0]])]

    out.append("sweep: site | class | callee | runs | phases | errnos seen | behaved")
    for key, cls, callee, func in sites:
        rs = by_site.get(key, [])
        phases = sorted({r.get("phase", "?") for r in rs})
        errnos = sorted({r.get("rc", "?") for r in rs}, key=lambda e: int(e) if e.isdigit() else -1)
        ok = "-" if not rs else ("yes" if all(r.get("behaved") == "yes" for r in rs) else "NO")
        out.append(f"sweep: {func} ({key.split('+')[-1]}) | {cls} | {callee} | {len(rs)} | "
                   f"{','.join(phases) or 'NOT INJECTED'} | {','.join(errnos)} | {ok}")
    others = [r for r in runs if r.get("site", "none") not in listed]
    unknown = sorted({r.get("site") for r in others if r.get("site", "none") != "none"})
    bad_others = [r for r in others if r.get("behaved") != "yes"]
    out.append(f"sweep: runs outside the listed sites: {len(others)} (nothing of nv_peer_mem's "
               f"on the stack below the failure, or a frame the list does not know: "
               f"{' '.join(unknown) or 'none'}); misbehaved: {len(bad_others)}")
    out.append(f"sites: {len(injected)} injected, {len(behaved)} behaved "
               f"(of {len(sites)} listed; {len(runs)} runs)")
    problems = []
    missing = [s for s in sites if s[0] not in by_site]
    if missing:
        problems.append("not injected: " + ", ".join(f"{f} -> {c}" for _, _, c, f in missing))
    if len(behaved) < len(injected):
        problems.append("misbehaved: " + ", ".join(s[3] for s in injected if s not in behaved))
    if bad_others:
        problems.append(f"{len(bad_others)} other runs misbehaved")
    if unknown:
        problems.append("frames not in the site list: " + " ".join(unknown))
    if not runs:
        problems.append("no SWEEP lines in the logs")
    if problems:
        out.append("FAIL sweep:sites: " + "; ".join(problems))
    else:
        out.append("PASS sweep:sites")
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    print("\n".join(report(sys.argv[1], sys.argv[2:])))


if __name__ == "__main__":
    main()
