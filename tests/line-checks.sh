#!/bin/bash
# The checks of one kernel line's build ($KLINE, built by tests/vm/world.sh): the module and
# the fakes build warning-free, the module passes clippy, and every function it calls is known
# to the fault-injection sweep as fallible or not. Prints PASS/FAIL lines.
set -uo pipefail
NVPM_WORLD_REUSE=1 . "$(dirname "$0")/build-world.sh"

warnings=$(grep -h -i 'warning' "$logs"/nvidia-*.log "$logs/ib_core.log" "$logs/module.log")
if [ -z "$warnings" ]; then echo "PASS build-warning-free"
else echo "FAIL build-warning-free: $(echo "$warnings" | head -5 | paste -sd ' ')"; fi

# A second build of the same sources under clippy-driver.
rm -rf "$build_dir/clippy"
cp -r "$build_dir/module" "$build_dir/clippy"
if KMAKE_EXTRA=CLIPPY=1 module_make "$build_dir/clippy" clean modules >"$logs/clippy.log" 2>&1 &&
	! grep -qi 'warning\|error' "$logs/clippy.log"; then
	echo "PASS clippy"
else echo "FAIL clippy: $(grep -i -A5 'warning\|error' "$logs/clippy.log" | head -20 | paste -sd ' ')"; fi
python3 "$top/tests/sweep/sites.py" --check "$build_dir/module/nv_peer_mem.ko"
