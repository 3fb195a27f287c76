#!/bin/bash
# The host checks, once a run, against the last kernel line's build (tests/vm/world.sh ran):
# rustfmt, the import lint and its canary, the glue lint and its canary, the promise lint and
# its canary, the diagrams' check and its canary, preflight's messages, nv-symvers.sh,
# make install and uninstall into a DESTDIR, shellcheck. Prints PASS/FAIL lines.
set -uo pipefail
NVPM_WORLD_REUSE=1 . "$(dirname "$0")/build-world.sh"
result() { # result PASS|FAIL name [detail]
	if [ "$1" = PASS ]; then echo "PASS $2"; else echo "FAIL $2: ${3:-}" | paste -sd ' '; fi
}
if out=$("$HOST_RUSTFMT" --check --edition 2021 --config-path "$ksrc/.rustfmt.toml" "$top"/src/*.rs "$top"/src/*/*.rs 2>&1); then
	result PASS rustfmt
else result FAIL rustfmt "$(echo "$out" | head -20)"; fi

# Every import in src/ points down (tests/lint/imports.py); and the check itself fails on
# each kind of import planted in a copy of src/ (its --self-test).
python3 "$top/tests/lint/imports.py" "$top/src"
python3 "$top/tests/lint/imports.py" --self-test "$top/src"

# The C/Rust boundary: every prototype in src/glue.h agrees with its Rust declaration in
# src/glue.rs or its #[no_mangle] definition (tests/lint/glue.py, which make modules runs too);
# and the check fails on a changed argument type and a dropped prototype planted in copies.
python3 "$top/tests/lint/glue.py" "$top/src"
python3 "$top/tests/lint/glue.py" --self-test "$top/src"
# make modules refuses a source whose glue.h and glue.rs disagree, before it compiles anything:
# a copy of the module source with one argument type changed in glue.rs.
glue_copy=$work/glue-mismatch
rm -rf "$glue_copy"
mkdir -p "$glue_copy"
cp -r "$top/Makefile" "$top/Kbuild" "$top/src" "$top/scripts" "$glue_copy/"
sed -i 's/\(fn nvpm_sg_set(sg: \*mut c_void, dma: u64, len: \)c_uint/\1u64/' "$glue_copy/src/glue.rs"
if ! grep -q 'len: u64) -> \*mut c_void;' "$glue_copy/src/glue.rs"; then
	result FAIL glue:make-modules-refuses "could not plant the mismatch in $glue_copy/src/glue.rs"
elif out=$(module_make "$glue_copy" modules 2>&1); then
	result FAIL glue:make-modules-refuses "make modules built a module despite the planted mismatch"
elif grep -q 'nv_peer_mem: glue: nvpm_sg_set: argument 3 is u64 in glue.rs, c_uint in glue.h' <<<"$out" &&
	grep -q 'src/glue.h and src/glue.rs disagree' <<<"$out" && ! grep -q 'CC \[M\]\|RUSTC' <<<"$out"; then
	result PASS glue:make-modules-refuses
else result FAIL glue:make-modules-refuses "$(echo "$out" | tail -5)"; fi

# Every errno, errno mapping, log line and counter the docs promise has a test that names it
# (tests/lint/promises.py); and the check itself fails on ones planted in a copy of the docs.
python3 "$top/tests/lint/promises.py" "$top"
python3 "$top/tests/lint/promises.py" --self-test

# The design's diagrams: the registration's lifecycle names every Phase variant, the ibv_reg_mr
# path only calls src/ makes, and graphviz renders both (tests/lint/diagrams.py); the check
# fails on a variant and a call planted in a copy (its --self-test).
python3 "$top/tests/lint/diagrams.py" --render "$work/diagrams"
python3 "$top/tests/lint/diagrams.py" --self-test

preflight_case() { # preflight_case NAME EXPECTED-TEXT make-variables...
	local name=$1 want=$2 out
	shift 2
	out=$(make -s -C "$build_dir/module" preflight KDIR="$kbuild" RUSTC="$HOST_RUSTC" \
		OFA_SYMVERS="$build_dir/ib_core/Module.symvers" \
		NV_SYMVERS="$build_dir/nvidia/Module.symvers" "$@" 2>&1)
	if [ $? -ne 0 ] && grep -q -- "$want" <<<"$out"; then result PASS "preflight:$name"
	else result FAIL "preflight:$name" "wanted '$want', got: $out"; fi
}
fake_tree=$work/old-kernel-tree
mkdir -p "$fake_tree/include/config"
echo 'all:' >"$fake_tree/Makefile"
echo '# CONFIG_RUST is not set' >"$fake_tree/.config"
echo 6.1.0-28-amd64 >"$fake_tree/include/config/kernel.release"
preflight_case no-tree "no configured kernel build tree" KDIR=/nonexistent
preflight_case old-kernel "is too old" KDIR="$fake_tree"
preflight_case no-rust "built without Rust" KDIR="$fake_tree"
printf '#!/bin/sh\necho "rustc 1.78.0 (9b00956e5 2024-04-29)"\n' >"$work/other-rustc"
chmod +x "$work/other-rustc"
preflight_case other-rustc "pass RUSTC=" RUSTC="$work/other-rustc"
preflight_case no-ofed "install MLNX_OFED 5.1" OFA_SYMVERS=/dev/null
preflight_case no-nvidia "install the NVIDIA driver" NV_SYMVERS="$work/no-such-nv.symvers"
if out=$(make -s -C "$build_dir/module" preflight KDIR="$kbuild" RUSTC="$HOST_RUSTC" \
	OFA_SYMVERS="$build_dir/ib_core/Module.symvers" NV_SYMVERS="$build_dir/nvidia/Module.symvers" 2>&1); then
	result PASS preflight:complete-tree
else result FAIL preflight:complete-tree "$out"; fi

# nv-symvers.sh finds the NVIDIA module as the system does, whatever its name, place and
# compression: NVIDIA's nvidia.ko in kernel/drivers/video, Debian's nvidia-current.ko.xz in
# updates/dkms (no module named nvidia: Debian reaches it through an install line), the
# same with no modules.dep; and says so when there is none. The module column is the
# module's own name (nvidia, whatever the file), which modpost writes into nv_peer_mem's depends.
nv_symvers_case() { # nv_symvers_case NAME PATH-IN-TREE|"" COMPRESS DEPMOD
	local name=$1 path=$2 compress=$3 depmod=$4 tree=$work/nv-symvers-tree out
	rm -rf "$tree"
	mkdir -p "$tree/lib/modules/$krel"
	if [ -n "$path" ]; then
		mkdir -p "$(dirname "$tree/lib/modules/$krel/$path")"
		cp "$build_dir/nvidia/nvidia.ko" "$tree/lib/modules/$krel/$path"
		[ "$compress" = no ] || xz "$tree/lib/modules/$krel/$path"
	fi
	[ "$depmod" = no ] || depmod -b "$tree" "$krel" 2>/dev/null
	out=$(NV_MODULES_ROOT=$tree "$top/scripts/nv-symvers.sh" "$krel" 2>&1)
	if [ -n "$path" ] && grep -q "^0x[0-9a-f]*	nvidia_p2p_get_pages	$tree/lib/modules/$krel/${path%/*}/nvidia	" <<<"$out"; then
		result PASS "nv-symvers:$name"
	elif [ -z "$path" ] && grep -q "^nv-symvers: no NVIDIA module exporting nvidia_p2p_get_pages for $krel" <<<"$out"; then
		result PASS "nv-symvers:$name"
	else result FAIL "nv-symvers:$name" "$out"; fi
}
nv_symvers_case nvidia-run kernel/drivers/video/nvidia.ko no yes
nv_symvers_case debian-nvidia-current updates/dkms/nvidia-current.ko xz yes
nv_symvers_case no-modules-dep updates/dkms/nvidia-current.ko xz no
nv_symvers_case none "" no yes

# make install / uninstall by hand, into a DESTDIR: what lands where, and all of it goes.
dest=$work/make-install
rm -rf "$dest"
cp -r "$top/packaging" "$build_dir/module/"
want="./etc/infiniband/nv_peer_mem.conf ./etc/init.d/nv_peer_mem ./lib/modules/$krel/updates/nv_peer_mem.ko ./lib/systemd/system/nv_peer_mem-metrics.service ./lib/systemd/system/nv_peer_mem-metrics.timer ./lib/systemd/system/nv_peer_mem.service ./usr/libexec/nv_peer_mem/nv_peer_mem-doctor ./usr/libexec/nv_peer_mem/nv_peer_mem-metrics ./usr/libexec/nv_peer_mem/nv_peer_mem-service"
if module_make "$build_dir/module" install DESTDIR="$dest" KVER="$krel" >"$logs/install.log" 2>&1 &&
	got=$(cd "$dest" && find . -type f | sort | paste -sd ' ') && [ "$got" = "$want" ]; then
	result PASS make-install
else result FAIL make-install "got '${got:-}', wanted '$want'; see $logs/install.log"; fi
# The least mode that works: programs 0755, everything else 0644; nothing writable by others.
want_modes="644 ./etc/infiniband/nv_peer_mem.conf 755 ./etc/init.d/nv_peer_mem 644 ./lib/modules/$krel/updates/nv_peer_mem.ko 644 ./lib/systemd/system/nv_peer_mem-metrics.service 644 ./lib/systemd/system/nv_peer_mem-metrics.timer 644 ./lib/systemd/system/nv_peer_mem.service 755 ./usr/libexec/nv_peer_mem/nv_peer_mem-doctor 755 ./usr/libexec/nv_peer_mem/nv_peer_mem-metrics 755 ./usr/libexec/nv_peer_mem/nv_peer_mem-service"
if got=$(cd "$dest" && find . -type f | sort | xargs stat -c '%a %n' | paste -sd ' ') &&
	[ "$got" = "$want_modes" ]; then
	result PASS make-install-modes
else result FAIL make-install-modes "got '${got:-}', wanted '$want_modes'"; fi
echo ONBOOT=no >"$dest/etc/infiniband/nv_peer_mem.conf"
if module_make "$build_dir/module" uninstall DESTDIR="$dest" KVER="$krel" >>"$logs/install.log" 2>&1 &&
	got=$(cd "$dest" && find . -type f | paste -sd ' ') && [ "$got" = ./etc/infiniband/nv_peer_mem.conf ]; then
	result PASS make-uninstall-keeps-changed-config
else result FAIL make-uninstall-keeps-changed-config "left: '${got:-}'; see $logs/install.log"; fi
cp "$top/packaging/service/nv_peer_mem.conf" "$dest/etc/infiniband/nv_peer_mem.conf"
if module_make "$build_dir/module" uninstall DESTDIR="$dest" KVER="$krel" >>"$logs/install.log" 2>&1 &&
	[ -z "$(find "$dest" -mindepth 1 -not -type d)" ] && ! [ -e "$dest/etc/infiniband" ]; then
	result PASS make-uninstall
else result FAIL make-uninstall "left: $(cd "$dest" && find . -mindepth 1 -not -type d | paste -sd ' ')"; fi

mapfile -t scripts < <(cd "$top" && git ls-files -co --exclude-standard |
	grep -E '\.sh$|^tests/vm/init$|^\.ci/run$|^packaging/service/nv_peer_mem(-service|\.init)$' | sed "s|^|$top/|")
if out=$(cd "$top" && shellcheck -x -S warning "${scripts[@]}" 2>&1); then result PASS shellcheck
else result FAIL shellcheck "$(echo "$out" | head -20)"; fi
