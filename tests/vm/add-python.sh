#!/bin/bash
# Copy the host's python3 into an initramfs root with just the standard library modules that
# SCRIPTs import (found statically), so that the VM can run nv_peer_mem doctor.
# usage: add-python.sh ROOT SCRIPT...
set -euo pipefail
root=$1
shift
py=$(readlink -f /usr/bin/python3)
ver=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
stdlib=/usr/lib/python$ver
mkdir -p "$root/usr/bin" "$root$stdlib/lib-dynload"
cp "$py" "$root/usr/bin/python3"
# copy_libs ELF...: the shared libraries they need, and the dynamic loader.
copy_libs() {
	ldd "$@" | awk '/=> \//{ print $3 } /^\t\/.*ld-linux/{ print $1 }' | sort -u | while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}
copy_libs "$py"
# Modules found by modulefinder, plus what the interpreter imports at start-up.
/usr/bin/python3 - "$stdlib" "$@" <<'PY' | while read -r f; do mkdir -p "$root$(dirname "$f")"; cp "$f" "$root$f"; done
import modulefinder, os, sys
stdlib, scripts = sys.argv[1], sys.argv[2:]
files = set()
for s in scripts:
    mf = modulefinder.ModuleFinder()
    mf.run_script(s)
    for m in mf.modules.values():
        if m.__file__ and m.__file__.startswith(stdlib + "/"):
            files.add(m.__file__)
for name in ("encodings", "codecs", "io", "abc", "os", "stat", "posixpath", "genericpath",
             "_collections_abc", "_sitebuiltins", "site", "types", "warnings"):
    p = os.path.join(stdlib, name)
    if os.path.isdir(p):
        for dirpath, _, names in os.walk(p):
            files.update(os.path.join(dirpath, n) for n in names if n.endswith(".py"))
    elif os.path.exists(p + ".py"):
        files.add(p + ".py")
print("\n".join(sorted(files)))
PY
# modulefinder cannot see the sysconfig data the interpreter looks for when it starts.
cp "$stdlib"/_sysconfigdata_*.py "$root$stdlib/" 2>/dev/null || true
# Extension modules (lib-dynload) bring libraries of their own (_lzma: liblzma).
mapfile -t exts < <(find "$root$stdlib" -name '*.so' | sed "s|^$root||")
[ ${#exts[@]} = 0 ] || copy_libs "${exts[@]}"
