"""imports.py --self-test: each kind of import the lint must see, planted in a copy of the
sources, must make it fail with the circle named; the unmodified copy, and imports it must not
count (a module declaration, comments and strings), must pass."""
import pathlib
import shutil
import tempfile

from rust_imports import Crate


def _cases(src):
    """(name, {file: text to append}, words the FAIL line must hold, or None for a pass)."""
    crate = Crate(src)
    graph = crate.graph()
    root = crate.names[crate.root] if crate.root else None
    cases = [
        ("unmodified", {}, None),
        # sg.rs is what registration.rs is built from; a step of registration/ imported by it
        # closes a circle (registration/context uses registration, which uses sg).
        ("plain", {"sg.rs": "use crate::registration::context::Context;\n"}, ["sg imports registration/context"]),
        ("grouped", {"sg.rs": "use crate::{registration::context::Context};\n"},
         ["sg imports registration/context"]),
        ("nested-group", {"sg.rs": "use crate::{stats::Held, registration::{self, pinning::{self, Pinned as P}}};\n"},
         ["sg imports registration/pinning"]),
        ("renamed", {"sg.rs": "use crate::registration::context as c;\n"}, ["sg imports registration/context"]),
        ("glob", {"sg.rs": "pub(crate) use crate::registration::context::*;\n"}, ["sg imports registration/context"]),
        ("path-in-code", {"sg.rs": "fn planted() { let _ = crate::registration::context::Context::claim; }\n"},
         ["sg imports registration/context"]),
        ("super", {"sg.rs": "use super::registration::context::Context;\n"}, ["sg imports registration/context"]),
        ("inline-module", {"sg.rs": "mod planted {\n    use super::super::registration::context::Context;\n}\n"},
         ["sg imports registration/context"]),
        ("self-nested", {"registration.rs": "mod planted;\nuse self::planted::Planted;\n",
                         "registration/planted.rs": "use crate::registration::Context;\npub(crate) struct Planted;\n"},
         ["registration imports registration/planted", "registration/planted imports registration"]),
        ("super-nested", {"registration.rs": "mod planted;\nuse planted::Planted;\n",
                          "registration/planted.rs": "use super::Context;\npub(crate) struct Planted;\n"},
         ["registration imports registration/planted", "registration/planted imports registration"]),
        ("not-code", {"sg.rs": "// use crate::registration::context::Context;\n"
                               "/* crate::registration::context:: /* nested */ */\n"
                               "const PLANTED: &str = \"use crate::registration::context::Context;\";\n"
                               "const PLANTED_RAW: &str = r#\"crate::registration::context::X\"#;\n"}, None),
    ]
    if root:
        # A file the root uses calls an item of the root; and one the root only declares does.
        used = sorted(n for n in graph[root] if "/" not in n)
        call = "fn planted_caller() {{ crate::planted_root_item{}; }}\n"
        cases += [
            ("crate-root", {f"{root}.rs": "fn planted_root_item() {}\n", f"{used[0]}.rs": call.format("()")},
             [f"{used[0]} imports {root}", f"{root} imports {used[0]}"]),
            ("crate-root-static", {f"{root}.rs": "static planted_root_item: u8 = 0;\n",
                                   f"{used[0]}.rs": call.format("")},
             [f"{used[0]} imports {root}"]),
            ("mod-is-not-use", {f"{root}.rs": "mod planted;\nfn planted_root_item() {}\n",
                                "planted.rs": call.format("()")}, None),
        ]
    return cases


def _plant(src, dest, files):
    shutil.copytree(src, dest, ignore=lambda d, names: [n for n in names if not n.endswith(".rs")
                                                       and not (pathlib.Path(d, n)).is_dir()])
    for name, text in files.items():
        path = dest / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(text)


def self_test(src, check):
    """Runs every case with `check` (imports.py's); returns the exit status."""
    failed = 0
    with tempfile.TemporaryDirectory(prefix="imports-canary.") as tmp:
        for i, (name, files, words) in enumerate(_cases(src)):
            dest = pathlib.Path(tmp, str(i))
            _plant(src, dest, files)
            passed, line = check(dest)
            if words is None:
                why = None if passed else f"should pass: {line}"
            elif passed:
                why = f"planted import not seen: {line}"
            else:
                missing = [w for w in words if w not in line]
                why = f"no '{missing[0]}' in: {line}" if missing else None
            print(f"FAIL src-imports-canary:{name}: {why}" if why else f"PASS src-imports-canary:{name}")
            failed += why is not None
    return 1 if failed else 0
