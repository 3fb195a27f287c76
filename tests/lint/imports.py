#!/usr/bin/env python3
"""Every import in src/ points down: no file imports one that (directly or through others)
imports it back, the crate root included. What counts as an import: rust_imports.py.

  imports.py [SRC]              "PASS src-imports-point-down: ..." or a FAIL line naming each circle
  imports.py --edges [SRC]      the graph, one "FILE -> FILE" line per import
  imports.py --self-test [SRC]  plants each kind of import the lint must see in a copy of SRC
                                and checks it fails ("PASS/FAIL src-imports-canary:CASE" lines)
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from rust_imports import Crate  # noqa: E402


def circles(uses):
    """The strongly connected components of more than one file (Tarjan's algorithm)."""
    index, low, stack, on, found = {}, {}, [], set(), []

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
                found.append(sorted(comp))

    for m in sorted(uses):
        if m not in index:
            visit(m)
    return found


def check(src):
    """(passed, the result line) for the source directory `src`."""
    crate = Crate(src)
    uses = crate.graph()
    found = circles(uses)
    if found:
        desc = "; ".join(
            " <-> ".join(c) + " (" + ", ".join(f"{a} imports {b}" for a in c for b in uses[a] if b in c) + ")"
            for c in found)
        return False, f"FAIL src-imports-point-down: {desc}"
    root = f" (root {crate.names[crate.root]})" if crate.root else ""
    return True, (f"PASS src-imports-point-down: {len(uses)} files{root}, "
                  f"{sum(len(u) for u in uses.values())} imports, no circle")


def main(args):
    if args[:1] == ["--self-test"]:
        from imports_canary import self_test
        return self_test(pathlib.Path(args[1] if len(args) > 1 else "src"), check)
    if args[:1] == ["--edges"]:
        for name, used in sorted(Crate(args[1] if len(args) > 1 else "src").graph().items()):
            for target in used:
                print(f"{name} -> {target}")
        return 0
    passed, line = check(args[0] if args else "src")
    print(line)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
