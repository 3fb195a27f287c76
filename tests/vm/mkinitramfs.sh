#!/bin/bash
# Build the test VM's initramfs: busybox, /init, the scenarios, the host's BAR checksums,
# nv_peer_mem doctor with a python3 to run it, and the modules, installed under
# /lib/modules/<release> with depmod run so that modprobe resolves dependencies as on a real
# host.
# usage: mkinitramfs.sh [--overlay DIR] KBUILD OUT.cpio.gz SHA_DIR [DEST=]MODULE.ko...
#   DEST is an absolute path in the VM, or a path under /lib/modules/<release>/
#   (default extra/<name>.ko). --overlay copies DIR's tree into the VM's root first (a
#   package's files, as dpkg would install them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
overlay=
if [ "${1:-}" = --overlay ]; then
	overlay=$2
	shift 2
fi
kbuild=$1 out=$2 sha_dir=$3
shift 3
kver=$(cat "$kbuild/include/config/kernel.release")
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

[ -z "$overlay" ] || cp -a "$overlay/." "$root/"
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,etc/nvpm,tests/scenarios,tests/service,tests/conflict,tests/canaries,lib/modules/"$kver"/extra}
cp /bin/busybox "$root/bin/busybox"
install -m 755 "$here/init" "$root/init"
install -m 644 "$here/cleanup.py" "$here/demo.py" "$here/../bench/bench-vm.py" \
	"$here/../soak/soak-vm.py" "$root/tests/"
install -m 644 "$here/../bad-inputs/table.txt" "$root/tests/bad-inputs.txt"
install -m 644 "$here/lib.py" "$root/tests/"
install -m 644 "$here"/../scenarios/*.py "$root/tests/scenarios/"
install -m 644 "$here"/../service/*.py "$root/tests/service/"
install -m 644 "$here"/../conflict/*.py "$root/tests/conflict/"
install -m 644 "$here/../canaries/canary.py" "$root/tests/canaries/"
cp "$sha_dir"/*.sha256 "$root/etc/nvpm/"
# nv_peer_mem doctor, where the packages put it, and a python3 to run it.
install -D -m 755 "$here/../../scripts/nv_peer_mem-doctor" "$root/usr/libexec/nv_peer_mem/nv_peer_mem-doctor"
"$here/add-python.sh" "$root" "$here/../../scripts/nv_peer_mem-doctor" "$here/lib.py" "$here"/../scenarios/*.py \
	"$here/cleanup.py" "$here/demo.py" "$here/../bench/bench-vm.py" "$here/../soak/soak-vm.py" \
	"$here"/../service/*.py "$here"/../conflict/*.py "$here/../../scripts/nv_peer_mem-metrics"

moddir=$root/lib/modules/$kver
for spec in "$@"; do
	case $spec in
	*=*) dest=${spec%%=*} ko=${spec#*=} ;;
	*) ko=$spec dest=extra/$(basename "$spec") ;;
	esac
	case $dest in /*) dest=$root$dest ;; *) dest=$moddir/$dest ;; esac
	mkdir -p "$(dirname "$dest")"
	cp "$ko" "$dest"
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
	[ -e "$kbuild/$f" ] && cp "$kbuild/$f" "$moddir/"
done
depmod -b "$root" -F "$kbuild/System.map" "$kver"

(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$out"
