# shellcheck shell=bash disable=SC2154,SC2034 # top, root, log, work: the sourcing script's; kver, failed: its to read
# What the worlds built on the stock root (tests/stock/, tests/secureboot/, tests/flavours/,
# tests/upgrade/) share. Sourced, after tests/kernel/env.sh, by a script that sets:
#   top   the repository;  work  its work directory;  log  its log;
#   root  the world's root (a copy of prepare-root.sh's), before the functions that use it run.

# world_begin PREFIX [SUBDIR...]: what every world does first. Its results print as
# "PASS|FAIL PREFIX:<check>[: <why>]" (result, fatal; failed=1 once one failed); whatever is
# mounted under work is undone now and at exit (unmount_all); work is emptied, SUBDIRs made in
# it, and the log begun; base is the prepared Debian 13 root (prepare-root.sh, the archive's
# packages only) and kver its kernel's release.
world_begin() {
	prefix=$1
	shift
	failed=0
	trap unmount_all EXIT
	unmount_all
	rm -rf --one-file-system "$work"
	mkdir -p "$work" "${@/#/$work/}"
	: >"$log"
	base=$("$top/tests/stock/prepare-root.sh" 2>>"$log") ||
		fatal root "preparing the Debian 13 root failed: $(tail -n 1 "$log")"
	kver=$(cat "$base/.kver")
}
result() { # result PASS|FAIL check [detail]
	echo "$1 $prefix:$2${3:+: $3}"
	[ "$1" = PASS ] || failed=1
}
fatal() { result FAIL "$1" "$2"; exit 1; }
unmount_all() { unmount_under "$work"; }

# Completed Rust trees are kept between runs, as the test kernels are: a tree completed by this
# very scripts/rust-tree.sh is put back into the root's cache before the install that needs it.
# rust-tree.sh then judges it as on any machine (its stamp: the headers' .config and
# Module.symvers, the rustc) and completes it again if stale. NVPM_STOCK_FRESH_TREES=1 (or a
# change to rust-tree.sh) completes them from the source package again. Keyed by the kernel's
# release, as rust-tree.sh keys its own cache: every flavour and release has its own tree.
tree_cache=$NVPM_CACHE/stock/rust-trees
tree_key=$(sha256sum "$top/scripts/rust-tree.sh" | cut -c1-16)
root_trees=/var/cache/nv_peer_mem/rust-trees
seed_tree() { # seed_tree RELEASE
	local c=$tree_cache/$1
	[ "${NVPM_STOCK_FRESH_TREES:-0}" = 0 ] && [ -d "$c" ] &&
		[ "$(cat "$c.key" 2>/dev/null)" = "$tree_key" ] || return 0
	mkdir -p "$root$root_trees"
	cp -a "$c" "$root$root_trees/$1" || rm -rf "${root:?}$root_trees/$1"
}
keep_tree() { # keep_tree RELEASE: a tree completed in this run, for the next
	local t=$root$root_trees/$1 c=$tree_cache/$1
	[ -f "$t/.nv_peer_mem-stamp" ] || return 0
	cmp -s "$t/.nv_peer_mem-stamp" "$c/.nv_peer_mem-stamp" && [ "$(cat "$c.key" 2>/dev/null)" = "$tree_key" ] &&
		return 0
	rm -rf "$c" "$c.key"
	mkdir -p "$tree_cache"
	# Another world may keep the same release at the same time: a private copy, then a rename.
	cp -a "$t" "$c.$$" && mv -T "$c.$$" "$c" && echo "$tree_key" >"$c.key" || rm -rf "$c.$$"
}

# machine_harness WORK SCENARIO-FILE...: the stock machine's test harness into $root:
# tests/stock/stock-vm.sh started by nvpm-stock.service once the system is up, tests/vm/lib.py,
# the scenarios given, the race helper, the serial console left to the tests, and the two
# GPUs' BAR images in WORK/bars (run-vm.sh looks for them beside its INITRAMFS argument) with
# their checksums in the root.
machine_harness() {
	local work=$1 t=$root/usr/lib/nvpm-stock g
	shift
	mkdir -p "$t/scenarios" "$root/etc/nvpm" "$work/bars"
	install -m 755 "$top/tests/stock/stock-vm.sh" "$t/stock-vm.sh"
	install -m 644 "$top/tests/vm/lib.py" "$top/tests/vm/cleanup.py" "$t/"
	install -m 644 "$@" "$t/scenarios/"
	gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$root/usr/local/bin/race" "$top/tests/vm/race.c" \
		>>"$log" 2>&1 || return 1
	install -m 644 "$top/tests/stock/nvpm-stock.service" "$root/etc/systemd/system/"
	ln -sf /etc/systemd/system/nvpm-stock.service "$root/etc/systemd/system/multi-user.target.wants/"
	# The serial console is the tests' output, not a login prompt.
	ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
	for g in 0 1; do
		python3 "$top/tests/vm/mkbar.py" $((g + 1)) 16 "$work/bars/gpu$g.img" "$work/bars/gpu$g.sha256"
		cp "$work/bars/gpu$g.sha256" "$root/etc/nvpm/"
	done
}
