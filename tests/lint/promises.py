#!/usr/bin/env python3
"""Every promise has its test.

    promises.py [TOP]          check the tree at TOP (default: the repository this file is in)
    promises.py --self-test    plant an untested errno, mapping and log line in a copy of the
                               docs, and remove a mapping's tests from a copy of tests/: the
                               check must fail on each (prints PASS/FAIL promises-canary)

Reads what Documentation/design.md, Documentation/troubleshooting.md and README.md promise and
looks, in the tests (tests/ without the doubles, the kernel build, the benchmark, the lint and
the Markdown), for a test that names each promise. Comment lines do not count, and a shell
line continued with a backslash counts as one line. Prints one line per category:

  promises:errnos          every errno the docs name is named by a test (its name, its strerror
                           text as busybox prints it, or its negative number: -22, =-22), or
                           is listed below as another program's
  promises:errno-maps      every statement of design.md that names an errno is one of the
                           condition -> errno pairs below, each proven by the test lines named
                           with it, or is listed as not a mapping of the module's
  promises:messages        every line the docs say the module, its service or its build prints
                           is named by a test: its longest literal part, or four words in a row
                           that no other documented line has (two words for shorter lines)
  promises:message-errnos  every row of troubleshooting's "Registration" table (message ->
                           what ibv_reg_mr gets) has a test line naming the message and each
                           errno of the row together
  promises:messages-exist  every documented kernel line of the module is in src/ (a promise of a
                           line the module cannot print is a wrong doc)
  promises:counters        every counter the docs describe is named by a test

"PASS promises:<name>: ..." or "FAIL promises:<name>: <what has no test>"; exit 1 on any FAIL.
"""
import ast
import errno
import pathlib
import re
import shutil
import sys
import tempfile

DOCS = ("Documentation/design.md", "Documentation/troubleshooting.md", "README.md")
# Not tests of the module's promises: the doubles, the test kernel's build, the benchmark, this
# lint (it names every promise), and prose.
NOT_TESTS = ("tests/fakes/", "tests/kernel/", "tests/bench/", "tests/lint/")

# Kernel-internal errnos (include/linux/errno.h), which Python's errno module does not know.
INTERNAL = {"ERESTARTSYS": 512, "ERESTARTNOINTR": 513, "ERESTARTNOHAND": 514, "ENOIOCTLCMD": 515,
            "ERESTART_RESTARTBLOCK": 516, "EPROBE_DEFER": 517, "EOPENSTALE": 518, "ENOPARAM": 519,
            "EBADHANDLE": 521, "ENOTSYNC": 522, "EBADCOOKIE": 523, "ENOTSUPP": 524,
            "ETOOSMALL": 525, "ESERVERFAULT": 526, "EBADTYPE": 527, "EJUKEBOX": 528,
            "EIOCBQUEUED": 529, "ERECALLCONFLICT": 530}
# "the ERESTART family" (design.md): the kernel's restart codes, which a test names one by one.
FAMILIES = {"ERESTART": ("ERESTARTSYS", "ERESTARTNOINTR", "ERESTARTNOHAND", "ERESTART_RESTARTBLOCK")}
# strerror texts as the VM's busybox prints them (lib.py's expect_write_error: Python's strerror, the same glibc texts).
STRERROR = {"EFAULT": "Bad address", "EINVAL": "Invalid argument", "ENOMEM": "Cannot allocate memory",
            "EIO": "I/O error", "EOPNOTSUPP": "Operation not supported", "EBUSY": "busy",
            "EINTR": "Interrupted system call", "ENOENT": "No such file or directory"}
# Errnos the docs name that another program returns, not the module.
OTHERS = {
    "EBADF": "libibverbs' answer to NCCL's and UCX's DMA-BUF probe (troubleshooting.md, NCCL)",
    "EPROTONOSUPPORT": "libibverbs' answer to NCCL's DMA-BUF probe without DMA-BUF support",
    "ENOEXEC": "the kernel's module loader: a module built for another kernel",
    "EADDRINUSE": "the kernel's IOMMU page-table code",
}


def errno_number(name):
    if name in INTERNAL:
        return INTERNAL[name]
    return getattr(errno, name, None)


def is_errno(word):
    return word in INTERNAL or word in FAMILIES or (word in errno.errorcode.values())


ERRNO_WORD = re.compile(r"(?<![A-Za-z0-9_])-?(E[A-Z][A-Z0-9_]+)(?![A-Za-z0-9_])")


def doc_errnos(text):
    return {m.group(1) for m in ERRNO_WORD.finditer(text) if is_errno(m.group(1))}


def errno_tokens(name):
    """Regexes, any of which names the errno on a test line."""
    names = FAMILIES.get(name, (name,))
    out = []
    for n in names:
        out.append(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])")
        if n in STRERROR:
            out.append(re.escape(STRERROR[n]))
        num = errno_number(n)
        if num:
            out.append(r"(?:(?<=[\s=\"'(])|^)-" + str(num) + r"(?![0-9])")
    return out


def names_errno(line, name):
    return any(re.search(t, line) for t in errno_tokens(name))


# ---------------------------------------------------------------------------------------------
# The tests.

def without_docstrings(text):
    """A Python file's text with its docstrings blanked: prose about a check is not the check."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    lines = text.split("\n")
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            for i in range(body[0].lineno - 1, body[0].end_lineno):
                lines[i] = ""
    return "\n".join(lines)


def test_lines(top):
    """{path: [line, ...]} of every test file, comments dropped, continuations joined."""
    out = {}
    base = top / "tests"
    for path in sorted(base.rglob("*")):
        rel = path.relative_to(top).as_posix()
        if not path.is_file() or rel.endswith(".md") or any(rel.startswith(p) for p in NOT_TESTS):
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if path.suffix in (".c", ".h"):
            text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
            text = re.sub(r"//[^\n]*", "", text)
        if path.suffix == ".py":
            text = without_docstrings(text)
        text = re.sub(r"\\\n\s*", " ", text)
        lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        out[rel] = lines
    return out


def find_line(tests, pattern, where=None):
    """(path, line) of the first test line matching the regex, or None."""
    for path, lines in tests.items():
        if where and not re.search(where, path):
            continue
        for ln in lines:
            if re.search(pattern, ln):
                return path, ln
    return None


# ---------------------------------------------------------------------------------------------
# design.md's condition -> errno pairs: (name, the promise in design.md (a regex over its text
# with line breaks as spaces), the test lines that prove it: (file regex, line regex), all of
# which must be found).
MAPS = [
    ("nvidia-einval-declined",
     r"-EINVAL from NVIDIA means \"not GPU memory of this process\": answer 0 silently",
     [(r"bad-inputs/table\.txt", r"inject get_pages -22 1 \| call nv_mem .* acquire \| acquire=0 log=0"),
      (r"scenarios/31-errno-map", r"EINVAL from nvidia in acquire.*\"get_pages -22 1\", \"acquire\", \"acquire=0\", \"err_not_mine\+1\"")]),
    ("nvidia-errno-claimed",
     r"Any other error still means GPU memory: claim it .* reports NVIDIA's errno \(ENOMEM when BAR1 is exhausted\) instead of ib_core's EFAULT",
     [(r"bad-inputs/table\.txt", r"inject get_pages -12 2 \| reg .*\| ENOMEM log=1"),
      (r"scenarios/31-errno-map", r"\"get_pages -12 2\".*get_pages=-12 .*err_nvidia_enomem\+1"),
      (r"scenarios/11-nvidia-errors", r"inject_case\(\"get_pages -5 2\", \"Input/output error\"")]),
    ("put-enomem-retried",
     r"A put that NVIDIA answers with -ENOMEM is tried once more",
     [(r"scenarios/31-errno-map", r"put_case\(\"ENOMEM from put_pages, once: retried, unpinned\", \"\", \"put_pages -12 1\""),
      (r"scenarios/31-errno-map", r"put_case\(\"nv_mem_nc: ENOMEM from put_pages, once: retried, unpinned\", \"cq\", f\"\{PUT\} -12 1\"")]),
    ("freed-before-get_pages-efault",
     r"A free between acquire and get_pages.*`get_pages` then fails with EFAULT and counts `err_freed_during_registration`",
     [(r"scenarios/25-one-pin", r"outcome\(\"free between acquire and get_pages: the registration fails \(EFAULT\)\", \"2\.1 Bad address\"\)"),
      (r"scenarios/25-one-pin", r"nvpm_stat\(\"nv_mem\", \"err_freed_during_registration\"\) == \"1\"")]),
    ("revoked-in-flight-efault",
     r"if revoked it hands the objects to `nvidia_p2p_free_\*`.* and fails with EFAULT",
     [(r"scenarios/18-driver-hazard", r"the registration failed \(the memory was freed under it\)\", grep, r\"\^2\\\.1 Bad address\", out\)")]),
    ("enotsupp-eopnotsupp",
     r"NVIDIA's kernel-internal ENOTSUPP \(524, \"Unknown error 524\"\) becomes EOPNOTSUPP",
     [(r"bad-inputs/table\.txt", r"inject get_pages -524 2 \| reg .*\| EOPNOTSUPP log=1"),
      (r"scenarios/31-errno-map", r"\"get_pages -524 2\".*get_pages=-95 .*err_nvidia_eopnotsupp\+1"),
      (r"scenarios/31-errno-map", r"\"dma_map_pages -524 1\".*dma_map=-95 .*err_mapping\+1")]),
    ("erestart-eintr",
     r"the ERESTART family EINTR",
     [(r"bad-inputs/table\.txt", rf"inject get_pages -{n} 2 \| call nv_mem .*\| acquire=1 get_pages=-4 release=0 log=1")
      for n in (512, 513, 514, 516)]
     + [(r"bad-inputs/table\.txt", r"inject dma_map_pages -512 \| call .*dma_map=-4 "),
        (r"scenarios/31-errno-map", r"for e in \(512, 513, 514, 516\):"),
        (r"scenarios/31-errno-map", r"errno_case\(f\"ERESTART\* \(\{e\}\) from nvidia: EINTR\", f\"get_pages -\{e\} 2\".*get_pages=-4 ")]),
    ("internal-eio",
     r"other internal ones EIO",
     [(r"bad-inputs/table\.txt", r"inject get_pages -517 2 \| reg .*\| EIO log=1"),
      (r"scenarios/31-errno-map", r"\"get_pages -515 2\".*get_pages=-5 ")]),
    ("rmmod-ebusy",
     r"`rmmod` fails with EBUSY while ib_core holds a registration",
     [(r"scenarios/10-rmmod-busy", r"\(\"in use\", \"busy\", \"temporarily unavailable\"\)"),
      (r"scenarios/16-callback-outlives-release", r"if any\(w in out for w in \(\"in use\", \"busy\", \"temporarily unavailable\"\)\):"),
      (r"scenarios/16-callback-outlives-release", r"^    ok\(f\"  because it is in use \(\{out\}\)\"\)")]),
    ("mofed49-default-efault",
     r"without persistent pages `ibv_reg_mr` fails with EFAULT",
     [(r"scenarios/20-mofed49-defaults", r"no_nc = \"ibv_reg_mr fails: 4\.9 skips the extended nv_mem, and there is no nv_mem_nc\""),
      (r"scenarios/20-mofed49-defaults", r"expect_write_error\(\"Bad address\", no_nc, f\"\{IBC\}/ctl\", f\"reg 1 edu0 ")]),
    ("acquire-oom-enomem",
     r"`get_pages` fails that id with ENOMEM, ib_core calls `release`.* and `ibv_reg_mr` fails with ENOMEM",
     [(r"sweep/report\.py", r"\(r\"slab\", r\"\", \{\"12\"\}, \"ENOMEM, as the allocation\"\)"),
      (r"scenarios/12-alloc-failures", r"allocation \{n\} failed and the MR went to another client")]),
    ("acquire-oom-not-efault",
     r"under memory pressure a buffer that is not NVIDIA's at all .* fails with ENOMEM instead of going to a later client or failing with EFAULT",
     [(r"sweep/report\.py", r"\(r\"slab\", r\"\", \{\"12\"\}, \"ENOMEM, as the allocation\"\)")]),
    ("pin-errors-counted-by-errno",
     r"`err_nvidia_einval`, `_enomem`, `_eopnotsupp`, `_eio`, `_other` \| NVIDIA refused to pin, by errno \(ENOMEM: BAR1 exhausted; EOPNOTSUPP includes the kernel's ENOTSUPP, 524\)",
     [(r"scenarios/31-errno-map", r"\"get_pages -22 1 1\".*get_pages=-22 .*err_nvidia_einval\+1"),
      (r"scenarios/31-errno-map", r"\"get_pages -12 2\".*err_nvidia_enomem\+1"),
      (r"scenarios/31-errno-map", r"\"get_pages -95 2\".*get_pages=-95 .*err_nvidia_eopnotsupp\+1"),
      (r"scenarios/31-errno-map", r"\"get_pages -524 2\".*err_nvidia_eopnotsupp\+1"),
      (r"scenarios/31-errno-map", r"\"get_pages -5 2\".*get_pages=-5 .*err_nvidia_eio\+1"),
      (r"scenarios/31-errno-map", r"\"get_pages -16 2\".*get_pages=-16 .*err_nvidia_other\+1")]),
    ("freed-counted",
     r"`err_freed_during_registration` \| the GPU memory was freed while it was being registered \(EFAULT\)",
     [(r"scenarios/25-one-pin", r"nvpm_stat\(\"nv_mem\", \"err_freed_during_registration\"\) == \"1\"")]),
    ("persistent-eopnotsupp-declined",
     r"`nv_mem_nc` declines NVIDIA's EOPNOTSUPP \(95\) as it declines EINVAL",
     [(r"scenarios/31-errno-map", r"nv_mem_nc: EOPNOTSUPP from nvidia in acquire: declined.*f\"\{PERS\} -95 1\", \"acquire\", \"acquire=0\", \"err_not_mine\+1\".*client=\"nv_mem_nc\""),
      (r"scenarios/31-errno-map", r"nv_mem_nc: ENOTSUPP \(524, MIG or vGPU\).*f\"\{PERS\} -524 2\".*get_pages=-95 .*client=\"nv_mem_nc\"")]),
    ("beside-nvidia-peermem-ebusy",
     r"refuses to load while `nvidia_peermem` is loaded: the load fails with EBUSY",
     [(r"scenarios/32-beside-nvidia-peermem", r"modprobe nv_peer_mem fails: EBUSY.*Device or resource busy")]),
]
# Statements of design.md that name an errno without being a mapping of the module's.
NOT_MAPPINGS = [
    (r"from inside the callback they fail with -EIO", "what nvidia.ko does (the doubles follow it)"),
    (r"that errno comes from its stack allocation", "why the put is retried (nvidia.ko's side)"),
]


def statements(text):
    """design.md as statements: paragraphs, list items and table rows, line breaks as spaces."""
    out, cur = [], []
    for line in text.splitlines():
        s = line.strip()
        starts = not s or s.startswith(("- ", "|", "#", "1.", "2.", "3.", "4.", "5.", "```"))
        if starts and cur:
            out.append(" ".join(cur))
            cur = []
        if s.startswith("|"):
            out.append(s)
        elif s:
            cur.append(s)
    if cur:
        out.append(" ".join(cur))
    return out


# ---------------------------------------------------------------------------------------------
# Documented lines.

# Lines the docs quote that the kernel, the module loader, DKMS or dpkg print, not our code.
THEIRS = [r"^Unknown symbol ", r"^disagrees about version", r"^no symbol version", r"^module verification failed",
          r"^unknown parameter", r"^Error! ", r"^dpkg: ", r"dkms\.conf for module nv_peer_mem includes",
          r"^modprobe: ", r"^Peer memory ", r"^version magic", r"^\.gnu\.linkonce",
          r"^end of file on stdin at conffile prompt"]
# Sections of troubleshooting.md whose tables list our lines, and the kind of each.
MESSAGE_SECTIONS = {"Module load": "kernel", "Registration": "kernel", "Invalidation and teardown": "kernel",
                    "Service": "service", "Preflight, DKMS and packaging": "build"}
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…")


def md_sections(text):
    """{### title: body} of a Markdown text."""
    out, title, body = {}, None, []
    for line in text.splitlines():
        m = re.match(r"^#{2,4} (.*)", line)
        if m:
            if title:
                out[title] = "\n".join(body)
            title, body = m.group(1).strip(), []
        else:
            body.append(line)
    if title:
        out[title] = "\n".join(body)
    return out


def spans(cell):
    return [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", cell)]


def clean(msg):
    msg = re.sub(r"^nv_peer_mem: ", "", msg.replace("\\|", "|")).strip()
    return msg


def documented_messages(docs):
    """[(message, kind, errnos of its row or None, where)] of every line the docs promise."""
    found = []
    ts = md_sections(docs["Documentation/troubleshooting.md"])
    for title, kind in MESSAGE_SECTIONS.items():
        for row in ts.get(title, "").splitlines():
            if not row.startswith("|") or row.startswith("|---"):
                continue
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
            if not cells or cells[0] in ("message",):
                continue
            errnos = None
            if title == "Registration" and len(cells) > 1:
                errnos = sorted(doc_errnos(cells[1]))
            for s in spans(cells[0]):
                if len(PLACEHOLDER.sub(" ", s).split()) < 2 and kind == "kernel":
                    continue  # an operation's name in the row's prose, not a line
                found.append((clean(s), kind, errnos, f"troubleshooting.md, {title}"))
    # Lines quoted with their prefix anywhere in the docs, and enable_dbg's.
    for path, text in docs.items():
        for s in re.findall(r"`(nv_peer_mem: [^`]+)`", text):
            found.append((clean(" ".join(s.split())), "kernel", None, path))
    dbg = re.search(r"With `enable_dbg=1` the module also logs.*?\n\n", docs["Documentation/troubleshooting.md"], re.S)
    if dbg:
        for s in spans(dbg.group(0)):
            if len(s.split()) >= 3:
                found.append((clean(s), "kernel", None, "troubleshooting.md, enable_dbg"))
    out, seen = [], set()
    for msg, kind, errnos, where in found:
        if any(re.search(t, msg) for t in THEIRS):
            continue
        # A service line is "nv_peer_mem: <line>" as well: kept once.
        key = msg
        if key in seen:
            continue
        seen.add(key)
        out.append((msg, kind, errnos, where))
    return out


UNTESTED = "tests/lint/untested-promises.txt"


def untested(top):
    """{line: why} of the documented lines known to have no test yet."""
    out = {}
    path = top / UNTESTED
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                msg, _, why = line.partition("\t")
                out[msg] = why
    return out


def fragments(msg):
    return [f.strip(" `") for f in PLACEHOLDER.split(msg) if f.strip(" `")]


def candidates(msg, others):
    """Texts any of which, on a test line, names MSG: its longest literal part, and runs of
    words (four, or two for lines of fewer words) that no other documented line has."""
    frags = fragments(msg)
    if not frags:
        return []
    out = [max(frags, key=len)]
    words_total = sum(len(f.split()) for f in frags)
    n = 3 if words_total >= 6 else 2
    other_text = "\n".join(others)
    for f in frags:
        w = f.split()
        for i in range(len(w) - n + 1):
            run = " ".join(w[i:i + n])
            if run not in other_text:
                out.append(run)
    return out


def names_message(line, cands):
    return any(c in line for c in cands)


def src_formats(top):
    """Regexes of every string literal of src/ (format specifiers match anything)."""
    out = []
    for p in sorted((top / "src").rglob("*")):
        if p.suffix not in (".rs", ".c"):
            continue
        text = p.read_text()
        # C's adjacent literals are one string.
        text = re.sub(r'"\s*\n\s*"', "", text)
        for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', text):
            lit = re.sub(r"^nv_peer_mem: ", "", lit.replace("\\n", "")).replace('\\"', '"').replace("\\'", "'")
            if len(lit) < 12:
                continue
            pieces = re.split(r"\{[^{}]*\}|%[-+ #0-9.]*(?:l|ll|z)?[a-zA-Z]", lit)
            out.append(re.compile(".*".join(re.escape(x) for x in pieces), re.S))
    return out


def in_src(msg, formats):
    """Whether the module can print MSG: a literal of src/ matches it whole, with every
    placeholder of the doc standing for what its format specifier prints. A line the docs
    abbreviate ("... <rest>") needs its longest literal part in a literal."""
    if msg.startswith("..."):
        frag = max(fragments(msg), key=len)
        return any(frag in f.pattern.replace("\\", "") or re.search(re.escape(frag), f.pattern.replace("\\", ""))
                   for f in formats)
    rendered = PLACEHOLDER.sub("X", msg)
    return any(f.fullmatch(rendered) for f in formats)


# ---------------------------------------------------------------------------------------------
# Counters.

def documented_counters(docs):
    out = set()
    for path, text in docs.items():
        for row in text.splitlines():
            if not row.startswith("|"):
                continue
            first = re.split(r"(?<!\\)\|", row)[1]
            for s in spans(first):
                if re.fullmatch(r"(live_registrations|pinned_bytes|registrations|deregistrations|invalidations|err_[a-z_]+)", s):
                    out.add(s)
                elif re.fullmatch(r"_[a-z]+", s) and "err_nvidia_" in first:
                    out.add("err_nvidia" + s)
    return out


# ---------------------------------------------------------------------------------------------

def check(top):
    docs = {d: (top / d).read_text() for d in DOCS}
    tests = test_lines(top)
    results = []

    def result(name, bad, good):
        if bad:
            results.append(f"FAIL promises:{name}: " + "; ".join(bad))
        else:
            results.append(f"PASS promises:{name}: {good}")

    # Errnos.
    named, bad = [], []
    others = sorted({e for text in docs.values() for e in doc_errnos(text)} & set(OTHERS))
    for d, text in docs.items():
        for e in sorted(doc_errnos(text)):
            if e in OTHERS or e in named:
                continue
            hit = next(((p, ln) for p, lines in tests.items() for ln in lines if names_errno(ln, e)), None)
            if hit:
                named.append(e)
            else:
                bad.append(f"{e} ({d}) is named by no test")
    result("errnos", bad, f"{len(named)} errnos, each named by a test ({', '.join(named)}); "
           f"{len(others)} are other programs' ({', '.join(others)})")

    # design.md's errno mappings.
    design = " ".join(docs["Documentation/design.md"].split())
    bad = []
    for name, promise, proofs in MAPS:
        if not re.search(promise, design):
            bad.append(f"{name}: design.md no longer says /{promise}/ (re-point the map)")
            continue
        for where, pattern in proofs:
            if not find_line(tests, pattern, where):
                bad.append(f"{name}: no test line /{pattern}/ in {where}")
    for st in statements(docs["Documentation/design.md"]):
        errs = doc_errnos(st) - set(OTHERS)
        if not errs:
            continue
        if any(re.search(p, st) for _, p, _ in MAPS) or any(re.search(p, st) for p, _ in NOT_MAPPINGS):
            continue
        bad.append(f"design.md maps {', '.join(sorted(errs))} with no test: \"{st[:140]}\"")
    result("errno-maps", bad, f"{len(MAPS)} condition -> errno pairs of design.md, each proven by the tests named "
           f"in tests/lint/promises.py; every statement naming an errno is one of them or none of the module's "
           f"({len(NOT_MAPPINGS)})")

    # Messages.
    msgs = documented_messages(docs)
    texts = [m for m, _, _, _ in msgs]
    debt = untested(top)
    bad, pairs_bad, pairs, owed = [], [], 0, 0
    for msg, kind, errnos, where in msgs:
        cands = candidates(msg, [t for t in texts if t != msg])
        hits = [(p, ln) for p, lines in tests.items() for ln in lines if names_message(ln, cands)]
        if msg in debt:
            if hits:
                bad.append(f"`{msg}` is named by {hits[0][0]} now: take it off {UNTESTED}")
            owed += 1
            continue
        if not hits:
            bad.append(f"`{msg}` ({where})")
            continue
        for e in errnos or []:
            pairs += 1
            if not any(names_errno(ln, e) for _, ln in hits):
                pairs_bad.append(f"`{msg}` -> {e}")
    bad += [f"`{msg}` is listed in {UNTESTED} but documented nowhere" for msg in sorted(set(debt) - set(texts))]
    by_kind = {k: sum(1 for _, kk, _, _ in msgs if kk == k) for k in ("kernel", "service", "build")}
    result("messages", bad, f"{len(msgs)} documented lines ({by_kind['kernel']} of the module, {by_kind['service']} "
           f"of the service, {by_kind['build']} of the build): {len(msgs) - owed} named by a test, {owed} "
           f"listed in {UNTESTED} with the reason")
    result("message-errnos", pairs_bad, f"{pairs} message -> errno pairs of the Registration table, each on one test line")

    # The module's documented lines are the module's.
    formats = src_formats(top)
    bad = [f"`{msg}` ({where}): no format string of src/ prints it"
           for msg, kind, _, where in msgs if kind == "kernel" and not in_src(msg, formats)]
    result("messages-exist", bad, f"{by_kind['kernel']} documented lines of the module, each printed by src/")

    # Counters.
    counters = sorted(documented_counters(docs))
    bad = [c for c in counters if not find_line(tests, r"(?<![a-z_])" + c + r"(?![a-z_])")]
    result("counters", [f"{c} is named by no test" for c in bad], f"{len(counters)} counters, each named by a test")
    return results


def self_test(top):
    """Plant a documented errno mapping and a log line that no test names, in a copy of the
    docs; the check must fail on both, and pass on the copy as it was."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp)
        for d in DOCS:
            (copy / d).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(top / d, copy / d)
        shutil.copytree(top / "tests", copy / "tests", ignore=shutil.ignore_patterns("*.ko", "*.o"))
        shutil.copytree(top / "src", copy / "src")
        shutil.copytree(top / "packaging", copy / "packaging")
        clean_run = check(copy)
        design = copy / "Documentation/design.md"
        design.write_text(design.read_text() + "\nA registration of a zero-length range fails with EXDEV.\n")
        ts = copy / "Documentation/troubleshooting.md"
        text = ts.read_text()
        row = "| `canary line nobody greps for at <va>` | EXDEV | planted by promises.py --self-test | none |\n"
        text = re.sub(r"(### Registration\n.*?\n\|---[^\n]*\n)", lambda m: m.group(1) + row, text, count=1, flags=re.S)
        ts.write_text(text)
        planted = check(copy)
        # The tests of a mapping go: the ERESTART rows of the table and scenario 31's loop.
        table = copy / "tests/bad-inputs/table.txt"
        table.write_text("".join(ln for ln in table.read_text().splitlines(True) if " -51" not in ln))
        sc = copy / "tests/scenarios/31-errno-map.py"
        sc.write_text(sc.read_text().replace("for e in (512, 513, 514, 516):", "for e in ():"))
        lost = check(copy)
    want = {
        "errnos": "EXDEV",
        "errno-maps": "zero-length range fails with EXDEV",
        "messages": "canary line nobody greps for",
    }
    bad = [ln for ln in clean_run if ln.startswith("FAIL")]
    if bad:
        print("FAIL promises-canary: the unplanted copy fails: " + " | ".join(bad))
        return 1
    missed = []
    for cat, text in want.items():
        line = next((ln for ln in planted if ln.startswith(f"FAIL promises:{cat}:") and text in ln), None)
        if not line:
            missed.append(f"{cat} did not fail on '{text}'")
        else:
            print(f"  planted, caught: {line[:160]}")
    line = next((ln for ln in lost if ln.startswith("FAIL promises:errno-maps:") and "erestart-eintr" in ln), None)
    if line:
        print(f"  tests removed, caught: {line[:160]}")
    else:
        missed.append("errno-maps did not fail when the ERESTART -> EINTR tests were removed")
    if missed:
        print("FAIL promises-canary: " + "; ".join(missed))
        return 1
    print("PASS promises-canary: an errno, a mapping and a log line planted in a copy of the docs, and a mapping's "
          "tests removed from a copy of tests/, each fail the check")
    return 0


def main(argv):
    here = pathlib.Path(__file__).resolve().parents[2]
    if argv[1:2] == ["--self-test"]:
        return self_test(here)
    top = pathlib.Path(argv[1]).resolve() if len(argv) > 1 else here
    results = check(top)
    for line in results:
        print(line)
    return 1 if any(line.startswith("FAIL") for line in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
