# shellcheck shell=bash
# Common settings for the test-kernel tooling. Sourced, not run.

# Where built kernels, the bindgen binary and VM artefacts are cached: outside the repo.
NVPM_CACHE=${NVPM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nv_peer_mem-rs}
# Kernel line to build: "7" (newest linux-source-7.*) or "6.12" (LTS).
KLINE=${KLINE:-7}

LLVM_DIR=/usr/lib/llvm-19
TOOLS_DIR=$NVPM_CACHE/tools
BINDGEN=$TOOLS_DIR/bin/bindgen
HOST_RUSTC=/usr/bin/rustc
HOST_RUSTFMT=/usr/bin/rustfmt
HOST_CLIPPY=/usr/bin/clippy-driver
export LIBCLANG_PATH=$LLVM_DIR/lib

# make(1) arguments for building against a test kernel.
kmake_args() {
	printf '%s\n' "LLVM=$LLVM_DIR/bin/" "RUSTC=$HOST_RUSTC" "BINDGEN=$BINDGEN" \
		"RUSTFMT=$HOST_RUSTFMT" "CLIPPY_DRIVER=$HOST_CLIPPY"
}

# The Debian mirror the host's apt uses (deb822 .sources or one-line .list files), or
# NVPM_DEBIAN_MIRROR; empty when there is none.
debian_mirror() {
	[ -n "${NVPM_DEBIAN_MIRROR:-}" ] && { echo "$NVPM_DEBIAN_MIRROR"; return; }
	{
		awk '/^URIs:/{for (i = 2; i <= NF; i++) print $i}' /etc/apt/sources.list.d/*.sources 2>/dev/null
		awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
	} | grep -E '/debian/?$' | head -n1 || true # absent files are no error: the answer is empty
}

# Private package lists of Debian 13 and its backports (the kernel sources, the stock world's
# kernels), kept in the cache and used with apt-get/apt-cache "${apt_opts[@]}": the host's apt
# setup is left alone.
apt_dir=$NVPM_CACHE/apt
apt_opts=(-oDir::Etc::SourceList="$apt_dir/sources.list" -oDir::Etc::SourceParts=/dev/null
	-oDir::State::Lists="$apt_dir/lists" -oDir::Cache="$apt_dir/cache"
	-oAPT::Architecture=amd64 -oDebug::NoLocking=1 -q)

# Refresh the private package lists (at most once an hour); fall back to cached lists offline.
refresh_lists() {
	local stamp=$apt_dir/lists/.stamp mirror kr=/usr/share/keyrings/debian-archive-keyring.gpg
	mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
	if [ -f "$stamp" ] && [ -z "$(find "$stamp" -mmin +60)" ]; then return 0; fi
	mirror=$(debian_mirror) || true
	[ -n "$mirror" ] || { say "no Debian mirror in the apt configuration; set NVPM_DEBIAN_MIRROR"; return 1; }
	printf 'deb [signed-by=%s] %s %s main\n' "$kr" "$mirror" trixie-backports "$kr" "$mirror" trixie \
		>"$apt_dir/sources.list"
	apt-get "${apt_opts[@]}" update >"$apt_dir/update.log" 2>&1 && touch "$stamp"
}

say() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
die() { say "error: $*"; exit 1; }
# in_chroot DIR COMMAND...: COMMAND in the Debian root DIR, with a clean environment, no
# questions from debconf and nothing on its standard input.
in_chroot() {
	local dir=$1
	shift
	chroot "$dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@" </dev/null
}
# unmount_under DIR: every mount at or below DIR, deepest first (lazily: a busy one goes when it
# is let go); what umount says goes to $log when it is set.
unmount_under() {
	local m
	for m in $(awk -v r="$1" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>>"${log:-/dev/null}" || true
	done
}
