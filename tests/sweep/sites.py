#!/usr/bin/env python3
"""List the failure sites of nv_peer_mem.ko, from its machine code.

A failure site is a call instruction of the module into a function outside it that can fail
(tests/sweep/imports.txt says which ones can, and why the others cannot). Its key is the
return address as a kernel stack trace prints it, "function+0xoffset": the sweep
(tests/scenarios/30-sweep.py) attributes every failure it injects to the innermost
nv_peer_mem frame of the stack, which is that key. A call that leaves the module by a tail
call (jmp) has no frame of its own: the calls of the function that makes it are the sites.

    sites.py KO [IMPORTS]     writes the sites, one per line: key, class, callee, function
    sites.py --check KO       prints "PASS sweep:imports-classified" or FAIL with the
                              functions imports.txt does not classify

Uses objdump (binutils) and, when found, llvm-cxxfilt to show Rust names readably.
"""
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FUNC = re.compile(r"^(?P<addr>[0-9a-f]+) <(?P<name>[^>]+)>:$")
INSN = re.compile(r"^\s*(?P<addr>[0-9a-f]+):\s+(?P<op>\S+)(?:\s+(?P<args>.*))?$")
DIRECT = re.compile(r"^[0-9a-f]+ <(?P<target>[^>+]+)>$")
RELOC = re.compile(r"^\s*[0-9a-f]+: R_X86_64_(?:PLT32|PC32)\s+(?P<sym>[^+\s-]+)")


def load_imports(path):
    rules = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        regex, cls, why = (line.split(None, 2) + [""])[:3]
        rules.append((re.compile(regex, re.I), cls, why))
    return rules


def classify(rules, sym):
    for regex, cls, _ in rules:
        if regex.search(sym):
            return cls
    return None


def disassemble(ko):
    """objdump's listing of the module, with its relocations."""
    return subprocess.run(["objdump", "-dr", "--no-show-raw-insn", ko],
                          check=True, capture_output=True, text=True).stdout


def calls(listing):
    """(function, key, op, target) for every call or jmp to a function: its relocation's symbol
    (calls between the module's object files and out of it), or the function objdump names
    (calls inside one object file, resolved at compile time). The key is the address after
    the instruction, the return address a stack trace shows."""
    func, start, pending = None, 0, None

    def flush(next_addr):
        if pending:
            op, addr, target = pending
            if target:
                yield func, f"{func}+0x{next_addr - start:x}", op, target

    for line in listing.splitlines():
        m = FUNC.match(line)
        if m:
            yield from flush(int(m.group("addr"), 16))
            func, start, pending = m.group("name"), int(m.group("addr"), 16), None
            continue
        m = RELOC.match(line)
        if m:
            if pending and pending[0]:
                pending = (pending[0], pending[1], m.group("sym"))
            continue
        m = INSN.match(line)
        if not m or not func:
            continue
        addr = int(m.group("addr"), 16)
        yield from flush(addr)
        pending = None
        op = m.group("op")
        if op.startswith("call") or op.startswith("jmp"):
            d = DIRECT.match((m.group("args") or "").strip())
            pending = ("call" if op.startswith("call") else "jmp", addr, d.group("target") if d else None)
    # The last instruction of the file ends no call worth a key.


def undefined(ko):
    out = subprocess.run(["nm", "-u", ko], check=True, capture_output=True, text=True).stdout
    return {l.split()[-1] for l in out.splitlines() if l.strip()}


def demangle(names):
    tool = shutil.which("llvm-cxxfilt") or shutil.which("llvm-cxxfilt-19") or \
        (os.path.exists("/usr/lib/llvm-19/bin/llvm-cxxfilt") and "/usr/lib/llvm-19/bin/llvm-cxxfilt")
    names = list(names)
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True,
                         text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


# Sections whose relocations point at code for the kernel's bookkeeping (unwinding, IBT,
# patching, exception and bug tables): they make no function reachable.
META = re.compile(r"orc|ibt|mcount|patchable|call_sites|return_sites|retpoline|static_call|"
                  r"jump_table|bug_table|ex_table|altinstr|kcfi|discard|smp_locks|note|debug")
CODE = re.compile(r"^\.(init\.|exit\.)?text")


def readelf(ko, flag):
    return subprocess.run(["readelf", flag, "-W", ko], check=True, capture_output=True,
                          text=True).stdout.splitlines()


def kunit_code(names):
    """The functions of the module's KUnit suites (`mod tests` in src/, kernels with
    `nvpm_kunit`): KUnit calls them when the module loads, but not in the sweep's boot
    (vm/init filters them out), and they are no failure site of the module's."""
    shown = demangle(names)
    return {n for n in names if "::tests::" in shown[n] or re.search(r"[a-z_]5tests[0-9]", n)}


def reachable(ko, listing, section_headers):
    """Names of the functions something can call: those whose address is stored in data
    (init and exit through this_module, ops tables, parameters), and those these reach; the
    KUnit suites and what only they reach left out."""
    secnames, funcs, edges, roots = {}, [], {}, set()
    for line in section_headers:
        m = re.match(r"^\s*\[\s*(\d+)\]\s+(\S+)", line)
        if m:
            secnames[m.group(1)] = m.group(2)
    for line in readelf(ko, "-s"):
        m = re.match(r"^\s*\d+:\s+([0-9a-f]+)\s+(\d+)\s+FUNC\s+(\w+)\s+\w+\s+(\d+)\s+(\S+)", line)
        if m:
            value, size, _bind, ndx, name = m.groups()
            # Global binding means nothing here: a module's functions are reached only through
            # the pointers it hands the kernel (this_module, ops tables, parameters).
            funcs.append((secnames.get(ndx, ""), int(value, 16), int(size), name))

    def function_at(sec, at):
        for fsec, fval, fsize, fname in funcs:
            if fsec == sec and fval <= at < fval + max(fsize, 1):
                return fname
        return None

    relsec = None
    for line in readelf(ko, "-r"):
        m = re.match(r"^Relocation section '\.rela(\S+)'", line)
        if m:
            relsec = m.group(1)
            continue
        m = re.match(r"^([0-9a-f]+)\s+[0-9a-f]+\s+(R_X86_64_\w+)\s+[0-9a-f]+\s+(\S+)"
                     r"(?:\s+([+-])\s+([0-9a-f]+))?", line)
        if not m or not relsec:
            continue
        off, rtype, sym, sign, addend = m.groups()
        addend = int(addend or "0", 16) * (-1 if sign == "-" else 1)
        if sym.startswith("."):
            # A section symbol: the function at that offset (PC-relative ones point 4 before).
            target = function_at(sym, addend + (4 if rtype in ("R_X86_64_PC32", "R_X86_64_PLT32") else 0))
        else:
            target = sym
        if not target:
            continue
        if CODE.match(relsec):
            src = function_at(relsec, int(off, 16))
            if src:
                edges.setdefault(src, set()).add(target)
        elif not META.search(relsec):
            roots.add(target)
    # References inside one object file are resolved at compile time, without a relocation:
    # objdump names their target ("call 3da2 <f>", "lea ...(%rip)  # 3da2 <f>"). Where a
    # relocation follows the instruction, the name is only its placeholder's (often the next
    # function's, after a tail call at the end of one): the relocation, above, is the target.
    func, names = None, []

    def add(names):
        for target in names:
            if target != func:
                edges.setdefault(func, set()).add(target)

    for line in listing.splitlines():
        m = FUNC.match(line)
        if m:
            add(names)
            func, names = m.group("name"), []
        elif func and re.match(r"^\s*[0-9a-f]+: R_X86_64_", line):
            names = []
        elif func:
            add(names)
            names = re.findall(r"<([^>+]+)>", line)
    add(names)
    tests = kunit_code({f for _, _, _, f in funcs})
    seen, todo = set(tests), [r for r in roots if r not in tests]
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        todo.extend(edges.get(f, ()))
    return seen - tests


def sites(ko, rules):
    """(sites, unclassified imports, section headers): sites as (key, class, callee, function)."""
    ext = undefined(ko)
    listing = disassemble(ko)
    section_headers = readelf(ko, "-S")
    live = reachable(ko, listing, section_headers)
    all_calls = [c for c in calls(listing) if c[0] in live]
    unclassified = sorted({t for _, _, _, t in all_calls if t in ext and classify(rules, t) is None})
    # Functions of the module that leave it by a tail call into a fallible function.
    tail = {}

    def resolve(target):
        """(class, callee outside the module) of a call to target; class None: not fallible."""
        if target in ext:
            return classify(rules, target), target
        return tail.get(target, (None, None))

    changed = True
    while changed:
        changed = False
        for func, _, op, target in all_calls:
            if op != "jmp" or func in tail:
                continue
            cls, callee = resolve(target)
            if cls and cls != "-":
                tail[func] = (cls, callee)
                changed = True
    found = []
    for func, key, op, target in all_calls:
        cls, callee = resolve(target)
        if op == "call" and cls and cls != "-":
            found.append((key, cls, callee, func))
    return found, unclassified, section_headers


def main():
    args = sys.argv[1:]
    check = args[:1] == ["--check"]
    if check:
        args = args[1:]
    if not args:
        sys.exit(__doc__)
    ko = args[0]
    rules = load_imports(args[1] if len(args) > 1 else os.path.join(HERE, "imports.txt"))
    found, unclassified, section_headers = sites(ko, rules)
    if check:
        if unclassified:
            print(f"FAIL sweep:imports-classified: not in tests/sweep/imports.txt: {' '.join(unclassified)}")
        else:
            print(f"PASS sweep:imports-classified")
        return
    # The size of the module's .text, for the sweep's stack filter once it is loaded.
    for line in section_headers:
        m = re.match(r"^\s*\[\s*\d+\]\s+\.text\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            print(f"# text_size 0x{int(m.group(1), 16):x}")
    names = demangle({f for _, _, _, f in found} | {c for _, _, c, _ in found})
    for key, cls, callee, func in found:
        print(f"{key}\t{cls}\t{names.get(callee, callee)}\t{names.get(func, func)}")
    for u in unclassified:
        print(f"# unclassified import (add it to tests/sweep/imports.txt): {u}", file=sys.stderr)


if __name__ == "__main__":
    main()
