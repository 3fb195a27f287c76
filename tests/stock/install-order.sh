#!/bin/bash
# One order of installing, with apt, in a Debian root: this project's two debs (P), the NVIDIA
# driver's double packaged as Debian's nvidia-kernel-dkms (N) and MLNX_OFED's double packaged as
# mlnx-ofed-kernel-dkms (O), from doubles-debs.sh. Whatever the order, apt must exit 0 at every
# step, and at the end nv_peer_mem must be installed for every kernel of the root that has
# Rust and headers: what is installed after it is followed by the package's trigger.
# usage: install-order.sh ROOT ORDER DEBS LOG
#   ROOT   a root with /proc and /sys mounted; ORDER: P, N and O in some order (e.g. NOP);
#   DEBS   the directory (inside ROOT) holding the four debs; LOG: where apt's output goes.
# Prints "PASS stock:order-<ORDER>" or "FAIL stock:order-<ORDER>: <why>", then the order's row:
#   "  order N O P: apt 0 0 0; nv_peer_mem after each: none none installed; module for <kernel>: yes; 95 s"
set -uo pipefail
. "$(dirname "$0")/../kernel/env.sh"
[ $# = 4 ] || { echo "usage: $0 ROOT ORDER DEBS LOG" >&2; exit 2; }
root=$1 order=$2 debs=$3 log=$4
in_root() { in_chroot "$root" "$@"; }
name="order-$order"

# The packages of one letter, by their paths inside the root.
debs_of() {
	case $1 in
	P) (cd "$root$debs" && ls nvidia-peer-memory-dkms_*_all.deb nvidia-peer-memory_*_all.deb) ;;
	N) echo nvidia-kernel-dkms_double_all.deb ;;
	O) echo mlnx-ofed-kernel-dkms_double_all.deb ;;
	esac | sed "s|^|$debs/|"
}
# The kernels nv_peer_mem can be built for: headers installed, built with Rust.
kernels=$(for b in "$root"/lib/modules/*/build; do
	k=${b#"$root"/lib/modules/}
	k=${k%/build}
	grep -qx CONFIG_RUST=y "$root/boot/config-$k" 2>/dev/null && echo "$k"
done)
[ -n "$kernels" ] || { echo "FAIL stock:$name: no kernel with Rust and headers in $root"; exit 1; }
state() { # what DKMS says of nv_peer_mem for the root's kernels: added, built, installed, none
	local s
	s=$(in_root dkms status -m nv_peer_mem 2>/dev/null)
	if [ -z "$s" ]; then echo none
	elif grep -q ': installed' <<<"$s"; then echo installed
	elif grep -q ': built' <<<"$s"; then echo built
	else echo added; fi
}

codes=() states=() bad='' start=$SECONDS
for letter in $(grep -o . <<<"$order"); do
	mapfile -t pkgs < <(debs_of "$letter")
	echo "=== $name: apt-get install ${pkgs[*]}" >>"$log"
	in_root apt-get install -y -q --no-install-recommends "${pkgs[@]}" >>"$log" 2>&1
	rc=$?
	codes+=("$rc")
	states+=("$(state)")
	[ "$rc" = 0 ] || bad="${bad:+$bad; }apt-get install of $letter exited $rc"
done
missing=() row=()
for k in $kernels; do
	if ls "$root/lib/modules/$k/updates/dkms/"nv_peer_mem.ko* >/dev/null 2>&1; then row+=("$k: yes")
	else row+=("$k: no"); missing+=("$k"); fi
done
[ ${#missing[@]} = 0 ] || bad="${bad:+$bad; }no nv_peer_mem.ko for ${missing[*]}"
# No package may be left unconfigured or half-installed, not only ours.
broken=$(in_root dpkg --audit 2>&1)
[ -z "$broken" ] || bad="${bad:+$bad; }dpkg --audit: $(head -n 2 <<<"$broken" | paste -sd ' ')"
if [ -z "$bad" ]; then echo "PASS stock:$name"
else echo "FAIL stock:$name: $bad; see $log"; fi
echo "  order $(grep -o . <<<"$order" | paste -sd ' '): apt ${codes[*]}; nv_peer_mem after each: ${states[*]}; module for ${row[*]}; $((SECONDS - start)) s"
[ -z "$bad" ]
