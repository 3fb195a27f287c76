#!/bin/bash
# The emulated world of one kernel line ($KLINE): its test kernel, the fakes and nv_peer_mem
# built against it, the BAR images and the initramfs (tests/build-world.sh). For tests/run.py:
# prints "WORLD key=value" lines (krel kbuild initrd work build_dir) and "PASS build" or
# "FAIL build: ...".
set -uo pipefail
. "$(dirname "$0")/../build-world.sh"
for v in krel kbuild initrd work build_dir; do echo "WORLD $v=${!v}"; done
if [ "$build_ok" = 1 ]; then echo "PASS build"; else echo "FAIL build: see $logs"; exit 1; fi
