#!/bin/bash
# systemd-analyze verify of nv_peer_mem.service, and of the metrics timer and its service, in a
# scratch root holding the host's systemd
# units and the service helper: unknown keys, bad ordering targets and a missing or
# non-executable ExecStart all show up as output.
# usage: systemd-verify.sh   (prints one PASS/FAIL line)
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
if ! command -v systemd-analyze >/dev/null; then
	echo "FAIL packaging:systemd-unit: systemd-analyze is missing (apt-get install systemd)"
	exit 1
fi
mkdir -p "$root/lib/systemd" "$root/etc/systemd/system" "$root/usr/libexec/nv_peer_mem"
cp -a /lib/systemd/system "$root/lib/systemd/"
install -m 755 "$top/packaging/service/nv_peer_mem-service" "$top/scripts/nv_peer_mem-metrics" \
	"$root/usr/libexec/nv_peer_mem/"
install -m 644 "$top/packaging/service/nv_peer_mem.service" "$top/packaging/service/nv_peer_mem-metrics.service" \
	"$top/packaging/service/nv_peer_mem-metrics.timer" "$root/etc/systemd/system/"
if out=$(systemd-analyze verify --root="$root" nv_peer_mem.service nv_peer_mem-metrics.service \
	nv_peer_mem-metrics.timer 2>&1) && [ -z "$out" ]; then
	echo "PASS packaging:systemd-unit"
else
	echo "FAIL packaging:systemd-unit: $out"
	exit 1
fi
