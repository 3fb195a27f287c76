#!/bin/bash
# Checks, before anything is compiled, that nv_peer_mem can be built against $KDIR and will
# load: a Rust-enabled tree with its Rust build artifacts, the same rustc, the PeerDirect
# symbols of MLNX_OFED and the P2P symbols of nvidia.ko. One sentence per missing piece.
# PREREQUISITES=1 (make prerequisites, which dkms.conf runs): a tree with Rust but without its
# artifacts passes when scripts/rust-tree.sh can complete it, nothing is written (an empty
# NV_SYMVERS is made in a temporary file), and the last line says how to build once fixed.
# LOADABLE=1 (make loadable, which the package's trigger runs for a kernel that has the module
# installed): only what a built module needs to load, MLNX_OFED's and nvidia.ko's symbols; what
# building needs (rustc, the Rust tree) is not asked, since changing it does not unload or
# break a module already built. Writes nothing.
set -uo pipefail
: "${KDIR:?}" "${RUSTC:=rustc}" "${OFA_SYMVERS:=}" "${NV_SYMVERS:=}" "${KVER:=}" "${PREREQUISITES:=0}"
: "${LOADABLE:=0}"
[ "$LOADABLE" = 0 ] || PREREQUISITES=1
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "$NV_SYMVERS" ]; then
	[ "$PREREQUISITES" = 1 ] || { echo "preflight.sh: NV_SYMVERS is not set" >&2; exit 2; }
	NV_SYMVERS=$(mktemp)
	trap 'rm -f "$NV_SYMVERS"' EXIT
fi
KNOWN_GOOD="6.12 LTS and 7.x kernels built with CONFIG_RUST=y (see Documentation/kernels.md)"
problems=0
problem() { echo "nv_peer_mem: $*" >&2; problems=$((problems + 1)); }

if [ ! -f "$KDIR/Makefile" ] || [ ! -f "$KDIR/.config" ]; then
	problem "no configured kernel build tree at $KDIR; install the build tree of kernel ${KVER:-?} or pass KDIR=<dir>."
	exit 1
fi
cfg() { sed -n "s/^$1=//p" "$KDIR/.config"; }
release=$(cat "$KDIR/include/config/kernel.release" 2>/dev/null || echo unknown)
IFS=. read -r major minor _ <<<"$release"
if [ "${major:-0}" -lt 6 ] 2>/dev/null || { [ "$major" -eq 6 ] && [ "${minor%%[!0-9]*}" -lt 12 ]; }; then
	problem "kernel $release is too old for Rust out-of-tree modules; known good: $KNOWN_GOOD."
fi
if [ "$LOADABLE" = 1 ]; then
	: # built already: the compiler and the tree no longer matter
elif [ "$(cfg CONFIG_RUST)" != y ]; then
	problem "kernel $release was built without Rust (CONFIG_RUST is not set); nv_peer_mem needs $KNOWN_GOOD."
elif [ "$PREREQUISITES" = 1 ] && [ ! -e "$KDIR/rust/libkernel.rmeta" ]; then
	# rust-tree.sh says, one sentence each, what completing the tree lacks (rustc included).
	RUSTC=$RUSTC "$here/rust-tree.sh" --check "$KDIR" || problems=$((problems + 1))
else
	for f in rust/libkernel.rmeta rust/libmacros.so include/generated/rustc_cfg; do
		[ -e "$KDIR/$f" ] || problem "$KDIR lacks the Rust build artifact $f (distribution header packages often omit rust/): 'make' completes the tree by itself from the kernel's source package (scripts/rust-tree.sh $KDIR; Documentation/kernels.md)."
	done
	if [ "$(uname -m)" = x86_64 ] && [ ! -e "$KDIR/scripts/target.json" ]; then
		problem "$KDIR lacks scripts/target.json, generated only by a Rust-enabled build of the tree."
	fi
	want=$(cfg CONFIG_RUSTC_VERSION_TEXT | tr -d '"')
	have=$("$RUSTC" --version 2>/dev/null)
	if [ -z "$have" ]; then
		problem "no Rust compiler '$RUSTC'; install the rustc that built the kernel ($want) and pass RUSTC=<path>."
	elif [ -n "$want" ] && [ "$want" != "$have" ]; then
		problem "the kernel was built with '$want' but $RUSTC is '$have'; pass RUSTC=<path to the same rustc>."
	fi
fi

has_symbol() { [ -f "$1" ] && grep -q "[[:space:]]$2[[:space:]]" "$1"; }
if ! has_symbol "$OFA_SYMVERS" ib_register_peer_memory_client &&
	! has_symbol "$KDIR/Module.symvers" ib_register_peer_memory_client; then
	problem "no PeerDirect symbols (ib_register_peer_memory_client) in ${OFA_SYMVERS:-<no MLNX_OFED tree found>} or $KDIR/Module.symvers; install MLNX_OFED 5.1+ with kernel sources for $release, or pass OFA_KERNEL=<dir holding its Module.symvers>."
fi
if [ ! -s "$NV_SYMVERS" ]; then
	"$here/nv-symvers.sh" "$release" >"$NV_SYMVERS.tmp" 2>/dev/null && mv "$NV_SYMVERS.tmp" "$NV_SYMVERS" ||
		rm -f "$NV_SYMVERS.tmp"
fi
if ! has_symbol "$NV_SYMVERS" nvidia_p2p_get_pages; then
	problem "no nvidia.ko with the P2P API (nvidia_p2p_get_pages) for kernel $release (looked for the modules nvidia, nvidia-current, nvidia-open and every nvidia*.ko below /lib/modules/$release); install the NVIDIA driver for this kernel, or pass NV_SYMVERS=<Module.symvers of nvidia.ko>."
fi

if [ "$problems" -gt 0 ]; then
	if [ "$LOADABLE" = 1 ]; then
		echo "nv_peer_mem: $problems problem(s) above: the module built for kernel $release cannot load there." >&2
	elif [ "$PREREQUISITES" = 1 ]; then
		echo "nv_peer_mem: $problems problem(s) above: skipped for kernel $release, not failed; once they are fixed: dkms autoinstall -k $release" >&2
	else
		echo "nv_peer_mem: $problems problem(s) above; nothing was built." >&2
	fi
	exit 1
fi
