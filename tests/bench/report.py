#!/usr/bin/env python3
"""Turn make bench's "BENCH key=value..." lines (from the VM's console log) into JSON lines, a
readable table, SVG plots and the figures section of Documentation/performance.md.

usage: report.py CONSOLE_LOG OUT_DIR [PERFORMANCE_MD]
Writes OUT_DIR/bench.jsonl and OUT_DIR/*.svg; prints the JSON lines and the table; rewrites
the part of PERFORMANCE_MD between "<!-- bench:begin -->" and "<!-- bench:end -->".
"""
import json
import math
import os
import re
import sys

PHASES = ["acquire", "get_pages", "dma_map", "dma_unmap", "put_pages", "release"]
FLOOR_PHASES = ["pin", "dma_map", "sg_fill", "dma_unmap", "unpin"]


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
    cases = []
    for line in open(log, errors="replace"):
        line = line.rstrip("\r\n")
        if not line.startswith("BENCH "):
            continue
        body = line[len("BENCH "):]
        head, *runs = re.split(r"\bbench (?=tag=)", body)
        head = re.sub(r"\bfloor (?=va=)", "", head)
        case = parse_kv(head)
        runs = [parse_kv(r) for r in runs if r.strip()]
        if case.get("kind") == "threads":
            case["runs"] = runs
        elif runs:
            case.update({k: v for k, v in runs[0].items() if k not in case})
        cases.append(derive(case))
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
    elif kind == "threads":
        runs = c.get("runs", [])
        if runs:
            iters = sum(r["iters"] for r in runs)
            wall = max(r["end_ns"] for r in runs) - min(r["start_ns"] for r in runs)
            c["registrations_per_s"] = round(iters * 1e9 / wall, 1) if wall else 0
    return c


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return str(n)


def us(ns):
    return f"{ns / 1000:.1f}"


def cost_pct(cases):
    info = [c for c in cases if c.get("kind") == "info" and "cost_scale_pct" in c]
    return info[0]["cost_scale_pct"] if info else 100


def find(cases, **kw):
    for c in cases:
        if all(c.get(k) == v for k, v in kw.items()):
            return c
    return None


def tables(cases):
    """The markdown tables and the target checks."""
    out = []
    sizes = sorted({c["size"] for c in cases if c.get("kind") == "module" and c.get("case") == "one-pin"
                    and c.get("layout") == "contiguous"})
    out.append("### Registration (contiguous buffers), microseconds per operation\n")
    out.append("| size | register | deregister | inside NVIDIA | module overhead | floor | floor overhead "
               "| overhead / floor | probe-then-pin register | one-pin / probe-then-pin | pin calls (probe-then-pin) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in sizes:
        m = find(cases, kind="module", case="one-pin", layout="contiguous", size=s)
        f = find(cases, kind="floor", layout="contiguous", size=s)
        p = find(cases, kind="module", case="probe-then-pin", layout="contiguous", size=s)
        ratio = m["register_ns"] / p["register_ns"] if p else float("nan")
        ovf = m["overhead_ns"] / f["total_ns"] if f else float("nan")
        out.append(f"| {human(s)} | {us(m['register_ns'])} | {us(m['deregister_ns'])} | {us(m['nvidia_ns'])} "
                   f"| {us(m['overhead_ns'])} | {us(f['total_ns']) if f else '-'} | {us(f['overhead_ns']) if f else '-'} "
                   f"| {ovf:.1%} | {us(p['register_ns']) if p else '-'} | {ratio:.2f} "
                   f"| {m['pin_calls']} ({p['pin_calls'] if p else '-'}) |")
    out.append("")
    out.append("### Phases of one registration (one-pin, contiguous), microseconds\n")
    out.append("| size | " + " | ".join(PHASES) + " |")
    out.append("|---|" + "---|" * len(PHASES))
    for s in sizes:
        m = find(cases, kind="module", case="one-pin", layout="contiguous", size=s)
        out.append(f"| {human(s)} | " + " | ".join(us(m[p + '_ns']) for p in PHASES) + " |")
    out.append("")
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
    thr = [c for c in cases if c.get("kind") == "threads"]
    if thr:
        out.append("### Threads (2 MiB buffers, one each), registrations per second\n")
        out.append("| cost model | 1 thread | 2 threads | speed-up |")
        out.append("|---|---|---|---|")
        for pct in (cost_pct(cases), 0):
            one = find(cases, kind="threads", case="1-thread", cost_pct=pct)
            two = find(cases, kind="threads", case="2-threads", cost_pct=pct)
            if one and two and "registrations_per_s" in one and "registrations_per_s" in two:
                label = "on (NVIDIA serializes under its API lock)" if pct else "off (module alone)"
                out.append(f"| {label} | {one['registrations_per_s']} | {two['registrations_per_s']} "
                           f"| {two['registrations_per_s'] / one['registrations_per_s']:.2f}x |")
        out.append("")
    l1 = find(cases, kind="module", case="live-1")
    l2 = find(cases, kind="module", case="live-10000")
    if l1 and l2:
        out.append("### Live registrations (2 MiB, contiguous), microseconds\n")
        out.append("| live registrations | total | module overhead |")
        out.append("|---|---|---|")
        out.append(f"| 1 | {us(l1['total_ns'])} | {us(l1['overhead_ns'])} |")
        out.append(f"| 10 000 | {us(l2['total_ns'])} | {us(l2['overhead_ns'])} |")
        out.append("")
    inv = [c for c in cases if c.get("kind") == "invalidate"]
    if inv:
        out.append("### Invalidation latency (cudaFree until the free callback returned)\n")
        out.append("| size | microseconds |")
        out.append("|---|---|")
        for c in inv:
            out.append(f"| {human(c['size'])} | {us(c['invalidate_ns'])} |")
        out.append("")
    return "\n".join(out)


def targets(cases):
    rows = []

    def row(name, value, ok):
        rows.append(f"| {name} | {value} | {'met' if ok else 'missed'} |")

    m = find(cases, kind="module", case="one-pin", layout="contiguous", size=0x200000)
    if m:
        row("NVIDIA pin calls per registration: 1", f"{m['pin_calls']} (unpins {m['unpin_calls']})",
            m["pin_calls"] == 1)
    for s in (0x200000, 0x40000000):
        a = find(cases, kind="module", case="one-pin", layout="contiguous", size=s)
        b = find(cases, kind="module", case="probe-then-pin", layout="contiguous", size=s)
        if a and b:
            r = a["register_ns"] / b["register_ns"]
            row(f"registration time {human(s)} <= 0.5x probe-then-pin", f"{r:.2f}x", r <= 0.5)
    for layout, limit in (("contiguous", 0.05), ("fragmented", 0.10)):
        worst = None
        for c in cases:
            if c.get("kind") == "module" and c.get("case") == "one-pin" and c.get("layout") == layout:
                f = find(cases, kind="floor", layout=layout, size=c["size"])
                if f:
                    r = c["overhead_ns"] / f["total_ns"]
                    if worst is None or r > worst[0]:
                        worst = (r, c["size"])
        if worst:
            row(f"module overhead <= {limit:.0%} of the floor ({layout}, worst size)",
                f"{worst[0]:.1%} at {human(worst[1])}", worst[0] <= limit)
    h = find(cases, kind="held", case="one-pin", layout="contiguous", size=0x40000000)
    if h:
        row("1 GiB contiguous: 1 sg entry, <= 1 KiB held", f"{h['sg_entries']} entry, {h['bytes']} bytes",
            h["sg_entries"] == 1 and h["bytes"] <= 1024)
    for pct in (cost_pct(cases), 0):
        one = find(cases, kind="threads", case="1-thread", cost_pct=pct)
        two = find(cases, kind="threads", case="2-threads", cost_pct=pct)
        if one and two and one.get("registrations_per_s") and two.get("registrations_per_s"):
            r = two["registrations_per_s"] / one["registrations_per_s"]
            row(f"2 threads >= 1.6x 1 thread (cost model {'on' if pct else 'off'})", f"{r:.2f}x", r >= 1.6)
    l1 = find(cases, kind="module", case="live-1")
    l2 = find(cases, kind="module", case="live-10000")
    if l1 and l2:
        r = l2["overhead_ns"] / l1["overhead_ns"] - 1
        row("module overhead with 10 000 live registrations within 10% of 1", f"{r:+.1%}", abs(r) <= 0.10)
    return "| target | measured | |\n|---|---|---|\n" + "\n".join(rows) + "\n"


# ---- SVG plots (no third-party library) ----

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]


def svg_plot(path, title, xlabel, ylabel, series, logy=True):
    """series: [(label, [(x, y), ...])], log-log axes."""
    w, h, ml, mr, mt, mb = 720, 420, 80, 190, 40, 55
    pts = [p for _, s in series for p in s if p[1] > 0]
    if not pts:
        return
    xs = [math.log2(p[0]) for p in pts]
    ys = [math.log10(p[1]) if logy else p[1] for p in pts]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    y0, y1 = (math.floor(min(ys)), math.ceil(max(ys))) if logy else (0, max(ys) * 1.1)
    if x1 == x0:
        x1 += 1
    if y1 == y0:
        y1 += 1

    def px(x):
        return ml + (math.log2(x) - x0) / (x1 - x0) * (w - ml - mr)

    def py(y):
        v = math.log10(y) if logy else y
        return h - mb - (v - y0) / (y1 - y0) * (h - mt - mb)

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
         f'font-size="12"><rect width="{w}" height="{h}" fill="white"/>',
         f'<text x="{w / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
    for e in range(x0, x1 + 1, 2 if x1 - x0 > 10 else 1):
        x = ml + (e - x0) / (x1 - x0) * (w - ml - mr)
        o.append(f'<line x1="{x:.1f}" y1="{mt}" x2="{x:.1f}" y2="{h - mb}" stroke="#ddd"/>')
        o.append(f'<text x="{x:.1f}" y="{h - mb + 16}" text-anchor="middle">{human(1 << e)}</text>')
    if logy:
        for e in range(y0, y1 + 1):
            y = h - mb - (e - y0) / (y1 - y0) * (h - mt - mb)
            o.append(f'<line x1="{ml}" y1="{y:.1f}" x2="{w - mr}" y2="{y:.1f}" stroke="#ddd"/>')
            o.append(f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    o.append(f'<rect x="{ml}" y="{mt}" width="{w - ml - mr}" height="{h - mt - mb}" fill="none" stroke="#444"/>')
    o.append(f'<text x="{(ml + w - mr) / 2}" y="{h - 15}" text-anchor="middle">{xlabel}</text>')
    o.append(f'<text x="18" y="{(mt + h - mb) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 18 {(mt + h - mb) / 2})">{ylabel}</text>')
    for i, (label, s) in enumerate(series):
        col = COLOURS[i % len(COLOURS)]
        s = [p for p in sorted(s) if p[1] > 0]
        if not s:
            continue
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                 % (col, " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)))
        for x, y in s:
            o.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{col}"/>')
        ly = mt + 14 + i * 20
        o.append(f'<line x1="{w - mr + 12}" y1="{ly}" x2="{w - mr + 36}" y2="{ly}" stroke="{col}" stroke-width="2"/>')
        o.append(f'<text x="{w - mr + 42}" y="{ly + 4}">{label}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def plots(cases, out_dir):
    def series(kind, case, key, layout="contiguous", scale=1e-3):
        return [(c["size"], c[key] * scale) for c in cases
                if c.get("kind") == kind and c.get("case") == case and c.get("layout") == layout and key in c]

    svg_plot(os.path.join(out_dir, "registration-time.svg"), "Registration and deregistration time",
             "buffer size (contiguous)", "microseconds (log)",
             [("module, one pin", series("module", "one-pin", "total_ns")),
              ("module, probe-then-pin", series("module", "probe-then-pin", "total_ns")),
              ("floor (P2P calls only)", series("floor", "floor", "total_ns")),
              ("module overhead", series("module", "one-pin", "overhead_ns")),
              ("floor's sg fill", series("floor", "floor", "sg_fill_ns"))])
    svg_plot(os.path.join(out_dir, "sg-entries.svg"), "sg entries and bytes held per registration",
             "buffer size (contiguous)", "count / bytes (log)",
             [("entries, coalesced", series("held", "one-pin", "sg_entries", scale=1)),
              ("entries, one per page", series("held", "per-page-sg", "sg_entries", scale=1)),
              ("bytes held, coalesced", series("held", "one-pin", "bytes", scale=1)),
              ("bytes held, one per page", series("held", "per-page-sg", "bytes", scale=1))])


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    log, out_dir = sys.argv[1], sys.argv[2]
    cases = parse(log)
    if not cases:
        sys.exit(f"no BENCH lines in {log}")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "bench.jsonl"), "w") as f:
        for c in cases:
            line = json.dumps(c, sort_keys=True)
            print(line)
            f.write(line + "\n")
    plots(cases, out_dir)
    text = (f"Cost model scale: {cost_pct(cases)}% of the public figures.\n\n" + tables(cases)
            + "\n### Targets\n\n" + targets(cases))
    print()
    print(text)
    if len(sys.argv) == 4:
        md = sys.argv[3]
        doc = open(md).read()
        begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
        if begin in doc and end in doc:
            head, rest = doc.split(begin, 1)
            _, tail = rest.split(end, 1)
            doc = head + begin + "\n" + text + "\n" + end + tail
            with open(md, "w") as f:
                f.write(doc)
            print(f"rewrote the figures in {md}")


if __name__ == "__main__":
    main()
