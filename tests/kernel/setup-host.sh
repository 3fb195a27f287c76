#!/bin/bash
# Install what building the test kernel, the modules and the VM needs on Debian 12.
# Idempotent and quiet when everything is there already.
set -euo pipefail
. "$(dirname "$0")/env.sh"

APT_PKGS=(rustc-web rust-web-src rustfmt-web rust-web-clippy
	clang-19 lld-19 llvm-19 libclang-19-dev
	qemu-system-x86 busybox-static kmod shellcheck cpio bc bison flex libelf-dev libssl-dev
	make gcc libc6-dev python3 xz-utils zstd rsync file)
# graphviz renders the design's diagrams (tests/lint/diagrams.py, make diagrams).
APT_PKGS+=(graphviz)
# prometheus for its promtool (tests/metrics/run.py).
APT_PKGS+=(prometheus)

missing=()
for p in "${APT_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	say "installing: ${missing[*]}"
	SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -q >/dev/null
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! [ -x "$BINDGEN" ] || ! "$BINDGEN" --version 2>/dev/null | grep -q '0.71.1'; then
	say "installing bindgen-cli 0.71.1 into $TOOLS_DIR (one-off, ~3 min)"
	command -v cargo >/dev/null || die "cargo is needed to install bindgen-cli"
	cargo install --quiet --locked bindgen-cli --version 0.71.1 --root "$TOOLS_DIR"
fi
