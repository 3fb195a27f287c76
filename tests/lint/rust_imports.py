"""Which file of a Rust crate's source tree uses which: the import graph that imports.py checks.

Every `use` (plain, grouped, nested groups, `as`, globs) and every path in code starting with
`crate::`, `$crate::`, `super::`, `self::` or the name of a child module counts. A path is
followed as far as it names modules; the file holding the last module named is the one used.
A path `crate::ITEM` that names no module uses the crate root (ITEM is the root's), except for
a `#[macro_export]` macro, which is the file defining it. `mod x;` declares, it does not use.
Comments and string and character literals are blanked first.

Files map to modules by the usual layout: the crate root is the top-level file that declares
sibling files as modules and that no sibling declares; `a.rs` is `crate::a`, `a/b.rs` and
`a/b/mod.rs` are `crate::a::b`. Without such a root every top-level file is a module of its own.
"""
import pathlib
import re

_LEXEMES = re.compile(r"""//[^\n]*|/\*|(?<!\w)b?r(\#*)"|b?"(?:\\.|[^"\\])*"|b?'(?:\\.[^'\n]*|[^\\'\n])'""", re.S)


def _blank(text, start, end):
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def strip(text):
    """`text` with comments and string and character literals turned into spaces (offsets and
    line numbers stay)."""
    pos = 0
    while m := _LEXEMES.search(text, pos):
        start, end = m.start(), m.end()
        if m.group(0) == "/*":  # block comments nest
            depth, end = 1, start + 2
            while depth and end < len(text):
                if text.startswith("/*", end):
                    depth, end = depth + 1, end + 2
                elif text.startswith("*/", end):
                    depth, end = depth - 1, end + 2
                else:
                    end += 1
        elif m.group(1) is not None:  # raw string: up to the quote and as many hashes
            close = text.find('"' + m.group(1), end)
            end = len(text) if close < 0 else close + 1 + len(m.group(1))
        text = _blank(text, start, end)
        pos = end
    return text


def _inline_modules(text):
    """(start, end, name) of every `mod name { ... }` in stripped `text`."""
    spans = []
    for m in re.finditer(r"\bmod\s+([A-Za-z_]\w*)\s*\{", text):
        depth, i = 0, m.end() - 1
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        spans.append((m.start(), i, m.group(1)))
    return spans


def _scope(spans, pos):
    """The inline modules around offset `pos`, outermost first."""
    return tuple(name for start, end, name in sorted(spans) if start < pos < end)


_USE_TOKEN = re.compile(r"\$?[A-Za-z_]\w*|::|[{},*;]")


def use_paths(tree):
    """The paths (lists of segments) a use tree such as `crate::{a::X, b::{self, Y as Z}}`
    brings in; a path starting with "" is absolute (`::name`)."""
    toks = _USE_TOKEN.findall(tree)
    paths = []

    def parse(i, prefix):
        while i < len(toks):
            tok = toks[i]
            if tok == "{":
                i += 1
                while i < len(toks) and toks[i] != "}":
                    i = parse(i, prefix)
                    if i < len(toks) and toks[i] == ",":
                        i += 1
                return i + 1
            if tok == "*":
                paths.append(prefix)
                return i + 1
            if tok == "::":
                if not prefix:
                    prefix = [""]
                i += 1
                continue
            if tok in (",", "}", ";"):
                break
            prefix = prefix + [tok]
            i += 1
            if i < len(toks) and toks[i] == "::":
                continue
            if i < len(toks) and toks[i] == "as":
                i += 2
            break
        if prefix:
            paths.append(prefix)
        return i

    parse(0, [])
    return paths


def _module_of(rel):
    """The module path of a file, by its place below the source directory."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "mod":
        parts.pop()
    return tuple(parts)


def find_root(src, texts):
    """The crate root among the top-level files, or None."""
    top = {p.stem for p in texts if len(p.parts) == 1}
    declares = {p: set(re.findall(r"(?m)^[^\S\n]*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", t)) & top
                for p, t in texts.items() if len(p.parts) == 1}
    declared = set().union(*declares.values()) if declares else set()
    roots = [p for p, mods in declares.items() if mods and p.stem not in declared]
    if len(roots) > 1:
        raise SystemExit(f"cannot tell the crate root of {src}: " + ", ".join(sorted(map(str, roots))))
    return roots[0] if roots else None


def strip_tests(text):
    """Stripped `text` without its test modules: a `mod` under `#[cfg(nvpm_kunit)]` (the KUnit
    suites, see Kbuild) is built only into the test kernel's module and may look at any part of
    the crate, as tests do; it is no edge of the module's own layering."""
    for m in reversed(list(re.finditer(r"#\[cfg\(nvpm_kunit\)\]", text))):
        for start, end, _ in _inline_modules(text):
            # the module the attribute stands on: only attributes and a visibility between
            if start >= m.end() and re.fullmatch(r"\s*(#\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s*)?",
                                                  text[m.end():start]):
                text = _blank(text, m.start(), end + 1)
                break
    return text


class Crate:
    """The files of a source directory as modules, and what each uses."""

    def __init__(self, src):
        self.src = pathlib.Path(src)
        paths = sorted(self.src.rglob("*.rs"))
        self.texts = {p.relative_to(self.src): strip_tests(strip(p.read_text())) for p in paths}
        self.root = find_root(self.src, self.texts)
        self.names = {rel: str(rel.with_suffix("")) for rel in self.texts}
        self.modules = {}  # module path -> file (inline modules belong to their file)
        self.spans = {}
        for rel, text in self.texts.items():
            base = () if rel == self.root else _module_of(rel)
            self.modules[base] = rel
            self.spans[rel] = _inline_modules(text)
            for start, _, _ in self.spans[rel]:
                self.modules[base + _scope(self.spans[rel], start + 1)] = rel
        self.macros = {}  # #[macro_export] macros live at the crate root
        for rel, text in self.texts.items():
            for name in re.findall(r"#\[macro_export\]\s*(?:#\[[^\]]*\]\s*)*macro_rules!\s*(\w+)", text):
                self.macros[name] = rel

    def resolve(self, segments, here):
        """The file a path used in module `here` leads to, or None (another crate, a local
        name)."""
        first, rest = segments[0], list(segments[1:])
        if first in ("crate", "$crate"):
            module = ()
        elif first in ("self", "super"):
            module, rest = here, list(segments)
        elif first and here + (first,) in self.modules:
            module, rest = here, list(segments)
        else:
            return None
        item = None
        for seg in rest:
            if seg == "self":
                continue
            if seg == "super":
                module = module[:-1]
            elif module + (seg,) in self.modules:
                module += (seg,)
            else:
                item = seg
                break
        if module == () and item in self.macros:
            return self.macros[item]
        return self.modules.get(module)

    def uses(self, rel):
        """The files `rel` uses, itself left out."""
        text = self.texts[rel]
        base = () if rel == self.root else _module_of(rel)
        spans = self.spans[rel]
        found = set()

        def note(segments, pos):
            target = self.resolve(segments, base + _scope(spans, pos))
            if target is not None and target != rel:
                found.add(target)

        for m in re.finditer(r"(?<![\w$])use\s+([^;]*);", text):
            for path in use_paths(m.group(1)):
                note(path, m.start())
            text = _blank(text, m.start(), m.end())  # its paths are done
        path = r"(?<![\w$:])(\$?[A-Za-z_]\w*)((?:\s*::\s*[A-Za-z_]\w*)+)"
        for m in re.finditer(path, text):
            note([m.group(1)] + re.findall(r"[A-Za-z_]\w*", m.group(2)), m.start())
        return sorted(found)

    def graph(self):
        """Each file's name and the names of the files it uses."""
        return {self.names[rel]: [self.names[t] for t in self.uses(rel)] for rel in self.texts}
