#!/usr/bin/env python3
"""Every import in src/ points down: no file imports one that (directly or through others)
imports it back. Reads `use crate::X` and `crate::X::` paths of every src/*.rs file; prints
"PASS src-imports-point-down" or a FAIL line naming each circle."""
import pathlib
import re
import sys

src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "src")
mods = {p.stem: p for p in src.glob("*.rs")}
uses = {}
for name, path in mods.items():
    text = re.sub(r"//[^\n]*", "", path.read_text())  # comments and doc links do not count
    found = set(re.findall(r"\bcrate::([a-z_0-9]+)", text))
    found |= {m for m in re.findall(r"^\s*use ([a-z_0-9]+)::", text, re.M) if m in mods}
    uses[name] = sorted(m for m in found if m in mods and m != name)

# Tarjan's strongly connected components: every component of more than one file is a circle.
index, low, stack, on, circles = {}, {}, [], set(), []


def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in uses[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop()
            on.discard(w)
            comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            circles.append(sorted(comp))


for m in sorted(mods):
    if m not in index:
        visit(m)
if circles:
    desc = "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{a} imports {b}" for a in c for b in uses[a] if b in c) + ")"
        for c in circles)
    print(f"FAIL src-imports-point-down: {desc}")
    sys.exit(1)
print(f"PASS src-imports-point-down: {len(mods)} files, {sum(len(u) for u in uses.values())} imports, no circle")
