#!/bin/bash
# Write Module.symvers lines for the P2P functions of the installed nvidia.ko of kernel $1, so
# that modpost knows them (the NVIDIA driver ships no Module.symvers).
set -euo pipefail
kver=${1:-$(uname -r)}
ko=$(modinfo -k "$kver" -n nvidia 2>/dev/null) || { echo "nv-symvers: no nvidia module for $kver" >&2; exit 1; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
case $ko in
*.xz) xz -dc "$ko" >"$tmp" ;;
*.zst) zstd -qdc "$ko" >"$tmp" ;;
*.gz) gzip -dc "$ko" >"$tmp" ;;
*) cp "$ko" "$tmp" ;;
esac
nm "$tmp" | awk -v m="${ko%.ko*}" '
	$3 ~ /^__ksymtab_nvidia_p2p_/ { s = substr($3, 11); crc[s] = crc[s] ""; names[s] = 1 }
	$3 ~ /^__crc_nvidia_p2p_/ { crc[substr($3, 7)] = "0x" $1 }
	END { for (s in names) printf "%s\t%s\t%s\tEXPORT_SYMBOL\t\n", (crc[s] != "" ? crc[s] : "0x00000000"), s, m }'
