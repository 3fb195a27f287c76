#!/bin/bash
# The test suite: on each kernel line (NVPM_KLINES, default "7 6.12": Debian's newest 7.x and
# the 6.12 LTS), build the fakes and nv_peer_mem and run the VM scenarios; then the host checks
# (build warning-free, clippy, rustfmt, preflight messages, shellcheck) once.
# usage: tests/run.sh all|vm|host [SCENARIO...]
# Prints one result line per kernel and ends with "N passed, N failed"; exits non-zero if
# anything failed.
set -uo pipefail
mode=${1:-all}
shift || true
here=$(cd "$(dirname "$0")" && pwd)

passed=0 failed=0 failures=() kernel_lines=()
result() { # result PASS|FAIL name [detail]
	if [ "$1" = PASS ]; then
		passed=$((passed + 1))
		echo "PASS $2"
	else
		failed=$((failed + 1))
		failures+=("$2")
		echo "FAIL $2${3:+: $3}"
	fi
}

for KLINE in ${NVPM_KLINES:-7 6.12}; do
	export KLINE
	. "$here/build-world.sh"
	krel=$(cat "$kbuild/include/config/kernel.release")
	before_p=$passed before_f=$failed
	if [ $build_ok = 1 ]; then result PASS "$krel:build"; else result FAIL "$krel:build" "see $logs"; fi
	if [ "$mode" != host ] && [ $build_ok = 1 ]; then
		if [ $# -gt 0 ]; then
			scenarios=("$@")
		else
			mapfile -t scenarios < <(cd "$top/tests/scenarios" && for f in *.sh; do echo "${f%.sh}"; done)
		fi
		while read -r verdict name rest; do
			case $verdict in
			PASS) result PASS "$krel:vm:$name" ;;
			FAIL) result FAIL "$krel:vm:$name" "$rest" ;;
			*) echo "$verdict $name $rest" ;;
			esac
		done < <("$top/tests/vm/run-vm.sh" "$kbuild" "$initrd" "$work/vm" "${scenarios[@]}")
	fi
	if [ "$mode" != vm ] && [ $build_ok = 1 ]; then
		warnings=$(grep -h -i 'warning' "$logs"/nvidia-*.log "$logs/ib_core.log" "$logs/module.log")
		if [ -z "$warnings" ]; then result PASS "$krel:build-warning-free"
		else result FAIL "$krel:build-warning-free" "$(echo "$warnings" | head -5)"; fi

		# A second build of the same sources under clippy-driver.
		cp -r "$build_dir/module" "$build_dir/clippy"
		if KMAKE_EXTRA=CLIPPY=1 module_make "$build_dir/clippy" clean modules >"$logs/clippy.log" 2>&1 &&
			! grep -qi 'warning\|error' "$logs/clippy.log"; then
			result PASS "$krel:clippy"
		else result FAIL "$krel:clippy" "$(grep -i -A5 'warning\|error' "$logs/clippy.log" | head -20)"; fi
	fi
	kernel_lines+=("kernel $krel: $((passed - before_p)) passed, $((failed - before_f)) failed")
done

# Host checks, once (against the last kernel built).
if [ "$mode" != vm ] && [ $build_ok = 1 ]; then
	if out=$("$HOST_RUSTFMT" --check --edition 2021 --config-path "$ksrc/.rustfmt.toml" "$top"/src/*.rs 2>&1); then
		result PASS rustfmt
	else result FAIL rustfmt "$(echo "$out" | head -20)"; fi

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

	mapfile -t scripts < <(cd "$top" && git ls-files -co --exclude-standard | grep -E '\.sh$|^tests/vm/init$|^\.ci/run$' | sed "s|^|$top/|")
	if out=$(cd "$top" && shellcheck -x -S warning "${scripts[@]}" 2>&1); then result PASS shellcheck
	else result FAIL shellcheck "$(echo "$out" | head -20)"; fi
fi

printf '%s\n' "${kernel_lines[@]}"
((failed == 0)) || printf 'failed: %s\n' "${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
