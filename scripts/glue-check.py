"""The C/Rust boundary of nv_peer_mem: src/glue.h against the Rust declarations (issue 35).

Checks, in SRC (default: the src/ beside this script's directory):
  - every function glue.h declares is declared in src/glue.rs's one extern "C" block (defined
    in a C file) or defined in Rust as #[no_mangle] extern "C" (called by C), and not both;
  - every such Rust declaration or definition named nvpm_* is in glue.h;
  - their argument and return types agree, C types mapped to Rust ones (int -> c_int,
    unsigned int -> c_uint, unsigned long -> c_ulong, size_t -> usize, bool, u32, u64, char ->
    c_char, void * -> *mut c_void, const T * -> *const T, struct xarray * ->
    *mut bindings::xarray, any other struct pointer -> an opaque *mut c_void, T ** -> *mut *mut);
  - no other .rs file of src/ declares an nvpm_* function, every C file includes glue.h and none
    declares an nvpm_* prototype of its own, every C-defined function is defined in a C file.
Prints "PASS glue:declarations: ..." or one "FAIL glue:declarations: ..." line per problem;
exits 1 on any failure. Run by `make modules` (where python3 is present) and by make check
(tests/host-checks.sh, as tests/lint/glue.py).

Run as `python3 scripts/glue-check.py`: no #! line and not executable, so that the packages
shipping it in the DKMS source neither depend on python3 nor carry a script lintian and rpmlint
would flag.

  glue-check.py [SRC]
  glue-check.py --self-test [SRC]   plants a changed argument type (in a copy of glue.rs) and a
                                    function dropped from glue.h (in a copy of src/); each must
                                    fail: "PASS glue-canary" or "FAIL glue-canary: ..."
"""
import pathlib
import re
import shutil
import sys
import tempfile

DEFAULT_SRC = pathlib.Path(__file__).resolve().parent.parent / "src"
NAME = "glue:declarations"

# C scalar types and their Rust spellings.
SCALARS = {
    "int": "c_int", "signed int": "c_int", "unsigned int": "c_uint", "unsigned": "c_uint",
    "long": "c_long", "unsigned long": "c_ulong", "long long": "c_longlong",
    "unsigned long long": "c_ulonglong", "short": "c_short", "unsigned short": "c_ushort",
    "char": "c_char", "signed char": "c_schar", "unsigned char": "c_uchar",
    "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64",
    "s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64",
    "size_t": "usize", "ssize_t": "isize", "bool": "bool", "void": "c_void",
}
# Structures Rust sees through bindings; every other struct is opaque (c_void) to Rust.
BINDINGS_STRUCTS = {"xarray"}


def strip_c(text):
    """C text without comments and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"^\s*#[^\n]*", " ", text, flags=re.M)


def rust_type_of_c(ctype):
    """The Rust spelling of the C type `ctype`, or None when it is not one we map."""
    t = " ".join(ctype.replace("*", " * ").split())
    if not t.endswith("*"):
        base = t.replace("const ", "")
        if base.startswith("struct "):
            return None  # a structure by value: not across this boundary
        return SCALARS.get(base)
    # Pointers: the innermost pointee's const-ness decides *const or *mut for the first level;
    # outer levels (T **) are *mut unless written `* const`.
    parts = t.split("*")
    base, quals = parts[0].strip(), [p.strip() for p in parts[1:-1]] + [""]
    const_base = base.startswith("const ") or base.endswith(" const")
    base = base.replace("const", "").strip()
    if base.startswith("struct "):
        tag = base.split()[1]
        inner = f"bindings::{tag}" if tag in BINDINGS_STRUCTS else "c_void"
    else:
        inner = SCALARS.get(base)
        if inner is None:
            return None
    out = f"*{'const' if const_base else 'mut'} {inner}"
    for q in quals[:-1]:
        out = f"*{'const' if q == 'const' else 'mut'} {out}"
    return out


def split_c_param(param):
    """(type, name) of one C parameter; the name may be absent."""
    param = " ".join(param.replace("*", " * ").split())
    m = re.match(r"^(.*?)\s*\b([A-Za-z_]\w*)$", param)
    if m and m.group(1) and m.group(1).split()[-1] not in ("struct", "unsigned", "signed"):
        if m.group(2) not in SCALARS:
            return m.group(1), m.group(2)
    return param, ""


def header_functions(glue_h):
    """{name: (return type, [argument types])} of glue.h, the types in Rust spelling or
    '?C-TYPE' for one we do not map."""
    out = {}
    text = strip_c(glue_h)
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(nvpm_\w+)\s*\(([^)]*)\)\s*;", text):
        ret, name, params = m.group(1), m.group(2), m.group(3).strip()
        rret = rust_type_of_c(ret)
        rret = "" if rret == "c_void" else (rret or f"?{' '.join(ret.split())}")
        args = []
        if params and params != "void":
            for p in params.split(","):
                ctype, _ = split_c_param(p)
                args.append(rust_type_of_c(ctype) or f"?{ctype}")
        out[name] = (rret, args)
    return out


def norm_rust(t):
    """A Rust type without the paths that do not change it, spaces normalized."""
    t = " ".join(t.split())
    t = re.sub(r"\b(?:core::ffi|kernel::ffi|ffi|core::ffi::c_str)::", "", t)
    t = re.sub(r"\bkernel::bindings::", "bindings::", t)
    t = re.sub(r"\*\s*(const|mut)\s*", r"*\1 ", t)
    return t.strip()


def split_rust_params(params):
    """Argument types of a Rust parameter list `a: T, b: U`."""
    out = []
    for p in [p for p in params.split(",") if p.strip()]:
        _, _, ty = p.partition(":")
        out.append(norm_rust(ty))
    return out


def strip_rust_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def extern_blocks(text):
    """The bodies of the `extern "C" { ... }` blocks of Rust `text` (comments stripped)."""
    text = strip_rust_comments(text)
    out = []
    for m in re.finditer(r'extern\s+"C"\s*\{', text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append(text[m.end():i - 1])
    return out


def rust_fns(body):
    """{name: (return type, [argument types])} of the `fn` items in an extern block body."""
    out = {}
    for m in re.finditer(r"\bfn\s+(\w+)\s*\(([^)]*)\)\s*(?:->\s*([^;]+?))?\s*;", body):
        out[m.group(1)] = (norm_rust(m.group(3) or ""), split_rust_params(m.group(2)))
    return out


def rust_exports(text):
    """{name: (return type, [argument types])} of `#[no_mangle] ... extern "C" fn nvpm_*`."""
    out = {}
    text = strip_rust_comments(text)
    for m in re.finditer(r"#\[(?:unsafe\()?no_mangle\)?\]\s*(?:pub(?:\([\w:]+\))?\s+)?"
                         r"(?:unsafe\s+)?extern\s+\"C\"\s+fn\s+(nvpm_\w+)\s*\(([^)]*)\)"
                         r"\s*(?:->\s*([^{]+?))?\s*\{", text):
        out[m.group(1)] = (norm_rust(m.group(3) or ""), split_rust_params(m.group(2)))
    return out


def show(sig):
    ret, args = sig
    return f"({', '.join(args)})" + (f" -> {ret}" if ret else "")


def compare(name, c_sig, r_sig, where):
    """Lines describing how the glue.h signature `c_sig` and the Rust one `r_sig` differ."""
    (c_ret, c_args), (r_ret, r_args) = c_sig, r_sig
    problems = []
    for what in [a for a in c_args + [c_ret] if a.startswith("?")]:
        problems.append(f"{name}: glue.h uses the C type '{what[1:]}', which has no mapping")
    if problems:
        return problems
    if len(c_args) != len(r_args):
        problems.append(f"{name}: {len(c_args)} arguments in glue.h, {len(r_args)} in {where}")
    else:
        for i, (c, r) in enumerate(zip(c_args, r_args), 1):
            if c != r:
                problems.append(f"{name}: argument {i} is {r} in {where}, {c} in glue.h")
    if c_ret != r_ret:
        problems.append(f"{name}: returns {r_ret or '()'} in {where}, "
                        f"{c_ret or 'void'} in glue.h")
    if len(problems) > 1:  # one line per function
        return [f"{name}: " + "; ".join(p[len(name) + 2:] for p in problems)]
    return problems


def c_defines(c_texts, name):
    """Whether one of the C files defines `name` (a definition, not a prototype)."""
    pat = re.compile(r"^[A-Za-z_][^;{}()]*\b" + name + r"\s*\([^;{]*\)\s*\{", re.M)
    return any(pat.search(strip_c(t)) for t in c_texts.values())


def check(src):
    """The problems found in `src` (empty: the boundary agrees), and a summary."""
    src = pathlib.Path(src)
    problems = []
    try:
        header = header_functions((src / "glue.h").read_text())
        glue_rs = (src / "glue.rs").read_text()
    except OSError as e:
        return [f"cannot read {e.filename}"], ""
    blocks = extern_blocks(glue_rs)
    if len(blocks) != 1:
        problems.append(f"glue.rs has {len(blocks)} extern \"C\" blocks, not one")
    imported = rust_fns(" ".join(blocks))
    exported, rs_texts, c_texts = {}, {}, {}
    for f in sorted(src.rglob("*")):
        name = str(f.relative_to(src))
        if f.suffix == ".rs":
            rs_texts[name] = f.read_text()
            for fn, sig in rust_exports(rs_texts[name]).items():
                exported[fn] = (sig, name)
        elif f.suffix == ".c":
            c_texts[name] = f.read_text()
    for fname, text in rs_texts.items():
        if fname == "glue.rs":
            continue
        for body in extern_blocks(text):
            for name in rust_fns(body):
                if name.startswith("nvpm_"):
                    problems.append(f"{name}: declared in {fname}, outside glue.rs")
    for fname, text in c_texts.items():
        if not re.search(r'^\s*#\s*include\s+"glue\.h"', text, re.M):
            problems.append(f"{fname} does not include glue.h")
        for m in re.finditer(r"^[A-Za-z_][^;{}()=]*\b(nvpm_\w+)\s*\([^;{)]*\)\s*;",
                             strip_c(text), re.M):
            problems.append(f"{m.group(1)}: prototype in {fname}, outside glue.h")
    for name, c_sig in header.items():
        if name in imported and name in exported:
            problems.append(f"{name}: both declared in glue.rs and defined in "
                            f"{exported[name][1]}")
        elif name in imported:
            problems.extend(compare(name, c_sig, imported[name], "glue.rs"))
            if not c_defines(c_texts, name):
                problems.append(f"{name}: declared in glue.h and glue.rs, defined in no C file")
        elif name in exported:
            problems.extend(compare(name, c_sig, exported[name][0], exported[name][1]))
        else:
            problems.append(f"{name}: in glue.h, missing from glue.rs's extern block "
                            "(and not a Rust #[no_mangle] function)")
    for name in imported:
        if name not in header:
            problems.append(f"{name}: declared in glue.rs, missing from glue.h")
    for name, (_, fname) in exported.items():
        if name not in header:
            problems.append(f"{name}: defined in {fname} for C, missing from glue.h")
    summary = (f"{len(header)} functions in glue.h agree with Rust: {len(imported)} defined in "
               f"C and declared in glue.rs's one extern block, {len(exported)} defined in Rust")
    return problems, summary


def report(src):
    problems, summary = check(src)
    for p in problems:
        print(f"FAIL {NAME}: {p}")
    if not problems:
        print(f"PASS {NAME}: {summary}")
    return not problems


def self_test(src):
    """Plants each mismatch in a copy of `src`; both must fail."""
    src = pathlib.Path(src)
    failures = []
    problems, _ = check(src)
    if problems:
        failures.append(f"unmodified {src} already fails ({problems[0]})")
    def plant(tmp, name, file, pattern, repl, flags, what, caught):
        """A copy of src with PATTERN replaced once in FILE: its check must report CAUGHT."""
        copy = pathlib.Path(tmp) / name
        shutil.copytree(src, copy)
        text = (copy / file).read_text()
        planted = re.sub(pattern, repl, text, count=1, flags=flags)
        if planted == text:
            failures.append(f"cannot plant: no {what} in {file}")
        (copy / file).write_text(planted)
        problems, _ = check(copy)
        if not any(p.startswith(caught) for p in problems):
            failures.append(f"{what} planted in {file} passed ({problems})")

    with tempfile.TemporaryDirectory() as tmp:
        # One argument type changed in a copy of glue.rs.
        plant(tmp, "type", "glue.rs", r"(fn nvpm_sg_set\(sg: \*mut c_void, dma: u64, len: )c_uint",
              r"\1u64", 0, "nvpm_sg_set's len as u64", "nvpm_sg_set: argument 3")
        # One function dropped from a copy of glue.h.
        plant(tmp, "dropped", "glue.h", r"^u64 nvpm_now_ns\(void\);\n", "", re.M,
              "nvpm_now_ns dropped", "nvpm_now_ns: declared in glue.rs, missing")
    if failures:
        print(f"FAIL glue-canary: {'; '.join(failures)}")
    else:
        print("PASS glue-canary: a changed argument type in glue.rs and a function dropped from "
              "glue.h each fail")
    return not failures


def main(argv):
    args = argv[1:]
    if args and args[0] == "--self-test":
        return 0 if self_test(args[1] if len(args) > 1 else DEFAULT_SRC) else 1
    if args and args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    return 0 if report(args[0] if args else DEFAULT_SRC) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
