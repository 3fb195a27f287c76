"""make bench's SVG plots, drawn without a third-party library: log-log line plots of the
figures against buffer size. Used by report.py.
"""
import math
import os


def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return str(n)


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


def plots(cases, out_dir, kernel):
    def series(kind, case, key, layout="contiguous", scale=1e-3):
        return [(c["size"], c[key] * scale) for c in cases
                if c.get("kind") == kind and c.get("case") == case and c.get("layout") == layout and key in c]

    svg_plot(os.path.join(out_dir, f"registration-time-{kernel}.svg"),
             f"Registration and deregistration time ({kernel} kernel)",
             "buffer size (contiguous)", "microseconds (log)",
             [("module, one pin", series("module", "one-pin", "total_ns")),
              ("module, probe-then-pin", series("module", "probe-then-pin", "total_ns")),
              ("floor (P2P calls only)", series("floor", "floor", "total_ns")),
              ("module overhead", series("module", "one-pin", "overhead_ns")),
              ("floor's sg fill", series("floor", "floor", "sg_fill_ns"))])
    svg_plot(os.path.join(out_dir, f"sg-entries-{kernel}.svg"), "sg entries and bytes held per registration",
             "buffer size (contiguous)", "count / bytes (log)",
             [("entries, coalesced", series("held", "one-pin", "sg_entries", scale=1)),
              ("entries, one per page", series("held", "per-page-sg", "sg_entries", scale=1)),
              ("bytes held, coalesced", series("held", "one-pin", "bytes", scale=1)),
              ("bytes held, one per page", series("held", "per-page-sg", "bytes", scale=1))])
