#!/bin/bash
# Fetch Debian's kernel source for $KLINE, build it with the repo's config fragment and cache
# the tree outside the repo, keyed by source version and fragment hash. Prints the build dir.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"

mkdir -p "$NVPM_CACHE/kernel"

# Newest source package of the wanted line: "name version".
pick_package() {
	local pat
	case $KLINE in
	7) pat='^linux-source-7\.[0-9]+$' ;;
	*) pat="^linux-source-${KLINE//./\\.}\$" ;;
	esac
	apt-cache "${apt_opts[@]}" search --names-only '^linux-source-' | awk '{print $1}' | grep -E "$pat" |
		while read -r name; do
			ver=$(apt-cache "${apt_opts[@]}" policy "$name" | awk '/Candidate:/{print $2}')
			[ "$ver" != "(none)" ] && echo "$name $ver"
		done | sort -V -k1,1 | tail -n1
}

frag_hash=$(cat "$here/config.fragment" | sha256sum | cut -c1-12)

if refresh_lists && pkg=$(pick_package) && [ -n "$pkg" ]; then
	name=${pkg% *} ver=${pkg#* }
	key="${name#linux-source-}_${ver//[^A-Za-z0-9.+-]/_}_$frag_hash"
else
	# Offline: use the newest cached build of this line with the current fragment.
	key=$(cd "$NVPM_CACHE/kernel" && ls -d "${KLINE}"*"_$frag_hash" 2>/dev/null | sort -V | tail -n1) ||
		true
	[ -n "$key" ] && [ -f "$NVPM_CACHE/kernel/$key/.done" ] ||
		die "cannot reach the Debian archive and no cached $KLINE.x kernel is built"
	say "offline: using cached kernel $key"
fi

top=$NVPM_CACHE/kernel/$key
if [ -f "$top/.done" ]; then
	echo "$top/build"
	exit 0
fi

say "test kernel $name $ver (fragment $frag_hash): not cached, building (~8-9 min on 2 cores)"
rm -rf "$top"
mkdir -p "$top/build"
(cd "$apt_dir" && rm -f ./*.deb && apt-get "${apt_opts[@]}" download "$name=$ver" >/dev/null 2>&1) ||
	die "downloading $name $ver failed"
dpkg-deb --fsys-tarfile "$apt_dir"/"${name}"_*.deb | tar -x -O --wildcards "./usr/src/$name.tar.*" |
	tar -x -J -C "$top"
mv "$top/$name" "$top/src"
rm -f "$apt_dir"/*.deb

mapfile -t kargs < <(kmake_args)
kmake() { make -C "$top/src" O="$top/build" "${kargs[@]}" "$@"; }
kmake -s tinyconfig >/dev/null
(cd "$top/build" && "$top/src/scripts/kconfig/merge_config.sh" -m -O . .config "$here/config.fragment" \
	>/dev/null)
kmake -s olddefconfig >/dev/null
# Every option the fragment asks for must have survived olddefconfig.
bad=0
while IFS= read -r line; do
	case $line in \#* | "") continue ;; esac
	opt=${line%%=*} val=${line#*=}
	if [ "$val" = n ]; then
		grep -qx "$opt=[ym]" "$top/build/.config" && { say "config: $opt is set, wanted off"; bad=1; }
	else
		grep -qx "$line" "$top/build/.config" || { say "config: $line did not stick"; bad=1; }
	fi
done <"$here/config.fragment"
[ $bad = 0 ] || die "the config fragment does not apply to $name $ver"

jobs=$(($(nproc) + 1))
start=$SECONDS
kmake -j"$jobs" -s >"$top/build.log" 2>&1 || { tail -n 30 "$top/build.log" >&2; die "kernel build failed: $top/build.log"; }
say "built $name $ver in $((SECONDS - start)) s"
touch "$top/.done"
echo "$top/build"
