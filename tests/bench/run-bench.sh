#!/bin/bash
# make bench (not part of make check): registration timed in the emulated world.
# the stock kernel (tests/stock/stock-world.sh --bench: Debian's kernel and the debs,
# the production configuration; NVPM_BENCH_BOOTS boots, 3, judged together on the median of each
# figure) and the newest test kernel (KASAN, lockdep, kmemleak; one boot), in the r580 x 24.x
# world with 1 GiB BARs; NVPM_BENCH_KERNELS="stock test" picks them. The figures go to
# Documentation/perf/ and Documentation/performance.md (tests/bench/report.py), only when every
# boot passed. Its work goes to NVPM_WORK (default: the cache's work/).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
top=$(cd "$here/.." && pwd)
. "$here/kernel/env.sh"
bench_work=${NVPM_WORK:-$NVPM_CACHE/work}
packages=$bench_work/bench-packages
bench_kernels=${NVPM_BENCH_KERNELS:-stock test}
bench_logs=()
if [[ " $bench_kernels " == *" stock "* ]]; then
	"$here/kernel/setup-host.sh" || die "host setup failed"
	refresh_lists || say "cannot refresh the Debian package lists; the cached ones are used"
	mkdir -p "$bench_work"
	"$here/packaging/build-packages.sh" "$packages" >"$bench_work/bench-packages.out" 2>&1 ||
		die "building the packages failed: $bench_work/bench-packages.out"
	"$here/stock/stock-world.sh" --bench "$packages" 2>&1 | tee "$bench_work/stock-bench.out"
	if [ "${PIPESTATUS[0]}" != 0 ] || ! grep -qx 'PASS stock:bench-vm' "$bench_work/stock-bench.out"; then
		die "the stock kernel's bench failed (see $bench_work/stock-bench/): Documentation/ left as it was"
	fi
	while read -r console; do
		bench_logs+=(--stock "$console")
	done <"$bench_work/stock-bench/bench-boots.txt"
fi
if [[ " $bench_kernels " == *" test "* ]]; then
	KLINE=${NVPM_KLINES:-7}
	export KLINE
	# shellcheck source=tests/build-world.sh
	. "$here/build-world.sh"
	[ $build_ok = 1 ] || die "the build failed, see $logs"
	calib=$("$here/bench/host-calibration.sh" "$build_dir/calibrate") || die "the host's calibration run failed"
	NVPM_GPU_MIB=${NVPM_BENCH_GPU_MIB:-1024} NVPM_VM_TIMEOUT=${NVPM_BENCH_TIMEOUT:-5400} \
		NVPM_VM_APPEND="nvpm.nvidia=r580 nvpm.ibcore=24.x nvpm.calib=$calib${NVPM_BENCH_COST_PCT:+ nvpm.cost_pct=$NVPM_BENCH_COST_PCT}" \
		"$top/tests/vm/run-vm.sh" "$kbuild" "$initrd" "$work/vm-bench" bench-vm | tee "$work/bench-vm.out"
	# A boot that failed (a "not ok", a kernel report, a crash) leaves the figures and the docs alone.
	if [ "${PIPESTATUS[0]}" != 0 ] || grep -q '^FAIL' "$work/bench-vm.out" || ! grep -q '^PASS bench-vm$' "$work/bench-vm.out"; then
		die "the bench VM failed (see $work/vm-bench/console.log): Documentation/ left as it was"
	fi
	bench_logs+=(--test "$work/vm-bench/console.log")
fi
[ ${#bench_logs[@]} -gt 0 ] || die "NVPM_BENCH_KERNELS='$bench_kernels' names neither stock nor test"
exec python3 "$top/tests/bench/report.py" "${bench_logs[@]}" "$top/Documentation/perf" \
	"$top/Documentation/performance.md"
