#!/bin/sh
# The host's half of make bench's calibration: tests/bench/calibrate run natively, just before a
# bench boot, printed as the VM reads it from its command line (nvpm.calib=ROUNDS:BEST_NS:MEDIAN_NS).
# usage: host-calibration.sh CALIBRATE-BINARY
set -eu
[ $# = 1 ] || { echo "usage: $0 CALIBRATE-BINARY" >&2; exit 2; }
line=$("$1")
calib=$(echo "$line" | sed -n 's/^calibrate rounds=\([0-9]*\) best_ns=\([0-9]*\) median_ns=\([0-9]*\)$/\1:\2:\3/p')
[ -n "$calib" ] || { echo "host-calibration.sh: $1 said '$line'" >&2; exit 1; }
echo "$calib"
