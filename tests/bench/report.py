#!/usr/bin/env python3
"""Turn make bench's "BENCH key=value..." lines (from the VMs' console logs) into JSON lines,
readable tables, SVG plots and the figures section of Documentation/performance.md.

usage: report.py [--stock CONSOLE_LOG]... [--test CONSOLE_LOG]... OUT_DIR [PERFORMANCE_MD]
       report.py --drift CONSOLE_LOG
--stock: a boot of Debian's own kernel (the production configuration; its figures lead and
the targets are judged on them); --test: a boot of the test kernel (KASAN, lockdep, kmemleak).
Given more than once, a kernel's boots are judged together: each figure is the median of the
boots', shown with their range; each target is judged on the median, and a target that some
boots meet and others miss is "not settled". A boot whose emulator speed moved by more than 20%
between its first and last calibration is left out (stock-world.sh --bench boots again instead).
Writes OUT_DIR/bench-KERNEL.jsonl and OUT_DIR/*-KERNEL.svg; prints the JSON lines and the
tables; rewrites, for each kernel given, the part of PERFORMANCE_MD between
"<!-- bench:KERNEL:begin -->" and "<!-- bench:KERNEL:end -->" (the other kernel's stays).
--drift: prints how far the emulator's speed moved during that boot, and exits 1 when it moved
by more than 20% (the boot is not to be judged), 0 otherwise.
"""
import json
import os
import re
import statistics
import sys

from profile_parse import parse_profile, profile_phases, registry_lock
from svgplot import human, plots

PHASES = ["acquire", "get_pages", "dma_map", "dma_unmap", "put_pages", "release"]
FLOOR_PHASES = ["pin", "dma_map", "sg_fill", "dma_unmap", "unpin"]
# A boot whose calibration at its end differs from its first by more than this is not judged.
MAX_DRIFT = 0.20


def parse_kv(text):
    out = {}
    for word in text.split():
        if "=" in word:
            k, v = word.split("=", 1)
            try:
                out[k] = int(v, 0)
            except ValueError:
                out[k] = v
    return out


def parse(log):
    # The profiles' lines by live registrations: each "BENCH kind=profile" line starts one (an
    # older log's lines, with no such line, are one profile with 1 live).
    cases, profiles = [], []
    for line in open(log, errors="replace"):
        line = line.rstrip("\r\n")
        if line.startswith("PROFILE "):
            if not profiles:
                profiles.append((1, []))
            profiles[-1][1].append(line[len("PROFILE "):])
            continue
        if not line.startswith("BENCH "):
            continue
        body = line[len("BENCH "):]
        if body.startswith("kind=profile "):
            profiles.append((parse_kv(body).get("live_registrations", 1), []))
            continue
        head, *runs = re.split(r"\b(?:bench (?=tag=)|floor (?=va=))", body)
        case = parse_kv(head)
        runs = [parse_kv(r) for r in runs if r.strip()]
        if case.get("kind") in ("threads", "floor-threads", "floor-core-lock-threads"):
            case["runs"] = runs
        elif runs:
            case.update({k: v for k, v in runs[0].items() if k not in case})
        cases.append(derive(case))
    for live, profile in profiles:
        if profile:
            roots = parse_profile(profile)
            case = {"kind": "profile", "live_registrations": live, "phases": [
                {"phase": p, "traced_us": round(t, 2),
                 "calls": {k: [n, round(u, 2)] for k, (n, u) in calls.items()}}
                for p, calls, t in profile_phases(roots, PHASES)]}
            held = registry_lock(roots, profile, PHASES)
            if held:
                case["registry_lock"] = {p: [n, round(u, 2)] for p, (n, u) in held.items()}
            cases.append(case)
    return cases


def derive(c):
    kind = c.get("kind")
    if kind == "module":
        c["register_ns"] = c["acquire_ns"] + c["get_pages_ns"] + c["dma_map_ns"]
        c["deregister_ns"] = c["dma_unmap_ns"] + c["put_pages_ns"] + c["release_ns"]
        c["total_ns"] = c["register_ns"] + c["deregister_ns"]
        c["overhead_ns"] = c["total_ns"] - c["nvidia_ns"]
    elif kind == "floor":
        c["register_ns"] = c["pin_ns"] + c["dma_map_ns"] + c["sg_fill_ns"]
        c["total_ns"] = sum(c[p + "_ns"] for p in FLOOR_PHASES)
        c["overhead_ns"] = c["total_ns"] - c["nvidia_ns"]
    elif kind in ("threads", "floor-threads", "floor-core-lock-threads"):
        runs = c.get("runs", [])
        if runs:
            iters = sum(r["iters"] for r in runs)
            wall = max(r["end_ns"] for r in runs) - min(r["start_ns"] for r in runs)
            c["registrations_per_s"] = round(iters * 1e9 / wall, 1) if wall else 0
    return c


# The NVIDIA calls each phase of a one-pin registration makes (the module's design, design.md).
PHASE_CALLS = {"acquire": ["pin"], "get_pages": [], "dma_map": ["dma_map"], "dma_unmap": ["dma_unmap"],
               "put_pages": ["unpin", "free"], "release": []}


def own_phases(m):
    """A one-pin module case's phases minus the NVIDIA time inside them (ns)."""
    return {p: m[p + "_ns"] - sum(m.get(f"nv_{k}_ns", 0) for k in PHASE_CALLS[p]) for p in PHASES}


def grouped(n):
    """10 000, as the page writes it."""
    return f"{n:,}".replace(",", " ")


def us(ns):
    return f"{ns / 1000:.1f}"


def cost_pct(cases):
    info = [c for c in cases if c.get("kind") == "info" and "cost_scale_pct" in c]
    return info[0]["cost_scale_pct"] if info else 100


def factor(cases):
    """The emulator's factor (VM time / native time of tests/bench/calibrate.c), or None."""
    c = [c for c in cases if c.get("kind") == "calibration"]
    return c[0]["vm_best_ns"] / c[0]["native_best_ns"] if c and c[0].get("native_best_ns") else None


def native_us(ns, f):
    return f"{ns / f / 1000:.2f}" if f else "-"


def matching(cases, **kw):
    return [c for c in cases if all(c.get(k) == v for k, v in kw.items())]


def find(cases, **kw):
    found = matching(cases, **kw)
    return found[0] if found else None


def best(cases, **kw):
    """Of the cases that match (the cost model off runs each three times), the one with the least
    overhead; None if none matches."""
    found = [c for c in matching(cases, **kw) if "overhead_ns" in c]
    return min(found, key=lambda c: c["overhead_ns"]) if found else None


def drift(cases):
    """How far the emulator's speed moved during a boot: its calibration at the end against the
    first (None without both)."""
    c, e = find(cases, kind="calibration"), find(cases, kind="calibration-end")
    if c and e and c.get("vm_best_ns") and e.get("vm_best_ns"):
        return e["vm_best_ns"] / c["vm_best_ns"] - 1
    return None


# The fields that tell a boot's cases apart.
KEY = ("kind", "case", "layout", "size", "cost_pct", "live_registrations")


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def one_per_key(cases):
    """A boot's cases, one per key: of the cost model off's three runs the one with the least
    overhead (as best() picks), and the info lines as one."""
    out = {}
    for c in cases:
        # The cost model's scale, on or off (when on, it is the boot's own factor).
        k = tuple(bool(c.get(f)) if f == "cost_pct" else c.get(f) for f in KEY)
        if k not in out:
            out[k] = dict(c)
        elif c.get("kind") == "info":
            out[k].update(c)
        elif "overhead_ns" in c and c["overhead_ns"] < out[k].get("overhead_ns", float("inf")):
            out[k] = dict(c)
    return out


def merge_boots(boots):
    """One set of cases from several boots' (each a list of cases): every number the median of
    the boots' figures, with (least, greatest) in the case's "range"; anything else (texts, the
    threads' runs, the profiles) from the first boot that has the case."""
    if len(boots) == 1:
        return boots[0]
    per = [one_per_key(b) for b in boots]
    merged = []
    for k in dict.fromkeys(k for p in per for k in p):
        have = [p[k] for p in per if k in p]
        c = dict(have[0], range={}, boots=len(have))
        for f, v in have[0].items():
            vals = [h[f] for h in have if number(h.get(f))]
            if f in KEY or not number(v) or len(vals) != len(have):
                continue
            med = statistics.median(vals)
            # Counts stay whole numbers.
            c[f] = round(med) if all(isinstance(v, int) for v in vals) else med
            c["range"][f] = (min(vals), max(vals))
        merged.append(c)
    return merged


def spread(c, field, conv):
    """C's FIELD through CONV, with its range over the boots where they differ."""
    text = conv(c[field])
    r = c.get("range", {}).get(field)
    if r and conv(r[0]) != conv(r[1]):
        text += f" ({conv(r[0])} to {conv(r[1])})"
    return text


def live_cases(cases, suffix=""):
    """(module, floor) cases of the live-registration bench: 1 live, 10 000 live, and 1 again
    after the 10 000 (None where the log has no such case); SUFFIX "-model-off" for the same
    with the cost model off."""
    return [(best(cases, kind="module", case=c + suffix), best(cases, kind="floor", layout=c + suffix))
            for c in ("live-1", "live-10000", "live-1-after")]


def own_work(cases, layout, size):
    """(module, floor) of the cost model off at LAYOUT and SIZE: the module's own work alone,
    and the bare sequence's (None where the log has no such case)."""
    return (best(cases, kind="module", case="model-off", layout=layout, size=size),
            best(cases, kind="floor", layout="model-off-" + layout, size=size))


def paced(cases, **kw):
    """(median, runs) of the matching runs' own work against the fake's time in NVIDIA's calls in
    the same run, or None: with the cost model off both are work the emulator runs in the same
    moments, so the emulator's speed, which swings by up to 2x between runs, divides out."""
    rs = [c["overhead_ns"] / c["nvidia_ns"] for c in matching(cases, **kw) if c.get("nvidia_ns")]
    return (statistics.median(rs), len(rs)) if rs else None


def live_paced(cases):
    """(change, text) of the module's own work with 10 000 live against 1, each run's against the
    fake's time in it (the cost model off), or None for a log without those cases. The 10 000 are
    judged against the mean of the single case before and after; the floor, which keeps no
    registry, is the control: had the fake slowed with the 10 000 pins it holds, which would hide
    a module that slowed, the floor's ratio would fall."""
    names = [f"live-{n}-model-off" for n in ("1", "10000", "1-after")]
    mod = [paced(cases, kind="module", case=n) for n in names]
    flo = [paced(cases, kind="floor", layout=n) for n in names]
    if not (mod[0] and mod[1]):
        return None

    def change(v):
        base = (v[0][0] + v[2][0]) / 2 if v[2] else v[0][0]
        return v[1][0] / base - 1

    r = change(mod)
    ratios = " / ".join(f"{v[0]:.3f}" for v in mod if v)
    text = (f"{r:+.1%} (its own work per unit of the fake's time in the same run, the median of "
            f"{mod[1][1]} runs each: {ratios} for 1 live, 10 000, 1 after)")
    if all(flo[:2]):
        text += f"; the floor's own part, so measured: {change(flo):+.1%}"
    return r, text


def live_change(cases, suffix):
    """(change of the module's own part with 10 000 live against 1, text) or None: judged against
    the mean of the single case before and after the 10 000 (a steady drift cancels), with the
    floor's own part beside it as the control."""
    if suffix == "-model-off" and len(matching(cases, kind="module", case="live-10000" + suffix)) > 3:
        return live_paced(cases)
    (l1, f1), (l2, f2), (l3, f3) = live_cases(cases, suffix)
    if not (l1 and l2):
        return None
    base = (l1["overhead_ns"] + l3["overhead_ns"]) / 2 if l3 else l1["overhead_ns"]
    fbase = ((f1["overhead_ns"] + f3["overhead_ns"]) / 2 if f1 and f3 else
             f1["overhead_ns"] if f1 else 0)
    r = l2["overhead_ns"] / base - 1
    how = (f" (against 1's mean of {us(l1['overhead_ns'])} before and {us(l3['overhead_ns'])} after: "
           f"{l3['overhead_ns'] / l1['overhead_ns'] - 1:+.0%} drift between them)" if l3 else "")
    ctl = (f"; the floor's own part: {f2['overhead_ns'] / fbase - 1:+.1%}" if f2 and fbase > 0 else "")
    return r, f"{r:+.1%}{how}{ctl}"


def lock_held(prof):
    """(sections, us) the registry's lock was held in a profiled registration, or None."""
    rl = prof.get("registry_lock") if prof else None
    if not rl or not sum(n for n, _ in rl.values()):
        return None
    return sum(n for n, _ in rl.values()), sum(u for _, u in rl.values())


def own_traced(prof):
    """The us a profiled registration spent outside NVIDIA's calls (the core's own steps in)."""
    return sum(ph["traced_us"] - sum(u for k, (_, u) in ph["calls"].items() if k.startswith("nvidia_p2p_"))
               for ph in prof["phases"])


def scaling(cases, kind, pct):
    """(registrations/s with 1 thread, with 2) of KIND ("threads": the module, "floor-threads")."""
    # The model on or off: its scale is the boot's factor, which differs from boot to boot.
    one, two = (next((c for c in matching(cases, kind=kind, case=n) if bool(c.get("cost_pct")) == bool(pct)),
                     None) for n in ("1-thread", "2-threads"))
    if one and two and one.get("registrations_per_s") and two.get("registrations_per_s"):
        return one["registrations_per_s"], two["registrations_per_s"]
    return None


def tables(cases):
    """The markdown tables and the target checks."""
    out = []
    sizes = sorted({c["size"] for c in cases if c.get("kind") == "module" and c.get("case") == "one-pin"
                    and c.get("layout") == "contiguous"})
    out.append("### Registration (contiguous buffers), microseconds per operation\n")
    f_emu = factor(cases)
    out.append("| size | register | deregister | inside NVIDIA | module overhead | module overhead, native-equivalent "
               "| floor | floor overhead | overhead / floor | probe-then-pin register | one-pin / probe-then-pin "
               "| pin calls (probe-then-pin) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in sizes:
        m = find(cases, kind="module", case="one-pin", layout="contiguous", size=s)
        f = find(cases, kind="floor", layout="contiguous", size=s)
        p = find(cases, kind="module", case="probe-then-pin", layout="contiguous", size=s)
        ratio = m["register_ns"] / p["register_ns"] if p else float("nan")
        ovf = m["overhead_ns"] / f["total_ns"] if f else float("nan")
        out.append(f"| {human(s)} | {us(m['register_ns'])} | {us(m['deregister_ns'])} | {us(m['nvidia_ns'])} "
                   f"| {spread(m, 'overhead_ns', us)} "
                   f"| {spread(m, 'overhead_ns', lambda ns: native_us(ns, f_emu))} "
                   f"| {us(f['total_ns']) if f else '-'} | {us(f['overhead_ns']) if f else '-'} "
                   f"| {ovf:.1%} | {us(p['register_ns']) if p else '-'} | {ratio:.2f} "
                   f"| {m['pin_calls']} ({p['pin_calls'] if p else '-'}) |")
    out.append("")
    out.append("*Set by the cost model* (NVIDIA's modelled time, pin counts x the public figures): register, "
               "deregister, inside NVIDIA, floor, probe-then-pin register and the one-pin / probe-then-pin "
               "ratio. *The module's own:* module overhead (total minus the time inside NVIDIA's calls), its "
               "native-equivalent (divided by the emulator's factor), overhead / floor, pin calls. The floor "
               "overhead is the bare API sequence's own work.\n")
    out.append("### Phases of one registration (one-pin, contiguous), microseconds\n")
    out.append("| size | " + " | ".join(PHASES) + " |")
    out.append("|---|" + "---|" * len(PHASES))
    for s in sizes:
        m = find(cases, kind="module", case="one-pin", layout="contiguous", size=s)
        out.append(f"| {human(s)} | " + " | ".join(us(m[p + '_ns']) for p in PHASES) + " |")
    out.append("")
    out.append("*Both:* each phase is NVIDIA's modelled time inside it plus the module's own work; acquire holds "
               "the pin, put_pages the unpin, dma_map and dma_unmap NVIDIA's mapping calls.\n")
    own_rows = [m for m in (find(cases, kind="module", case="one-pin", layout="contiguous", size=s) for s in sizes)
                if m and "nv_pin_ns" in m]
    if own_rows:
        out.append("### Where the module's own time goes (one-pin, contiguous), microseconds per registration\n")
        out.append("Each phase minus the time spent inside the NVIDIA calls it makes (acquire: the pin; dma_map, "
                   "dma_unmap: NVIDIA's; put_pages: the unpin); native-equivalent (divided by the emulator's "
                   "factor) in brackets.\n")
        out.append("| size | " + " | ".join(PHASES) + " | total |")
        out.append("|---|" + "---|" * (len(PHASES) + 1))
        for m in own_rows:
            own = own_phases(m)
            out.append(f"| {human(m['size'])} | " + " | ".join(
                f"{us(own[p])} ({native_us(own[p], f_emu)})" for p in PHASES)
                + f" | {us(sum(own.values()))} ({native_us(sum(own.values()), f_emu)}) |")
        out.append("")
        out.append("*The module's own*, all of it.\n")
    off_rows = [(s, *own_work(cases, "contiguous", s)) for s in sizes]
    off_rows = [(s, m, f) for s, m, f in off_rows if m and f]
    if off_rows:
        out.append("### The module's own work, cost model off (one-pin, contiguous), microseconds per "
                   "registration\n")
        out.append("The same registrations with the cost model off: NVIDIA's calls take only the fake's own "
                   "time, and what each phase spends beside them is the module's work alone. With the model "
                   "on, the code that runs after each long NVIDIA call runs slower in this emulator; the last "
                   "columns show by how much, for the module and, as the control, for the floor's own part "
                   "(the bare sequence, which has no code of the module's). Each figure with the model off is "
                   "the best of three runs.\n")
        out.append("| size | " + " | ".join(PHASES) + " | total | native-equivalent | floor's own "
                   "| model on: module's own | model on: floor's own | slower with the model on: module "
                   "| slower with the model on: floor |")
        out.append("|---|" + "---|" * (len(PHASES) + 7))
        for s, m, f in off_rows:
            own = own_phases(m)
            on = find(cases, kind="module", case="one-pin", layout="contiguous", size=s)
            fon = find(cases, kind="floor", layout="contiguous", size=s)
            cells = [us(own[p]) for p in PHASES] + [
                spread(m, "overhead_ns", us), spread(m, "overhead_ns", lambda ns: native_us(ns, f_emu)),
                spread(f, "overhead_ns", us)]
            cells += [us(on["overhead_ns"]) if on else "-", us(fon["overhead_ns"]) if fon else "-"]
            cells += [f"{on['overhead_ns'] / m['overhead_ns']:.1f}x" if on and m["overhead_ns"] > 0 else "-",
                      f"{fon['overhead_ns'] / f['overhead_ns']:.1f}x" if fon and f["overhead_ns"] > 0 else "-"]
            out.append(f"| {human(s)} | " + " | ".join(cells) + " |")
        out.append("")
        out.append("*The module's own:* the phases, the total and its native-equivalent (divided by the "
                   "emulator's factor). The floor's columns are the control.\n")
    profs = sorted(matching(cases, kind="profile"), key=lambda c: c.get("live_registrations", 1))
    for prof in (p for p in profs if p["phases"]):
        live = prof.get("live_registrations", 1)
        out.append(f"### Profile of one 64 KiB registration with {grouped(live)} live "
                   f"registration{'s' * (live != 1)} (ftrace function_graph), microseconds\n")
        out.append("What the module's phases call, three calls down from the core's bench loop, as traced: the "
                   "tracer's own cost inflates every figure. The module's Rust functions are not traceable, so "
                   "each phase's remainder is its Rust code, the calls inlined into it and the tracer's own "
                   "entry and exit work. Each `mutex_lock` is the registry's lock or a context's phase lock; "
                   "each `__rcu_read_lock` a walk of the registry's XArray (`xa_load`, not traced itself)"
                   + (f"; the first boot's profile of the {prof['boots']}" if prof.get("boots", 1) > 1 else "")
                   + ".\n")
        out.append("| phase | traced | calls (count) time |")
        out.append("|---|---|---|")
        for ph in prof["phases"]:
            total = ph["traced_us"]
            named = sorted(ph["calls"].items(), key=lambda kv: -kv[1][1])
            shown = [f"{k} ({n}) {u:.1f}" for k, (n, u) in named]
            rest = total - sum(u for _, (_, u) in named)
            out.append(f"| {ph['phase']} | {total:.1f} | {'; '.join(shown)}; untraced {rest:.1f} |")
        out.append("")
        out.append("*Both:* the NVIDIA calls (nvidia_p2p_*) follow the cost model; the rest is the module's and "
                   "the kernel's work for it, and in acquire and release the core's client lookup.\n")
        held = lock_held(prof)
        if held:
            n, u = held
            out.append(f"The registry's lock in this registration (kprobe events on `mutex_lock` and "
                       f"`mutex_unlock`; the registry's is the lock get_pages takes first): taken {n} times, "
                       f"held {u:.1f} us in all ("
                       + "; ".join(f"{p_} {c} ({t:.1f})" for p_, (c, t) in prof["registry_lock"].items() if c)
                       + f"), {native_us(u * 1000, f_emu)} us native-equivalent. An upper bound: each section "
                       "runs from `mutex_lock`'s entry to `mutex_unlock`'s and holds the tracer's own work.\n")
    if len(profs) == 2 and all(p["phases"] for p in profs):
        # Where the live registrations' cost goes: each phase's traced time and its calls that are
        # not NVIDIA's (whose time the cost model sets), 1 live against the most.
        a, b = ({ph["phase"]: ph for ph in p["phases"]} for p in profs)

        def own(ph):
            return ph["traced_us"] - sum(u for k, (_, u) in ph["calls"].items() if k.startswith("nvidia_p2p_"))

        out.append(f"### The two profiles side by side: {grouped(profs[0]['live_registrations'])} against "
                   f"{grouped(profs[1]['live_registrations'])} live registrations, microseconds\n")
        out.append("| phase | traced, 1 live | traced, many live | without NVIDIA's calls, 1 live "
                   "| without NVIDIA's calls, many live | difference |")
        out.append("|---|---|---|---|---|---|")
        for p_ in PHASES:
            if p_ in a and p_ in b:
                d = own(b[p_]) - own(a[p_])
                out.append(f"| {p_} | {a[p_]['traced_us']:.1f} | {b[p_]['traced_us']:.1f} | {own(a[p_]):.1f} "
                           f"| {own(b[p_]):.1f} | {d:+.1f} |")
        total_a = sum(own(ph) for ph in a.values())
        total_b = sum(own(ph) for ph in b.values())
        out.append(f"| all | | | {total_a:.1f} | {total_b:.1f} | {total_b - total_a:+.1f} |")
        out.append("")
        out.append("*One registration each, under the tracer:* a single run, so a difference of a few "
                   "microseconds is within the emulator's noise.\n")
    out.append("### Layouts, microseconds per registration and deregistration\n")
    out.append("| layout | size | module total | inside NVIDIA | module overhead | floor | overhead / floor "
               "| sg entries | bytes held |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for layout in ("contiguous", "fragmented", "shuffled"):
        for s in (0x200000, 0x8000000):
            m = find(cases, kind="module", case="one-pin", layout=layout, size=s)
            f = find(cases, kind="floor", layout=layout, size=s)
            h = find(cases, kind="held", case="one-pin", layout=layout, size=s)
            if not m:
                continue
            ovf = m["overhead_ns"] / f["total_ns"] if f else float("nan")
            out.append(f"| {layout} | {human(s)} | {us(m['total_ns'])} | {us(m['nvidia_ns'])} "
                       f"| {us(m['overhead_ns'])} | {us(f['total_ns']) if f else '-'} | {ovf:.1%} "
                       f"| {h['sg_entries'] if h else '-'} | {h['bytes'] if h else '-'} |")
    out.append("")
    out.append("*The module's own:* module overhead, overhead / floor, sg entries, bytes held; the rest is set "
               "by the cost model.\n")
    out.append("### sg entries, NIC page size and bytes held per registration (contiguous)\n")
    out.append("| size | entries (coalesced) | NIC page (coalesced) | bytes held (coalesced) "
               "| entries (per page) | NIC page (per page) | bytes held (per page) |")
    out.append("|---|---|---|---|---|---|---|")
    for s in sizes:
        a = find(cases, kind="held", case="one-pin", layout="contiguous", size=s)
        b = find(cases, kind="held", case="per-page-sg", layout="contiguous", size=s)
        if a and b:
            out.append(f"| {human(s)} | {a['sg_entries']} | {human(a['nic_page_size'])} | {a['bytes']} "
                       f"| {b['sg_entries']} | {human(b['nic_page_size'])} | {b['bytes']} |")
    out.append("")
    out.append("*The module's own*, all of it (bytes held: the registration view's figure, the size classes "
               "the allocator gives for what the module keeps; measured against the slab caches below).\n")
    thr = [c for c in cases if c.get("kind") == "threads"]
    if thr:
        out.append("### Threads (2 MiB buffers, one each), registrations per second\n")
        out.append("| cost model | what | 1 thread | 2 threads | speed-up |")
        out.append("|---|---|---|---|---|")
        for pct in (cost_pct(cases), 0):
            label = "on (NVIDIA serializes under its API lock)" if pct else "off"
            for kind, what in (("threads", "module"), ("floor-threads", "floor (control)"),
                               ("floor-core-lock-threads", "floor, each pin under one lock as in ib_core's "
                                                           "acquire (control)")):
                r = scaling(cases, kind, pct)
                if r:
                    out.append(f"| {label} | {what} | {r[0]:.1f} | {r[1]:.1f} | {r[1] / r[0]:.2f}x |")
        par = find(cases, kind="calibration-parallel")
        if par and par.get("single_best_ns") and par.get("a_best_ns") and par.get("b_best_ns"):
            # Two runs of the same work at once against one just before: throughput ratio.
            sp = 2 * par["single_best_ns"] / max(par["a_best_ns"], par["b_best_ns"])
            out.append(f"| - | calibrate.c, two processes (the emulator's control) | 1 | {sp:.2f} | {sp:.2f}x |")
        one = next((p for p in matching(cases, kind="profile") if p.get("live_registrations", 1) == 1), None)
        held = lock_held(one)
        if held and own_traced(one) > 0:
            # Amdahl's bound with the registry's lock as the only serial part.
            share = held[1] / own_traced(one)
            out.append("")
            out.append(f"On paper, with real parallel CPUs: the module serialises registrations only on its "
                       f"registry's lock, held {held[1]:.1f} us per registration in the profile ({held[0]} "
                       f"sections, {native_us(held[1] * 1000, f_emu)} us native-equivalent, an upper bound) of "
                       f"the {own_traced(one):.1f} us it spends outside NVIDIA's calls there ({share:.0%}). "
                       f"Were that the only serial part, two threads would reach "
                       f"{1 / (share + (1 - share) / 2):.2f}x of one. NVIDIA's API lock and ib_core's "
                       "acquire mutex serialise more (the floors below the table show how much here); TCG's "
                       "figures above are what two emulated vCPUs give.")
        out.append("")
        out.append("*The module's own:* the speed-up with the cost model off. Beside it, three controls: the floor "
                   "(the P2P calls alone, under the fake's API lock); the floor with each pin made under one mutex, "
                   "as ib_core calls every client's acquire under its peer-client mutex, which bounds a client "
                   "that pins in acquire (this module keeps acquire's pin; the C modules pin and unpin there "
                   "and pin again); and two calibration processes at once, which share nothing: the most two "
                   "vCPUs give in this VM on this host.\n")
    (l1, f1), (l2, f2), (l3, f3) = live_cases(cases)
    if l1 and l2:
        out.append("### Live registrations (2 MiB, contiguous), microseconds\n")
        out.append("| live registrations | total | inside NVIDIA | module overhead | floor | floor overhead (control) |")
        out.append("|---|---|---|---|---|---|")
        rows = [("1", l1, f1), ("10 000", l2, f2)] + ([("1, after the 10 000", l3, f3)] if l3 else [])
        (o1, g1), (o2, g2), (o3, g3) = live_cases(cases, "-model-off")
        rows += [(f"{n}, cost model off", m, f) for n, m, f in
                 (("1", o1, g1), ("10 000", o2, g2), ("1, after the 10 000", o3, g3)) if m]
        for n, m, f in rows:
            out.append(f"| {n} | {us(m['total_ns'])} | {us(m['nvidia_ns'])} | {spread(m, 'overhead_ns', us)} "
                       f"| {us(f['total_ns']) if f else '-'} | {spread(f, 'overhead_ns', us) if f else '-'} |")
        out.append("")
        out.append("*The module's own:* module overhead. The floor keeps no registry: its own part growing "
                   "beside the module's is the machine's (NVIDIA's lists, caches, the emulator's TLB). The "
                   "10 000 are judged against the mean of the single case before and after them, which "
                   "cancels a steady drift of the emulator's speed; with the cost model off, on the module's "
                   "own work alone, each run's against the fake's own time in NVIDIA's calls in that run "
                   "(the emulator's speed swings by up to 2x from one run to the next; the table shows the "
                   "run with the least overhead).\n")
    inv = [c for c in cases if c.get("kind") == "invalidate"]
    if inv:
        out.append("### Invalidation latency (cudaFree until the free callback returned)\n")
        out.append("| size | microseconds |")
        out.append("|---|---|")
        for c in inv:
            out.append(f"| {human(c['size'])} | {us(c['invalidate_ns'])} |")
        out.append("")
    return "\n".join(out)


def class_bytes(cases):
    """(bytes, text) of the kmalloc objects a registration added, per size class rounded to whole
    objects, from the bench's kmalloc_objects_per_100_registrations, and its share of the XArray
    nodes the 10 000 registrations added; None without the kmalloc figures."""
    info = next((c for c in cases if c.get("kind") == "info" and "kmalloc_objects_per_100_registrations" in c), None)
    if not info or not isinstance(info["kmalloc_objects_per_100_registrations"], str):
        return None
    total, parts = 0, []
    for item in info["kmalloc_objects_per_100_registrations"].split(","):
        name, _, n = item.partition(":")
        m = re.match(r"kmalloc-(?:rnd-\d+-)?(\d+)(k?)$", name)
        if not m or not n:
            continue
        size = int(m.group(1)) * (1024 if m.group(2) else 1)
        objects = round(int(n) / 100)
        if objects:
            total += objects * size
            parts.append(f"{objects} x {size}")
    # The registry's XArray nodes, 64 slots each: a fraction of a node per registration.
    xa = next((c for c in cases if c.get("kind") == "info" and "xarray_nodes_per_10000_registrations" in c), None)
    if xa and xa["xarray_nodes_per_10000_registrations"] > 0:
        nodes, size = xa["xarray_nodes_per_10000_registrations"], xa["xarray_node_bytes"]
        total += round(nodes * size / 10000)
        parts.append(f"{nodes}/10000 x {size} (XArray nodes)")
    return total, " + ".join(parts)


def target_rows(cases):
    """The targets of make bench (Documentation/performance.md) on one boot's figures: for each,
    its name, the text, whether the boot meets it, and the figure it is judged on with the test
    and the format (None where the figure is no number)."""
    rows = []
    f_emu = factor(cases)

    def row(name, value, ok, x=None, test=None, fmt=None):
        rows.append({"name": name, "text": value, "ok": bool(ok), "x": x, "test": test, "fmt": fmt})

    m = find(cases, kind="module", case="one-pin", layout="contiguous", size=0x200000)
    if m:
        row("NVIDIA pin calls per registration: 1", f"{m['pin_calls']} (unpins {m['unpin_calls']})",
            m["pin_calls"] == 1, m["pin_calls"], lambda v: v == 1, lambda v: f"{v:g}")
    for s in (0x200000, 0x40000000):
        a = find(cases, kind="module", case="one-pin", layout="contiguous", size=s)
        b = find(cases, kind="module", case="probe-then-pin", layout="contiguous", size=s)
        if a and b:
            r = a["register_ns"] / b["register_ns"]
            row(f"registration time {human(s)} <= 0.5x probe-then-pin", f"{r:.2f}x", r <= 0.5, r,
                lambda v: v <= 0.5, lambda v: f"{v:.2f}x")
    # The module's own part is judged on its own work (the cost model off: see "The module's own
    # work"); the same ratio with the model on, which the emulator's slowdown after each long
    # NVIDIA call inflates for the floor as much, stands beside it.
    for layout in ("contiguous", "fragmented"):
        worst = worst_on = None
        for c in cases:
            if c.get("kind") == "module" and c.get("case") == "one-pin" and c.get("layout") == layout:
                f = find(cases, kind="floor", layout=layout, size=c["size"])
                if not f:
                    continue
                r = c["overhead_ns"] / f["total_ns"]
                if worst_on is None or r > worst_on[0]:
                    worst_on = (r, c["size"])
                m, _ = own_work(cases, layout, c["size"])
                if m:
                    r = m["overhead_ns"] / f["total_ns"]
                    if worst is None or r > worst[0]:
                        worst = (r, c["size"])
        if worst:
            row(f"module overhead <= 2% of the floor ({layout}, worst size)",
                f"{worst[0]:.1%} at {human(worst[1])} (its own work, cost model off, / the floor); with the "
                f"model on, {worst_on[0]:.1%} at {human(worst_on[1])}", worst[0] <= 0.02, worst[0],
                lambda v: v <= 0.02, lambda v: f"{v:.1%}")
        elif worst_on:
            row(f"module overhead <= 2% of the floor ({layout}, worst size)",
                f"{worst_on[0]:.1%} at {human(worst_on[1])}", worst_on[0] <= 0.02, worst_on[0],
                lambda v: v <= 0.02, lambda v: f"{v:.1%}")
    own = [m for m, _ in (own_work(cases, "contiguous", s) for s in
                          sorted({c["size"] for c in cases if c.get("case") == "model-off"})) if m]
    on = [c for c in cases if c.get("kind") == "module" and c.get("case") == "one-pin"
          and c.get("layout") == "contiguous"]
    if own and on and f_emu:
        # Per registration: the smallest buffer, one page, where no per-page work adds to it; the
        # worst size beside it, and the same with the model on.
        one = min(own, key=lambda c: c["size"])
        w = max(own, key=lambda c: c["overhead_ns"])
        one_on = min(on, key=lambda c: c["size"])
        row("module's own cost per registration <= 5 us native-equivalent (64 KiB; worst size beside)",
            f"{native_us(one['overhead_ns'], f_emu)} us ({us(one['overhead_ns'])} us / factor {f_emu:.1f}, cost "
            f"model off); {native_us(w['overhead_ns'], f_emu)} us at {human(w['size'])}; with the model on, "
            f"{native_us(one_on['overhead_ns'], f_emu)} us", one["overhead_ns"] / f_emu <= 5000,
            one["overhead_ns"] / f_emu / 1000, lambda v: v <= 5, lambda v: f"{v:.2f} us")
    off, on = live_change(cases, "-model-off"), live_change(cases, "")
    if off or on:
        r, text = off or on
        if off and on:
            text += f" (cost model off); with the model on, {on[1]}"
        row("module overhead with 10 000 live registrations within 5% of 1", text, abs(r) <= 0.05, r,
            lambda v: abs(v) <= 0.05, lambda v: f"{v:+.1%}")
    mem, rel = find(cases, kind="memory"), find(cases, kind="memory-released")
    per_class = class_bytes(cases)
    if mem and per_class:
        # Judged on the objects each size class gained per registration, rounded to whole
        # objects: a registration holds whole objects, and the fractions are the rest of the
        # kernel allocating from the same caches meanwhile. The slab caches' byte totals, which
        # also move by whole slabs of other caches, beside it.
        got, detail = per_class
        r = got / mem["computed_bytes"] - 1
        totals = f"; caches' totals: {mem['measured_bytes']} grown" + (
            f", {rel['released_bytes']} given back" if rel else "")
        row("bytes held, measured from the allocator, within 10% of the computed figure",
            f"{got} ({detail}), {mem['computed_bytes']} computed ({r:+.1%}){totals}", abs(r) <= 0.10, r,
            lambda v: abs(v) <= 0.10, lambda v: f"{v:+.1%}")
    else:
        row("bytes held, measured from the allocator, within 10% of the computed figure", "not measured", False)
    h = find(cases, kind="held", case="one-pin", layout="contiguous", size=0x40000000)
    if h:
        entries = h["sg_entries"]
        row("1 GiB contiguous: 1 sg entry, <= 1 KiB held", f"{entries} entry, {h['bytes']} bytes",
            entries == 1 and h["bytes"] <= 1024, h["bytes"], lambda v: entries == 1 and v <= 1024,
            lambda v: f"{v:g} bytes")
    mod, flo = scaling(cases, "threads", 0), scaling(cases, "floor-threads", 0)
    core = scaling(cases, "floor-core-lock-threads", 0)
    if mod:
        r = mod[1] / mod[0]
        ctl = f"; the floor's own: {flo[1] / flo[0]:.2f}x" if flo else ""
        ctl += f"; the floor with its pins under ib_core's acquire lock: {core[1] / core[0]:.2f}x" if core else ""
        row("2 threads >= 1.7x 1 thread (cost model off)", f"{r:.2f}x{ctl}", r >= 1.7, r, lambda v: v >= 1.7,
            lambda v: f"{v:.2f}x")
    return rows


def targets(boots):
    """The targets judged on the boots' figures: on the one boot's, or on the median of several
    boots', where a target that some boots meet and others miss is "not settled"."""
    per = [target_rows(b) for b in boots]
    out = []
    for name in dict.fromkeys(r["name"] for rows in per for r in rows):
        rs = [r for rows in per for r in rows if r["name"] == name]
        if len(boots) == 1:
            out.append(f"| {name} | {rs[0]['text']} | {'met' if rs[0]['ok'] else 'missed'} |")
            continue
        oks = {r["ok"] for r in rs}
        some = "" if len(rs) == len(boots) else f" (in {len(rs)} of the {len(boots)} boots)"
        if any(r["x"] is None for r in rs):
            verdict = "not settled" if len(oks) > 1 else ("met" if oks == {True} else "missed")
            out.append(f"| {name} | {'; '.join(r['text'] for r in rs)}{some} | {verdict} |")
            continue
        rs.sort(key=lambda r: r["x"])
        med = statistics.median(r["x"] for r in rs)
        fmt, ok = rs[0]["fmt"], rs[0]["test"](med)
        # Settled when every boot is on the median's side of the bound.
        verdict = ("met" if ok else "missed") if oks == {ok} else "not settled"
        text = (f"**{fmt(med)}**, the median of {len(rs)} boots{some} (range {fmt(rs[0]['x'])} to "
                f"{fmt(rs[-1]['x'])}); the median boot: {rs[(len(rs) - 1) // 2]['text']}")
        out.append(f"| {name} | {text} | {verdict} |")
    return "| target | measured | |\n|---|---|---|\n" + "\n".join(out) + "\n"


def calibration_text(cases):
    c = find(cases, kind="calibration")
    if not c:
        return "Calibration: none (an older bench).\n"
    text = (f"Calibration (`tests/bench/calibrate.c`, {c['rounds']} rounds of small allocations and mutex round "
            f"trips, best of 5): {c['native_best_ns'] / 1e6:.1f} ms natively on the host (median "
            f"{c['native_median_ns'] / 1e6:.1f}), {c['vm_best_ns'] / 1e6:.1f} ms in the VM (median "
            f"{c['vm_median_ns'] / 1e6:.1f}"
            + (f"; run {c['vm_runs']}, the first that agreed with the one before within 10%" if "vm_runs" in c else "")
            + f"): **the emulator's factor is {factor(cases):.1f}x**. The cost model's "
            f"scale: {cost_pct(cases)}% of the public figures.")
    e = find(cases, kind="calibration-end")
    if e and e.get("vm_best_ns"):
        drift = e["vm_best_ns"] / c["vm_best_ns"] - 1
        text += (f" The same run at the end of the boot: {e['vm_best_ns'] / 1e6:.1f} ms ({drift:+.0%})"
                 + (": **the emulator's speed moved during the boot, so the figures are less certain than "
                    "their digits**" if abs(drift) > 0.2 else "") + ".")
    return text + "\n"


def boots_text(boots, dropped):
    """The boots behind the figures: each one's factor and how far the emulator's speed moved
    during it; the ones left out for that."""
    out = [f"Figures over {len(boots)} boots, each booted afresh: every figure below is the median of the "
           "boots' figures, followed in brackets by their range where the boots differ (tables with no range "
           "are medians too); every target is judged on its median, and is \"not settled\" where some boots "
           f"meet it and others miss it. A boot whose emulator speed moved by more than {MAX_DRIFT:.0%} between "
           "its first and last calibration is booted again and not judged.\n",
           "| boot | the emulator's factor | speed moved during the boot | |", "|---|---|---|---|"]
    for n, (cases, judged) in enumerate([(b, True) for b in boots] + [(b, False) for b in dropped], 1):
        f, d = factor(cases), drift(cases)
        out.append(f"| {n} | {f'{f:.1f}x' if f else '-'} | {f'{d:+.0%}' if d is not None else '-'} "
                   f"| {'judged' if judged else 'not judged'} |")
    return "\n".join(out) + "\n\n"


def section(title, boots, dropped=()):
    cases = merge_boots(boots)
    info = find(cases, kind="info")
    kernel = info.get("kernel", "?") if info else "?"
    head = f"{title}: `{kernel}`.\n\n"
    if len(boots) > 1 or dropped:
        head += boots_text(boots, dropped) + "Medians: "
    return (head + calibration_text(cases) + "\n" + tables(cases)
            + "\n### Targets\n\n" + targets(boots))


def main():
    args, logs = sys.argv[1:], []
    if len(args) == 2 and args[0] == "--drift":
        d = drift(parse(args[1]))
        print("unknown" if d is None else f"{d:+.0%}")
        sys.exit(1 if d is not None and abs(d) > MAX_DRIFT else 0)
    while args and args[0] in ("--stock", "--test"):
        if len(args) < 2:
            sys.exit(__doc__)
        logs.append((args[0][2:], args[1]))
        args = args[2:]
    if not logs or len(args) not in (1, 2):
        sys.exit(__doc__)
    out_dir = args[0]
    runs = {}
    for kernel, log in logs:
        cases = parse(log)
        if not cases:
            sys.exit(f"no BENCH lines in {log}")
        for c in cases:
            c["boot"] = kernel
        runs.setdefault(kernel, []).append(cases)
    os.makedirs(out_dir, exist_ok=True)
    titles = {"stock": "Debian's own kernel, the production configuration",
              "test": "The test kernel, with KASAN, lockdep and kmemleak"}
    texts = {}
    for kernel, boots in runs.items():
        judged = [b for b in boots if drift(b) is None or abs(drift(b)) <= MAX_DRIFT]
        dropped = [b for b in boots if not any(b is j for j in judged)]
        if not judged:
            sys.exit(f"every boot of the {kernel} kernel drifted by more than {MAX_DRIFT:.0%}: nothing to judge")
        with open(os.path.join(out_dir, f"bench-{kernel}.jsonl"), "w") as f:
            for n, cases in enumerate(boots, 1):
                for c in cases:
                    c["boot_number"] = n
                    c["judged"] = any(cases is b for b in judged)
                    line = json.dumps(c, sort_keys=True)
                    print(line)
                    f.write(line + "\n")
        plots(merge_boots(judged), out_dir, kernel)
        texts[kernel] = section(titles[kernel], judged, dropped)
        print()
        print(texts[kernel])
    if len(args) == 2:
        md = args[1]
        doc = open(md).read()
        for kernel, text in texts.items():
            begin, end = f"<!-- bench:{kernel}:begin -->", f"<!-- bench:{kernel}:end -->"
            if begin not in doc or end not in doc:
                sys.exit(f"{md} has no {begin} ... {end}")
            head, rest = doc.split(begin, 1)
            _, tail = rest.split(end, 1)
            doc = head + begin + "\n" + text + "\n" + end + tail
        with open(md, "w") as f:
            f.write(doc)
        print(f"rewrote the figures of {', '.join(texts)} in {md}")


if __name__ == "__main__":
    main()
