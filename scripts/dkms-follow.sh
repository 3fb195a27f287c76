#!/bin/bash
# nv_peer_mem follows its prerequisites: run by the nvidia-peer-memory-dkms package's trigger
# (a package installed, upgraded or removed files under /usr/src: an NVIDIA driver's or
# MLNX_OFED's DKMS source, kernel headers) and by the rpm's file triggers. For every kernel
# whose headers are installed:
#   - nv_peer_mem not installed: "dkms install" builds it now. A kernel that still lacks
#     something is skipped by dkms.conf with the reason (DKMS exit 77): not an error.
#   - installed, but what it needs to load is gone (the driver or MLNX_OFED was removed for
#     that kernel; "make loadable"): "dkms unbuild", so that no module that cannot load stays
#     installed. The next run after they come back builds it again. What only building needs
#     (rustc, the Rust tree) is not asked: a new rustc leaves working modules alone.
# A driver that is upgraded is DKMS's own work (BUILD_DEPENDS_REBUILD in dkms.conf).
# usage: dkms-follow.sh   (as root; prints "nv_peer_mem: ..." lines, and DKMS's output)
# Exits non-zero only when the module itself failed to build: a defect to see (design.md).
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
module=nv_peer_mem
version=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$src/dkms.conf")
[ -n "$version" ] || { echo "$module: no PACKAGE_VERSION in $src/dkms.conf" >&2; exit 1; }
command -v dkms >/dev/null || exit 0
[ -f /etc/dkms/no-autoinstall ] && exit 0
# Registered with DKMS by the package; nothing to follow otherwise.
[ -n "$(dkms status -m "$module" -v "$version" 2>/dev/null)" ] || exit 0

rc=0
for build in /lib/modules/*/build; do
	[ -e "$build/include" ] || continue
	kver=${build#/lib/modules/}
	kver=${kver%/build}
	status=$(dkms status -m "$module" -v "$version" -k "$kver" 2>/dev/null)
	if grep -q ': installed' <<<"$status"; then
		make -s -C "$src" loadable KVER="$kver" KDIR="$build" >/dev/null 2>&1 && continue
		echo "$module: what nv_peer_mem needs left kernel $kver; its module is removed until it is back"
		dkms unbuild -m "$module" -v "$version" -k "$kver" >/dev/null 2>&1 ||
			dkms uninstall -m "$module" -v "$version" -k "$kver" >/dev/null 2>&1 || true
		continue
	fi
	echo "$module: building for kernel $kver"
	dkms install -m "$module" -v "$version" -k "$kver"
	case $? in
	0 | 77) ;;
	*)
		echo "$module: the build for kernel $kver failed; see /var/lib/dkms/$module/$version/build/make.log" >&2
		rc=1
		;;
	esac
done
exit $rc
