#!/usr/bin/env python3
"""Join the sweep's runs with the module's failure sites.

    report.py SITES CONSOLE_LOG...

SITES is what sites.py wrote for the module the VMs ran; each console log may hold a run of
tests/scenarios/30-sweep.py (one world each): its "SWEEP-PLAN phases=... allocation-free=..."
line (the phases meant to make no allocation: they must inject nothing), one
"SWEEP ..." line per injected failure and one "SWEEP-PHASE phase=P injections=N" line per phase.
Prints a table of the sites (which phases and injections reached each, how it behaved), the
runs that reached no nv_peer_mem site (the doubles' own allocations under a call from the
module), a line per world with its phases' injections, and the line

    sites: N injected, N behaved (of N listed; N runs)

then "PASS sweep:sites" when every listed site was injected, every run behaved and every
planned phase of every world injected as many failures as it said, else "FAIL sweep:sites: ..."
(the lines run.sh counts). Safe to run on any logs: when none of them ran 30-sweep it prints
one line saying so and no PASS or FAIL.
"""
import re
import sys

RUN = re.compile(r"^SWEEP (.*)$")
PLAN = re.compile(r"^SWEEP-PLAN phases=(.*?)(?: allocation-free=(.*))?$")
PHASE = re.compile(r"^SWEEP-PHASE phase=(\S+) injections=(\d+)$")
# A console log whose VM ran the sweep (tests/vm/init marks each scenario).
BEGIN = re.compile(r"^=== BEGIN 30-sweep\r?$", re.M)


# The errnos an injected failure may become, by how it was injected and what the module called
# there (first match wins): (inject pattern, callee pattern, errnos, why). The errno is what the
# run's caller got (ibv_reg_mr's, the load's, the read's), 0 when the call succeeded.
EXPECTED = [
    (r"nvidia:(get_pages|get_pages_persistent)$", r"", {"0"},
     "only acquire pins through this call: a failed pin still claims GPU memory, and get_pages pins again"),
    (r"nvidia:dma_map_pages$", r"", {"5"}, "the EIO injected, passed on"),
    (r"nvidia:", r"", {"0"}, "unmapping and unpinning have no errno for ib_core: logged"),
    (r"slab", r"^ib_register_peer_memory_client$", {"22"}, "the load fails with EINVAL: a NULL carries no errno"),
    (r"slab", r"^debugfs_create_", {"0"}, "the registration view is optional: the load goes on without it"),
    (r"slab", r"^kern_path$", {"0"},
     "the lookup of /sys/module/nvidia_peermem: a failure reads as not loaded, the load goes on"),
    (r"slab", r"^nvidia_p2p_get_pages", {"0", "12"},
     "0: acquire's pin (the buffer is claimed anyway, get_pages pins again); 12: get_pages' own"),
    (r"slab", r"^nvidia_p2p_put_pages", {"0"}, "unpinning has no errno: logged"),
    (r"slab", r"", {"12"}, "ENOMEM, as the allocation"),
]
# Runs with no nv_peer_mem frame below the failure: the doubles' own allocations (the core's MR,
# before or after calling the module): ENOMEM, or 0 when the callee recovered (a quiet first try).
EXPECTED_OUTSIDE = {"0", "12"}


def expected(run, callee):
    """(errnos, why) for a run at a site whose callee is CALLEE."""
    for inject, pattern, errnos, why in EXPECTED:
        if re.match(inject, run.get("inject", "")) and re.match(pattern, callee):
            return errnos, why
    return set(), "no expectation"


def as_expected(run, callee):
    """Whether the run behaved (the scenario's judge) with an errno its site may give."""
    return run.get("behaved") == "yes" and run.get("rc") in expected(run, callee)[0]


def report(sites_path, logs):
    """The report's lines, the last one PASS or FAIL."""
    out = []
    sites = []
    for line in open(sites_path):
        if line.strip() and not line.startswith("#"):
            key, cls, callee, func = line.rstrip("\n").split("\t")
            sites.append((key, cls, callee, func))
    runs = []
    swept = 0
    phase_problems = []
    for path in logs:
        parts = path.rstrip("/").split("/")
        world = (parts[-2] if len(parts) > 1 else parts[-1]).removeprefix("vm-")
        try:
            text = open(path, errors="replace").read()
        except OSError:
            continue
        if not BEGIN.search(text):
            continue  # this VM did not run the sweep
        swept += 1
        plan = None
        free = set()
        stated = {}
        counted = {}
        for line in text.splitlines():
            line = line.strip()
            m = RUN.match(line)
            if m:
                fields = dict(f.split("=", 1) for f in m.group(1).split() if "=" in f)
                fields["world"] = world
                runs.append(fields)
                counted[fields.get("phase", "?")] = counted.get(fields.get("phase", "?"), 0) + 1
                continue
            m = PLAN.match(line)
            if m:
                plan = m.group(1).split()
                free = set((m.group(2) or "").split())
                continue
            m = PHASE.match(line)
            if m:
                stated[m.group(1)] = int(m.group(2))
        out.append(f"sweep: {world}: phases " + (" ".join(
            f"{p}={stated.get(p, 'MISSING')}" for p in plan) if plan is not None else "NO PLAN"))
        if plan is None:
            phase_problems.append(f"{world}: no SWEEP-PLAN line")
            continue
        for p in plan:
            if p not in stated:
                phase_problems.append(f"{world}: phase {p} has no SWEEP-PHASE line")
            elif p in free and stated[p]:
                phase_problems.append(f"{world}: phase {p} is meant to allocate nothing, "
                                      f"{stated[p]} injections")
            elif stated[p] == 0 and p not in free:
                phase_problems.append(f"{world}: phase {p} injected nothing")
            elif stated[p] != counted.get(p, 0):
                phase_problems.append(f"{world}: phase {p} says {stated[p]} injections, "
                                      f"{counted.get(p, 0)} SWEEP lines")
        unplanned = sorted((set(stated) | set(counted)) - set(plan))
        if unplanned:
            phase_problems.append(f"{world}: phases not in its plan: {' '.join(unplanned)}")
    if not swept:
        return ["sweep: no log here ran 30-sweep: nothing to report"]
    by_site = {}
    for r in runs:
        by_site.setdefault(r.get("site", "none"), []).append(r)
    listed = {k for k, _, _, _ in sites}
    injected = [s for s in sites if s[0] in by_site]
    behaved = [s for s in injected if all(as_expected(r, s[2]) for r in by_site[s[0]])]

    def errno_list(errnos):
        return ",".join(sorted(errnos, key=lambda e: int(e) if e.isdigit() else -1))

    out.append("sweep: site | class | callee | runs | phases | errnos seen | errnos expected | behaved")
    for key, cls, callee, func in sites:
        rs = by_site.get(key, [])
        phases = sorted({r.get("phase", "?") for r in rs})
        errnos = {r.get("rc", "?") for r in rs}
        allowed = set().union(*(expected(r, callee)[0] for r in rs)) if rs else set()
        ok = "-" if not rs else ("yes" if all(as_expected(r, callee) for r in rs) else "NO")
        out.append(f"sweep: {func} ({key.split('+')[-1]}) | {cls} | {callee} | {len(rs)} | "
                   f"{','.join(phases) or 'NOT INJECTED'} | {errno_list(errnos)} | {errno_list(allowed)} | {ok}")
    others = [r for r in runs if r.get("site", "none") not in listed]
    unknown = sorted({r.get("site") for r in others if r.get("site", "none") != "none"})
    bad_others = [r for r in others if r.get("behaved") != "yes" or r.get("rc") not in EXPECTED_OUTSIDE]
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
    problems += phase_problems
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
