#!/bin/bash
# Write Module.symvers lines for the P2P functions of the installed NVIDIA driver module of
# kernel $1, so that modpost knows them (the NVIDIA driver ships no Module.symvers).
# The module is found the way the system finds it, whatever its file is called and wherever it
# lies below /lib/modules/<kernel>, compressed or not: by the names modprobe knows (nvidia;
# nvidia-current, as Debian's driver packages install it and reach it through an install line
# in /etc/nvidia/current/nvidia-modprobe.conf; nvidia-open), then any nvidia*.ko of that kernel;
# the first that exports nvidia_p2p_get_pages wins. NV_MODULES_ROOT (default /) is the root
# the module tree is under.
set -euo pipefail
kver=${1:-$(uname -r)}
base=${NV_MODULES_ROOT:-/}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# unpacked KO: the module's ELF in $tmp
unpacked() {
	case $1 in
	*.xz) xz -dc "$1" >"$tmp" ;;
	*.zst) zstd -qdc "$1" >"$tmp" ;;
	*.gz) gzip -dc "$1" >"$tmp" ;;
	*) cp "$1" "$tmp" ;;
	esac
}
candidates() {
	local name
	for name in nvidia nvidia-current nvidia-open nvidia-current-open; do
		modinfo -b "$base" -k "$kver" -n "$name" 2>/dev/null || true
	done
	find "$base/lib/modules/$kver" -name 'nvidia*.ko*' 2>/dev/null | sort
}
ko=
while read -r f; do
	[ -f "$f" ] || continue
	unpacked "$f" 2>/dev/null || continue
	if grep -q ' __ksymtab_nvidia_p2p_get_pages$' <<<"$(nm "$tmp" 2>/dev/null)"; then
		ko=$f
		break
	fi
done < <(candidates | awk '!seen[$0]++')
[ -n "$ko" ] || {
	echo "nv-symvers: no NVIDIA module exporting nvidia_p2p_get_pages for $kver (looked for nvidia, nvidia-current, nvidia-open and every nvidia*.ko below ${base%/}/lib/modules/$kver)" >&2
	exit 1
}
# The module's own name (nvidia, also in nvidia-current.ko): modpost writes it into the
# depends of nv_peer_mem.ko.
name=$(modinfo -F name "$ko" 2>/dev/null) || true
nm "$tmp" | awk -v m="${ko%/*}/${name:-$(basename "${ko%.ko*}")}" '
	$3 ~ /^__ksymtab_nvidia_p2p_/ { s = substr($3, 11); crc[s] = crc[s] ""; names[s] = 1 }
	$3 ~ /^__crc_nvidia_p2p_/ { crc[substr($3, 7)] = "0x" $1 }
	END { for (s in names) printf "%s\t%s\t%s\tEXPORT_SYMBOL\t\n", (crc[s] != "" ? crc[s] : "0x00000000"), s, m }'
