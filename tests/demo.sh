#!/bin/bash
# make demo: build what is missing, boot the emulated world, load nv_peer_mem, register a GPU
# buffer for a NIC, DMA-read it, show the module's state, shut down.
set -uo pipefail
. "$(dirname "$0")/build-world.sh"
[ "$build_ok" = 1 ] || die "build failed; logs in $logs"
say "booting the test VM (QEMU, software emulation: about a minute)"
"$top/tests/vm/run-vm.sh" "$kbuild" "$initrd" "$work/demo" demo >"$work/demo.verdict"
rc=$?
sed -n '/^=== BEGIN demo/,/^=== END demo/p' "$work/demo/console.log" | tr -d '\r' |
	grep -E '^(demo:|not ok)' | sed 's/^demo: //'
if [ $rc = 0 ]; then say "demo OK"; else cat "$work/demo.verdict"; die "demo failed"; fi
