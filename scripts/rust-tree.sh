#!/bin/bash
# Complete a distribution's kernel header tree with the Rust build artifacts it lacks.
#
# usage: rust-tree.sh [--check] KDIR
#
# Out-of-tree Rust modules need the kernel tree's rust/*.rmeta, the proc macros rust/*.so and
# scripts/target.json. Debian's linux-headers packages (7.x, CONFIG_RUST=y) ship none of them.
# They are reproducible: a Rust symbol's mangled name depends on the crate's name and the
# compiler's version, not on the file, so the same source, the same .config and the same rustc
# rebuild them exactly. This program does that, from the distribution's kernel source package
# of the same version, and writes a completed copy of the tree into a cache outside /usr/src:
#   $NV_PEER_MEM_RUST_CACHE (default /var/cache/nv_peer_mem/rust-trees)/<kernel release>
# It checks that every Rust symbol of the headers' Module.symvers is among the rebuilt ones
# before it keeps anything. Prints the tree to build against on stdout: KDIR itself when it
# is complete already, the cached completion otherwise (made now if missing or stale).
# On a problem it prints one sentence per problem with the command that fixes it, keeps nothing
# and exits 1. --check only checks that the tree is complete or can be completed (nothing is
# built or written; silent and exit 0 when it can).
#
# Environment: RUSTC (rustc), BINDGEN (bindgen), NV_PEER_MEM_RUST_CACHE, NV_PEER_MEM_KERNEL_SOURCE
# (the kernel source: a tarball or a directory; default: Debian's /usr/src/linux-source-X.Y.tar.xz),
# NV_PEER_MEM_RUST_TREE_MIN_GIB (free space it wants, default 3).
set -uo pipefail
check_only=0
[ "${1:-}" != --check ] || { check_only=1; shift; }
kdir=${1:-}
[ -n "$kdir" ] && [ $# = 1 ] || { echo "usage: ${0##*/} [--check] KDIR" >&2; exit 2; }
kdir=$(cd "$kdir" 2>/dev/null && pwd -P) || { echo "nv_peer_mem: no kernel build tree at $1." >&2; exit 1; }
RUSTC=${RUSTC:-rustc} BINDGEN=${BINDGEN:-bindgen}
cache=${NV_PEER_MEM_RUST_CACHE:-/var/cache/nv_peer_mem/rust-trees}
min_gib=${NV_PEER_MEM_RUST_TREE_MIN_GIB:-3}
problems=0
problem() { echo "nv_peer_mem: $*" >&2; problems=$((problems + 1)); }
refuse() { # stop with what was said so far, and this
	[ $# = 0 ] || problem "$@"
	if [ "$check_only" = 1 ]; then
		echo "nv_peer_mem: the Rust build tree for $release cannot be completed yet." >&2
	else
		echo "nv_peer_mem: the Rust build tree for $release was not completed; nothing was kept." >&2
	fi
	exit 1
}
say() { echo "nv_peer_mem: $*" >&2; }

release=$(cat "$kdir/include/config/kernel.release" 2>/dev/null) ||
	{ echo "nv_peer_mem: $kdir is not a configured kernel build tree (no include/config/kernel.release)." >&2; exit 1; }
cfg() { sed -n "s/^$1=//p" "$kdir/.config" | tr -d '"'; }
[ "$(cfg CONFIG_RUST)" = y ] ||
	refuse "kernel $release was built without Rust (CONFIG_RUST is not set): no Rust module can be built for it; boot a kernel built with CONFIG_RUST=y (Documentation/kernels.md)."

complete() { [ -e "$1/rust/libkernel.rmeta" ] && [ -e "$1/rust/libmacros.so" ] && [ -e "$1/scripts/target.json" ]; }
if complete "$kdir"; then
	[ "$check_only" = 1 ] || echo "$kdir"
	exit 0
fi

# What the completion was made from; a change of any of it makes it stale.
stamp_of() {
	{
		echo "tree $kdir"
		sha256sum "$kdir/.config" "$kdir/Module.symvers" 2>/dev/null | cut -d' ' -f1
		echo "rustc $("$RUSTC" --version 2>/dev/null)"
	} | sha256sum | cut -d' ' -f1
}
dest=$cache/$release
want_stamp=$(stamp_of)
if complete "$dest" && [ "$(cat "$dest/.nv_peer_mem-stamp" 2>/dev/null)" = "$want_stamp" ]; then
	[ "$check_only" = 1 ] || echo "$dest"
	exit 0
fi

# --- everything the rebuild needs, each missing piece in one sentence ---------------------
major_minor=$(echo "$release" | cut -d. -f1,2)
version=$(echo "$release" | sed 's/^\([0-9]*\.[0-9]*\(\.[0-9]*\)\{0,1\}\).*/\1/')
case $version in *.*.*) ;; *) version=$version.0 ;; esac
headers_pkg=$(dpkg-query -S "$kdir" 2>/dev/null | head -n1 | cut -d: -f1)
headers_ver=${headers_pkg:+$(dpkg-query -W -f='${source:Version}' "$headers_pkg" 2>/dev/null)}
src_pkg=linux-source-$major_minor
source=${NV_PEER_MEM_KERNEL_SOURCE:-$(ls /usr/src/"$src_pkg".tar.* 2>/dev/null | head -n1)}
# apt's command for packages (name or name=version)
apt_fix() { echo "apt-get install $*"; }
# source_fix: how to get the source of the headers' version, or why it cannot be had
source_fix() {
	local madison
	madison=$(apt-cache madison "$src_pkg" 2>/dev/null)
	if [ -n "$headers_ver" ] && grep -q '|' <<<"$madison" &&
		! awk -F'|' '{ gsub(/ /, "", $2); print $2 }' <<<"$madison" | grep -qxF "$headers_ver"; then
		echo "$src_pkg $headers_ver is no longer in the archive: boot a kernel whose source package is (apt-cache policy $src_pkg)"
	else
		apt_fix "$src_pkg${headers_ver:+=$headers_ver}"
	fi
}
if [ -z "$source" ] || [ ! -e "$source" ]; then
	problem "no kernel source for $release: install the source package of the same version ($(source_fix)), or set NV_PEER_MEM_KERNEL_SOURCE=<tarball or directory of Linux $version>."
elif [ -z "${NV_PEER_MEM_KERNEL_SOURCE:-}" ] && [ -n "$headers_ver" ]; then
	src_ver=$(dpkg-query -W -f='${Version}' "$src_pkg" 2>/dev/null)
	[ "$src_ver" = "$headers_ver" ] ||
		problem "the kernel source is $src_pkg ${src_ver:-of unknown version} but the headers of $release are $headers_ver: install the same version ($(source_fix))."
fi

want_rustc=$(cfg CONFIG_RUSTC_VERSION_TEXT)
have_rustc=$("$RUSTC" --version 2>/dev/null)
# Debian: the apt version of rustc whose upstream part the kernel's rustc has. When that is not
# apt's candidate (sid's rustc for sid's kernel on trixie), "-t" its suite: apt would otherwise
# take the rest of the toolchain from the suites it prefers and give up.
rustc_fix() {
	local up v suite candidate
	up=$(echo "$want_rustc" | awk '{ print $2 }')
	read -r v suite < <(apt-cache madison rustc 2>/dev/null | awk -F'|' -v u="$up" '
		{ gsub(/ /, "", $2); split($3, where, " "); sub(/\/.*/, "", where[2]) }
		$3 ~ /Packages/ && (index($2, u "+") == 1 || $2 == u) { print $2, where[2]; exit }')
	candidate=$(apt-cache policy rustc 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
	if [ -z "$v" ]; then
		echo "install $want_rustc and pass RUSTC=<its path>"
	elif [ "$v" = "$candidate" ] || [ -z "$suite" ]; then
		apt_fix "rustc=$v rust-src=$v libstd-rust-dev=$v"
	else
		apt_fix "-t $suite rustc=$v rust-src=$v libstd-rust-dev=$v"
	fi
}
if [ -z "$have_rustc" ]; then
	problem "no Rust compiler '$RUSTC': kernel $release was built with '$want_rustc' ($(rustc_fix))."
elif [ "$have_rustc" != "$want_rustc" ]; then
	problem "kernel $release was built with '$want_rustc' but $RUSTC is '$have_rustc': only the same compiler can build for it ($(rustc_fix))."
else
	sysroot=$("$RUSTC" --print sysroot 2>/dev/null)
	[ -e "$sysroot/lib/rustlib/src/rust/library/core/src/lib.rs" ] ||
		problem "no Rust standard library source for $have_rustc in $sysroot/lib/rustlib/src ($(rustc_fix))."
fi
command -v "$BINDGEN" >/dev/null 2>&1 ||
	problem "no bindgen ('$BINDGEN'): the kernel's Rust bindings need it ($(apt_fix bindgen), or set BINDGEN=<path>)."
cc=$(cfg CONFIG_CC_VERSION_TEXT | awk '{ print $1 }')
command -v "$cc" >/dev/null 2>&1 || cc=gcc
tools=()
for t in make "$cc" bc bison flex; do command -v "$t" >/dev/null 2>&1 || tools+=("$t"); done
[ -e /usr/include/gelf.h ] || tools+=(libelf-dev)
[ -e /usr/include/openssl/ssl.h ] || tools+=(libssl-dev)
[ ${#tools[@]} = 0 ] ||
	problem "the kernel's build tools are missing: ${tools[*]} ($(apt_fix make bc bison flex libelf-dev libssl-dev "$cc"))."

# The cache is created only for a rebuild: a refusal leaves the system as it was.
existing=$cache
while [ ! -e "$existing" ]; do existing=$(dirname "$existing"); done
if [ ! -d "$existing" ] || [ ! -w "$existing" ]; then
	problem "cannot write the cache directory $cache ($existing is not a writable directory): make it writable for root, or set NV_PEER_MEM_RUST_CACHE=<a writable directory>."
else
	free_kib=$(df -Pk "$existing" | awk 'NR == 2 { print $4 }')
	[ "${free_kib:-0}" -ge $((min_gib * 1024 * 1024)) ] ||
		problem "$cache has $((${free_kib:-0} / 1024)) MiB free; the rebuild needs $min_gib GiB for a while: free space there, or set NV_PEER_MEM_RUST_CACHE=<a directory with room>."
fi
[ "$problems" = 0 ] || refuse
[ "$check_only" = 0 ] || exit 0

# --- the rebuild ------------------------------------------------------------------------------
# On the way out: the work directory goes, and so do the cache directories made here when
# nothing was kept in them.
cleanup() {
	local d=$cache
	rm -rf --one-file-system "$work"
	while [ "$d" != "$existing" ] && rmdir "$d" 2>/dev/null; do d=$(dirname "$d"); done
}
trap cleanup EXIT
work=
mkdir -p "$cache" && work=$(mktemp -d "$cache/.build-$release.XXXXXX") ||
	refuse "cannot create a work directory in $cache."
say "completing the Rust build tree of $release from $source with $have_rustc (a few minutes)"
start=$SECONDS
if [ -d "$source" ]; then
	cp -a "$source" "$work/src" 2>"$work/err" || refuse "cannot copy $source: $(tail -n1 "$work/err")."
else
	mkdir -p "$work/unpack"
	tar -xf "$source" -C "$work/unpack" 2>"$work/err" ||
		refuse "cannot unpack $source (full disk?): $(tail -n1 "$work/err")."
	mv "$work"/unpack/* "$work/src"
fi
src=$work/src
src_version=$(make -s -C "$src" kernelversion 2>/dev/null)
[ "$src_version" = "$version" ] ||
	refuse "$source is Linux ${src_version:-of unknown version}, the headers are $release (Linux $version): install the source of the same version ($(source_fix))."

# LIBCLANG_PATH: bindgen before 0.72 misreads libclang 22 and later (kernel structs come out
# opaque); use the newest libclang before 22 when the system has several.
if [ -z "${LIBCLANG_PATH:-}" ]; then
	llvm=$(ls -d /usr/lib/llvm-[0-9]*/lib 2>/dev/null | sed 's|/usr/lib/llvm-\([0-9]*\)/lib|\1|' |
		awk '$1 < 22' | sort -n | tail -n1)
	[ -z "$llvm" ] || export LIBCLANG_PATH=/usr/lib/llvm-$llvm/lib
fi
kmake=(make -C "$src" CC="$cc" HOSTCC="$cc" RUSTC="$RUSTC" BINDGEN="$BINDGEN")
cp "$kdir/.config" "$src/.config"
"${kmake[@]}" -s olddefconfig >"$work/olddefconfig.log" 2>&1 || refuse "make olddefconfig failed in $source: $(tail -n1 "$work/olddefconfig.log")."
# The same options must come out, except those that only probe this machine's tools (whether
# its OpenSSL, assembler or linker support something, and their versions: sid's 7.2.13 was
# built with a newer binutils than trixie has): they do not reach the Rust crates, whose
# symbols are checked below anyway.
probe='^[<>] CONFIG_([A-Z0-9_]*_SUPPORTS_[A-Z0-9_]*|[A-Z0-9_]*_HAS_[A-Z0-9_]*|TOOLS_[A-Z0-9_]*|PAHOLE_VERSION|AS_VERSION|LD_VERSION)='
diff <(grep '^CONFIG_' "$kdir/.config" | sort) <(grep '^CONFIG_' "$src/.config" | sort) |
	grep '^[<>]' >"$work/config.diff"
if grep -Evq "$probe" "$work/config.diff"; then
	refuse "$source does not configure the way $release was built ($(grep -Evc "$probe" "$work/config.diff") lines differ, e.g. $(grep -Ev -m1 "$probe" "$work/config.diff")): the source or the compiler is not the kernel's."
fi
[ ! -s "$work/config.diff" ] ||
	say "options that probe this machine's tools differ from the kernel's build machine: $(sed 's/^[<>] //' "$work/config.diff" | paste -sd ' ')"
"${kmake[@]}" -j"$(nproc)" prepare >"$work/prepare.log" 2>&1 ||
	refuse "building the kernel's Rust crates failed: $(grep -m1 -i 'error' "$work/prepare.log" || tail -n1 "$work/prepare.log")."

# Every Rust symbol the running kernel exports must be among the rebuilt ones, by name: the
# name carries the crate's hash, so equal names mean the same crates and compiler.
awk '$2 ~ /^_R/ { print $2 }' "$kdir/Module.symvers" | sort -u >"$work/want"
nm --defined-only "$src"/rust/*.o 2>/dev/null | awk '$3 ~ /^_R/ { print $3 }' | sort -u >"$work/have"
want_n=$(wc -l <"$work/want")
missing=$(comm -23 "$work/want" "$work/have" | wc -l)
[ "$want_n" -gt 0 ] || refuse "$kdir/Module.symvers lists no Rust symbols: the kernel exports none, so nothing built here can be checked against it."
[ "$missing" = 0 ] ||
	refuse "the rebuilt Rust crates lack $missing of the $want_n Rust symbols of $kdir/Module.symvers (e.g. $(comm -23 "$work/want" "$work/have" | head -n1)): the source, the .config or the compiler differ from the kernel's."

# The completed tree: the headers as they are (links made absolute, the Makefile pointed at the
# copy), scripts/ with target.json beside the distribution's own scripts, rust/ rebuilt.
new=$work/tree
cp -a "$kdir" "$new" || refuse "cannot copy $kdir into $cache."
(cd "$kdir" && find . -type l) | while read -r l; do
	ln -sfn "$(readlink -f "$kdir/$l")" "$new/$l"
done
rm -f "$new/scripts"
mkdir -p "$new/scripts"
for f in "$(readlink -f "$kdir/scripts")"/* "$(readlink -f "$kdir/scripts")"/.[!.]*; do
	[ -e "$f" ] && ln -s "$f" "$new/scripts/${f##*/}"
done
[ -e "$new/scripts/target.json" ] || cp "$src/scripts/target.json" "$new/scripts/"
sed -i "s|$kdir|$dest|g" "$new/Makefile"
mkdir -p "$new/rust"
cp "$src"/rust/*.rmeta "$src"/rust/*.so "$new/rust/"
complete "$new" && [ -f "$new/scripts/Makefile.build" ] && ! grep -qF "$kdir" "$new/Makefile" ||
	refuse "assembling the completed tree in $new failed."
echo "$want_stamp" >"$new/.nv_peer_mem-stamp"
echo "completed from $source (Linux $src_version) with $have_rustc on $(date -u +%F): $want_n Rust symbols match $kdir/Module.symvers" \
	>"$new/.nv_peer_mem-rust-tree"
rm -rf --one-file-system "$dest"
mv "$new" "$dest" || refuse "cannot move the completed tree into $dest."
say "completed $dest in $((SECONDS - start)) s: all $want_n Rust symbols of $release match"
echo "$dest"
