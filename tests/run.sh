#!/bin/bash
# The test suite: build the deb and rpm packages once; on each kernel line (NVPM_KLINES; make
# check: Debian's newest 7.x, make fullcheck: and the 6.12 LTS), build the fakes and nv_peer_mem and run the
# VM scenarios, build the packaged source with DKMS and boot the VM with the packaged service
# and that module; then the host checks (build warning-free, clippy, rustfmt, preflight
# messages, shellcheck) and the deb's install/upgrade/purge cycle, once.
# The VM scenarios run once per emulated world of the matrix (NVIDIA driver generation x
# MLNX_OFED core, tests/README.md); NVPM_MATRIX_<line> (e.g. NVPM_MATRIX_7="r580:24.x")
# overrides a kernel line's list.
# usage: tests/run.sh all|vm|host [SCENARIO...] | tests/run.sh bench|stock
# Prints one result line per kernel and ends with "N passed, N failed"; exits non-zero if
# anything failed.
set -uo pipefail
mode=${1:-all}
shift || true
here=$(cd "$(dirname "$0")" && pwd)

passed=0 failed=0 failures=() kernel_lines=()

# The worlds each kernel line runs the whole VM suite in (time budget: tests/README.md). make
# check: on the newest kernel the newest, R515 (its own persistent pages and put_pages) and the
# oldest driver; R535 boots there for the fault-injection sweep only; on the LTS line the newest
# (MLNX_OFED 4.9 supports no 6.x kernel). make fullcheck (NVPM_FULL=1): every world real
# systems pair on the newest kernel, the newest and the oldest on the LTS line.
matrix_for() {
	case $1:${NVPM_FULL:-0} in
	7:0) echo "${NVPM_MATRIX_7:-r580:24.x r515:5.x r470:4.9}" ;;
	7:*) echo "${NVPM_MATRIX_7:-r580:24.x r535:5.x r515:5.x r470:4.9}" ;;
	*:0) echo "${NVPM_MATRIX_6_12:-r580:24.x}" ;;
	*) echo "${NVPM_MATRIX_6_12:-r580:24.x r470:4.9}" ;;
	esac
}
# The sweep's world: R535 x 5.x, NVIDIA's persistent-pages API (so every call site is reached).
sweep_world=${NVPM_SWEEP_WORLD:-r535:5.x}
# The worlds (LINE:WORLD) whose scenarios boot the server machine (run-vm.sh: gpu0 and edu0,
# the pair the scenarios use, behind one PCIe switch; gpu1 and edu1 on root ports of their
# own) instead of the flat one: the oldest world on each line, the one in which the switch
# machine once met 'DMA PTE ... already set' (Documentation/testing.md, "The PCIe switch").
server_worlds=${NVPM_SERVER_WORLDS:-7:r470:4.9 6.12:r470:4.9}
topology_for() { # topology_for LINE WORLD: server or flat
	if [[ " $server_worlds " == *" $1:$2 "* ]]; then echo server; else echo flat; fi
}
# make check's partial worlds (time budget, tests/README.md). R515 on the newest kernel runs
# the scenarios whose outcome depends on the driver generation (they read NV_GEN or the
# persistent API: what R515 does differently is its free path, put_pages and persistent pages),
# with the plain registration as their base. The LTS line runs those that lean hardest on the
# kernel's own services (module references, DMA and the IOMMU, workqueues, sysfs and debugfs,
# allocation failures, locking under races); the module's code is the same on both lines but
# for one errno (src/compat.rs). make fullcheck runs every scenario in every world.
generation_scenarios="02-load-unload 03-register-dma 09-persistent 13-free-races 17-free-at-every-step
	18-driver-hazard 22-page-table-versions 23-counters 25-one-pin 27-exposure"
kernel_scenarios="02-load-unload 03-register-dma 07-invalidate 10-rmmod-busy 12-alloc-failures
	13-free-races 16-callback-outlives-release 19-worker-teardown 21-unmaps-sg-leak 23-counters
	26-coalesced-sg 27-exposure 28-bad-inputs"
# The oldest world (R470 x MLNX_OFED 4.9) runs the generation's part, those whose outcome hangs
# on the core (they read IB_CORE: the legacy registration, 4.9's defaults and counters, its sg
# tables) or whose path runs through 4.9's own invalidation (no core lock across client calls,
# the teardown inside invalidate: 07, 16, 19, 21), and the bad-input table (41 rows on 4.9).
# What it leaves out (01 04 05 06 10 11 12 14 15) exercises the registration's entry and its
# failures, the same code whatever the world; the newest world runs them all.
oldest_scenarios="$generation_scenarios 07-invalidate 08-invalidate-legacy 16-callback-outlives-release
	19-worker-teardown 20-mofed49-defaults 21-unmaps-sg-leak 26-coalesced-sg 28-bad-inputs"
partial_world() { # partial_world LINE WORLD: the scenarios a partial world runs; nothing: all
	[ "${NVPM_FULL:-0}" = 0 ] || return 0
	case $1:$2 in
	7:r515:5.x) echo $generation_scenarios ;;
	7:r470:4.9) echo $oldest_scenarios ;;
	6.12:*) echo $kernel_scenarios ;;
	esac
}
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

# collect PREFIX COMMAND...: turn a test script's "PASS name" / "FAIL name: detail" lines into
# results named PREFIX+name; other lines pass through. A command that exits non-zero without
# a FAIL line (a crash, an early exit) is a FAIL of its own, and so is one that gave no result.
collect() {
	local prefix=$1 verdict name rest fd pid rc fails=0 results=0
	shift
	exec {fd}< <("$@")
	pid=$!
	while read -r verdict name rest <&"$fd"; do
		case $verdict in
		PASS) result PASS "$prefix${name%:}" ;;
		FAIL) result FAIL "$prefix${name%:}" "$rest"; fails=$((fails + 1)) ;;
		*) echo "$verdict $name $rest"; continue ;;
		esac
		results=$((results + 1))
	done
	exec {fd}<&-
	wait "$pid"
	rc=$?
	if [ "$rc" != 0 ] && [ $fails = 0 ]; then
		result FAIL "${prefix}${1##*/}" "exited $rc without a FAIL line: $*"
	elif [ $results = 0 ]; then
		result FAIL "${prefix}${1##*/}" "gave no result: $*"
	fi
}

. "$here/kernel/env.sh"
packages=$NVPM_CACHE/packages
if [ "$mode" = all ] || [ "$mode" = stock ]; then
	collect "" "$here/packaging/build-packages.sh" "$packages"
fi
[ "$mode" != all ] || collect "" "$here/packaging/systemd-verify.sh"

# The stock world (tests/stock/): the debs with apt on Debian 13 with Debian's own 7.x kernel,
# DKMS, systemd. It runs beside the kernel lines (much of it waits on the archive and the disk)
# and its results are printed at the end. NVPM_STOCK=0 leaves it out. The host tools and the
# package lists it shares with the kernel lines are made ready first.
stock_pid=
if { [ "$mode" = all ] || [ "$mode" = stock ]; } && [ "${NVPM_STOCK:-1}" != 0 ]; then
	"$here/kernel/setup-host.sh" || die "host setup failed"
	refresh_lists || say "cannot refresh the Debian package lists; the cached ones are used"
	stock_out=$NVPM_CACHE/stock.out
	"$here/stock/stock-world.sh" "$packages" >"$stock_out" 2>&1 &
	stock_pid=$!
fi
dkms_deb=$(ls "$packages"/deb/nvidia-peer-memory-dkms_*_all.deb 2>/dev/null | tail -n 1)
service_deb=$(ls "$packages"/deb/nvidia-peer-memory_*_all.deb 2>/dev/null | tail -n 1)

# make bench: the stock kernel (tests/stock/stock-world.sh --bench: Debian's kernel and the debs,
# the production configuration) and the newest test kernel (KASAN, lockdep, kmemleak), each one
# boot in the r580 x 24.x world with 1 GiB BARs; NVPM_BENCH_KERNELS="stock test" picks them. The
# figures go to Documentation/perf/ and Documentation/performance.md (tests/bench/report.py),
# only when every boot passed.
if [ "$mode" = bench ]; then
	top=$(cd "$here/.." && pwd)
	bench_kernels=${NVPM_BENCH_KERNELS:-stock test}
	bench_logs=()
	if [[ " $bench_kernels " == *" stock "* ]]; then
		"$here/kernel/setup-host.sh" || die "host setup failed"
		refresh_lists || say "cannot refresh the Debian package lists; the cached ones are used"
		"$here/packaging/build-packages.sh" "$packages" >"$NVPM_CACHE/bench-packages.out" 2>&1 ||
			die "building the packages failed: $NVPM_CACHE/bench-packages.out"
		"$here/stock/stock-world.sh" --bench "$packages" 2>&1 | tee "$NVPM_CACHE/stock-bench.out"
		if [ "${PIPESTATUS[0]}" != 0 ] || ! grep -qx 'PASS stock:bench-vm' "$NVPM_CACHE/stock-bench.out"; then
			die "the stock kernel's bench failed (see $NVPM_CACHE/work/stock-bench/): Documentation/ left as it was"
		fi
		bench_logs+=(--stock "$NVPM_CACHE/work/stock-bench/boot-bench/console.log")
	fi
	if [[ " $bench_kernels " == *" test "* ]]; then
		KLINE=${NVPM_KLINES:-7}
		export KLINE
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
fi

# make check: the newest 7.x line (and the stock kernel, below); make fullcheck adds the 6.12
# LTS line (time budget, tests/README.md). NVPM_KLINES= names the lines either way.
if [ "${NVPM_FULL:-0}" = 0 ]; then klines=${NVPM_KLINES:-7}; else klines=${NVPM_KLINES:-7 6.12}; fi
[ "$mode" != stock ] || klines=
last_kline=${klines##* }

# The VM boots of every kernel line share NVPM_VM_JOBS slots (default: one per host core: a TCG
# machine keeps about one core busy); the stock world's boots are not counted.
vm_slots=${NVPM_WORK:-$NVPM_CACHE/work}/vm-slots
rm -rf "$vm_slots"
mkdir -p "$vm_slots"
vm_start() { # vm_start OUT COMMAND...: COMMAND in the background once a slot is free; sets vm_pid
	local out=$1 n p
	shift
	vm_pid=
	while :; do
		{
			flock 9
			n=0
			for p in "$vm_slots"/*; do
				[ -e "$p" ] || continue
				if kill -0 "${p##*/}" 2>/dev/null; then n=$((n + 1)); else rm -f "$p"; fi
			done
			if [ $n -lt "${NVPM_VM_JOBS:-$(nproc)}" ]; then
				"$@" >"$out" 2>&1 9>&- &
				vm_pid=$!
				: >"$vm_slots/$vm_pid"
			fi
		} 9>"$vm_slots/.lock"
		[ -z "$vm_pid" ] || return 0
		sleep 2
	done
}

# kernel_line FIRST: one kernel line ($KLINE): build, VM scenarios, DKMS and the packaged
# service, the build checks; the host checks after the last line. Prints result lines.
kernel_line() {
	local first_line=$1
	shift
	# every_line: the boots make check gives the first line only (the doctor's, the service's)
	# are this line's too: it is the first, or this is make fullcheck.
	every_line() { [ "$first_line" = 1 ] || [ "${NVPM_FULL:-0}" != 0 ]; }
	. "$here/build-world.sh"
	krel=$(cat "$kbuild/include/config/kernel.release")
	echo "$krel" >"$lines_dir/$KLINE.krel"
	if [ $build_ok = 1 ]; then result PASS "$krel:build"; else result FAIL "$krel:build" "see $logs"; fi
	local njobs=0 job_logs=() vm_pids=() jobs_dir=$work/vm-jobs
	rm -rf "$jobs_dir"
	mkdir -p "$jobs_dir"
	# A boot (or boots) as a job: its result lines are collected with PREFIX, in job order.
	start_job() { # start_job PREFIX COMMAND...
		local prefix=$1
		shift
		njobs=$((njobs + 1))
		echo "$prefix" >"$jobs_dir/$njobs.prefix"
		vm_start "$jobs_dir/$njobs.out" "$@"
		vm_pids+=("$vm_pid")
	}
	vm_job() { # vm_job PREFIX VM-DIR TOPOLOGY APPEND SCENARIO...: a boot whose log the sweep reads
		local prefix=$1 dir=$2 topo=$3 append=$4
		shift 4
		job_logs+=("$dir/console.log")
		start_job "$prefix" env NVPM_VM_TOPOLOGY="$topo" NVPM_VM_APPEND="$append" \
			"$top/tests/vm/run-vm.sh" "$kbuild" "$initrd" "$dir" "$@"
	}
	if [ "$mode" != host ] && [ $build_ok = 1 ]; then
		if [ $# -gt 0 ]; then
			scenarios=("$@")
		else
			mapfile -t scenarios < <(cd "$top/tests/scenarios" && for f in *.sh; do echo "${f%.sh}"; done)
		fi
		# The doctor boots the machine with a PCIe switch (run-vm.sh), the in-kernel stress and
		# the fault-injection sweep each boot alone, the others share one boot per world.
		flat=() switched=() alone=()
		for sc in "${scenarios[@]}"; do
			case $sc in
			*-doctor) switched+=("$sc") ;;
			*-stress | *-sweep) alone+=("$sc") ;;
			*) flat+=("$sc") ;;
			esac
		done
		named=$#
		worlds=$(matrix_for "$KLINE")
		first_world=${worlds%% *} last_world=${worlds##* }
		# runs_here SCENARIO WORLD: where the costly scenarios run (time budget:
		# tests/README.md); named on the command line, every scenario runs in every world.
		# - the doctor (24, its own boot): on the first line (every line in make fullcheck), its
		#   first world and the first whose core has memory_peers (5.x): the two answers it
		#   gives about NCCL;
		# - the bad-input table (28): the first line's last world (oldest driver and core), the
		#   other lines' first (newest);
		# - the in-kernel stress (29): the first line's first world (make stress: long, in two);
		# - the fault-injection sweep (30): the first line, in $sweep_world (booted for it alone
		#   where the matrix has no such world);
		# - a partial world (partial_world above) runs its own list.
		doctor_5x=
		runs_here() {
			[ "$named" = 0 ] || return 0
			local only
			only=$(partial_world "$KLINE" "$2")
			case $1 in *-doctor | *-stress | *-sweep) ;; *)
				[ -z "$only" ] || [[ " $only " == *" $1 "* ]] || return 1 ;;
			esac
			case $1 in
			*-doctor)
				every_line || return 1
				[ "$2" = "$first_world" ] && return 0
				if [ "${2#*:}" = 5.x ] && [ -z "$doctor_5x" ]; then doctor_5x=1; return 0; fi
				return 1
				;;
			*-bad-inputs)
				if [ "$first_line" = 1 ]; then [ "$2" = "$last_world" ]; else [ "$2" = "$first_world" ]; fi
				;;
			*-stress) [ "$first_line" = 1 ] && [ "$2" = "$first_world" ] ;;
			*-sweep) [ "$first_line" = 1 ] && [ "$2" = "$sweep_world" ] ;;
			*) return 0 ;;
			esac
		}
		# The boots start longest first, so that no long one is left for the end (time budget,
		# tests/README.md): the sweep, the worlds by their number of scenarios, the stress, the
		# canaries' two boots, the doctor's. NVPM_VM_REPEAT boots each world that many times (make
		# racetest).
		local pass pass_worlds world rep tag dir append these doctor sc
		flat_here() { # flat_here WORLD: the shared boot's scenarios that run in WORLD, one a line
			local s
			for s in "${flat[@]}"; do ! runs_here "$s" "$1" || echo "$s"; done
		}
		for pass in sweep worlds stress canaries switched; do
			case $pass in
			sweep)
				pass_worlds=$worlds
				[ "$named" != 0 ] || [ "$first_line" != 1 ] || pass_worlds=$sweep_world
				;;
			stress) pass_worlds=$worlds ;;
			worlds) pass_worlds=$(for world in $worlds; do echo "$(flat_here "$world" | wc -l) $world"; done |
				sort -s -k1,1nr | cut -d' ' -f2 | paste -sd ' ') ;;
			canaries)
				# The net's own test (tests/canaries/): every kind of kernel report, planted, fails
				# the scenario that met it. Once, on the first line. Not a vm_job: its sweep runs
				# plant reports, the sweep's report must not count them.
				if [ "$first_line" = 1 ] && [ "$named" = 0 ]; then
					start_job "$krel:" "$top/tests/canaries/canary-vm.sh" "$kbuild" "$initrd" "$work" \
						"nvpm.nvidia=r580 nvpm.ibcore=24.x"
				fi
				continue
				;;
			switched) pass_worlds=$worlds ;;
			esac
			for world in $pass_worlds; do
				for ((rep = 1; rep <= ${NVPM_VM_REPEAT:-1}; rep++)); do
					tag=$world dir=$work/vm-${world/:/-}
					[ "${NVPM_VM_REPEAT:-1}" = 1 ] || tag=$world:run$rep dir=$dir-run$rep
					append="nvpm.nvidia=${world%%:*} nvpm.ibcore=${world#*:}${NVPM_VM_EXTRA_APPEND:+ $NVPM_VM_EXTRA_APPEND}"
					case $pass in
					sweep | stress)
						for sc in "${alone[@]}"; do
							[[ $sc == *-$pass ]] || continue
							! runs_here "$sc" "$world" || vm_job "$krel:$tag:" "$dir-${sc#*-}" flat "$append" "$sc"
						done
						;;
					worlds)
						mapfile -t these < <(flat_here "$world")
						[ ${#these[@]} = 0 ] ||
							vm_job "$krel:$tag:" "$dir" "$(topology_for "$KLINE" "$world")" "$append" "${these[@]}"
						;;
					switched)
						doctor=()
						for sc in "${switched[@]}"; do ! runs_here "$sc" "$world" || doctor+=("$sc"); done
						[ ${#doctor[@]} = 0 ] ||
							vm_job "$krel:$tag:switch:" "$dir-switch" switch "$append" "${doctor[@]}"
						;;
					esac
				done
			done
		done
	fi
	# While the last boots run: DKMS and the packaged service (one more boot, on the first line;
	# on every line in make fullcheck), the build checks.
	if [ "$mode" = all ] && [ $build_ok = 1 ]; then
		if [ -n "$dkms_deb" ] && [ -n "$service_deb" ]; then
			collect "" "$here/packaging/dkms.sh" "$dkms_deb" "$kbuild" "$work/dkms" \
				"$build_dir/ib_core/Module.symvers" "$build_dir/nvidia/Module.symvers"
			dkms_ko=$work/dkms/lib-modules/$krel/updates/dkms/nv_peer_mem.ko
			if ! every_line; then
				: # the service's boot runs on the first line
			elif [ -f "$dkms_ko" ]; then
				start_job "$krel:service:" "$here/packaging/service-vm.sh" "$kbuild" "$work" \
					"$service_deb" "$dkms_ko" "$build_dir"
			else result FAIL "$krel:service" "no module built by DKMS"; fi
		else result FAIL "$krel:dkms" "no packages in $packages/deb"; fi
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
		# Every function the module calls is known to the sweep as fallible or not.
		collect "$krel:" python3 "$top/tests/sweep/sites.py" --check "$build_dir/module/nv_peer_mem.ko"
	fi
	if [ ${#vm_pids[@]} -gt 0 ]; then
		wait "${vm_pids[@]}"
		for ((j = 1; j <= njobs; j++)); do
			collect "$(cat "$jobs_dir/$j.prefix")" cat "$jobs_dir/$j.out"
		done
		# The fault-injection sweep (30): its runs of every world against the module's sites.
		if grep -qs '^SWEEP ' "${job_logs[@]}"; then
			collect "$krel:" python3 "$top/tests/sweep/report.py" "$build_dir/sweep-sites.txt" \
				"${job_logs[@]}"
		fi
		# make stress: its figures go to Documentation/testing.md, with the command.
		if [ -n "${NVPM_TESTING_REPORT:-}" ]; then
			NVPM_SWEEP_SITES="$build_dir/sweep-sites.txt" \
				python3 "$top/tests/testing-report.py" "$NVPM_TESTING_REPORT" \
				"$top/Documentation/testing.md" "${job_logs[@]}"
		fi
	fi
	# Host checks, once, against the last kernel line built (its build, in this subshell);
	# their results are not that line's.
	[ "$KLINE" != "$last_kline" ] || [ $build_ok != 1 ] || [ "$mode" = vm ] || [ "$mode" = stock ] ||
		host_checks >"$lines_dir/host.out"
}

# host_checks: rustfmt, the import lint, preflight's messages, nv-symvers.sh, make install and
# uninstall, shellcheck; against the kernel line whose build-world.sh was sourced last.
host_checks() {
	if out=$("$HOST_RUSTFMT" --check --edition 2021 --config-path "$ksrc/.rustfmt.toml" "$top"/src/*.rs 2>&1); then
		result PASS rustfmt
	else result FAIL rustfmt "$(echo "$out" | head -20)"; fi

	# Every import in src/ points down (tests/lint/imports.py); and the check itself fails on
	# each kind of import planted in a copy of src/ (its --self-test).
	collect "" python3 "$top/tests/lint/imports.py" "$top/src"
	collect "" python3 "$top/tests/lint/imports.py" --self-test "$top/src"

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
	want="./etc/infiniband/nv_peer_mem.conf ./etc/init.d/nv_peer_mem ./lib/modules/$krel/updates/nv_peer_mem.ko ./lib/systemd/system/nv_peer_mem.service ./usr/libexec/nv_peer_mem/nv_peer_mem-doctor ./usr/libexec/nv_peer_mem/nv_peer_mem-service"
	if module_make "$build_dir/module" install DESTDIR="$dest" KVER="$krel" >"$logs/install.log" 2>&1 &&
		got=$(cd "$dest" && find . -type f | sort | paste -sd ' ') && [ "$got" = "$want" ]; then
		result PASS make-install
	else result FAIL make-install "got '${got:-}', wanted '$want'; see $logs/install.log"; fi
	# The least mode that works: programs 0755, everything else 0644; nothing writable by others.
	want_modes="644 ./etc/infiniband/nv_peer_mem.conf 755 ./etc/init.d/nv_peer_mem 644 ./lib/modules/$krel/updates/nv_peer_mem.ko 644 ./lib/systemd/system/nv_peer_mem.service 755 ./usr/libexec/nv_peer_mem/nv_peer_mem-doctor 755 ./usr/libexec/nv_peer_mem/nv_peer_mem-service"
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
}

lines_dir=${NVPM_WORK:-$NVPM_CACHE/work}/lines
rm -rf "$lines_dir"
mkdir -p "$lines_dir"
# The test kernels first, one after the other (they share apt's download directory and both
# cores); then the kernel lines side by side, their boots sharing the VM slots. Results are
# printed line by line once each is done.
if [ -n "$klines" ]; then
	"$here/kernel/setup-host.sh" || die "host setup failed"
	for KLINE in $klines; do
		KLINE=$KLINE "$here/kernel/build-kernel.sh" >/dev/null || die "no test kernel for the $KLINE line"
	done
fi
first=1 line_pids=()
for KLINE in $klines; do
	(
		export KLINE
		kernel_line $first "$@"
	) >"$lines_dir/$KLINE.out" &
	line_pids+=($!)
	first=0
done
i=0
for KLINE in $klines; do
	wait "${line_pids[$i]}"
	rc=$?
	i=$((i + 1))
	before_p=$passed before_f=$failed
	collect "" cat "$lines_dir/$KLINE.out"
	[ "$rc" = 0 ] || [ "$failed" != "$before_f" ] || result FAIL "$KLINE" "the $KLINE kernel line stopped (exit $rc)"
	kernel_lines+=("kernel $(cat "$lines_dir/$KLINE.krel" 2>/dev/null || echo "$KLINE"): $((passed - before_p)) passed, $((failed - before_f)) failed")
done
[ ! -s "$lines_dir/host.out" ] || collect "" cat "$lines_dir/host.out"

# nv_peer_mem doctor against the fake sysfs/proc trees of tests/doctor/cases (no kernel needed).
if [ "$mode" != vm ] && [ "$mode" != stock ]; then
	collect "" "$here/doctor/run.sh"
fi

# The deb's life in a throwaway root: install, upgrade, remove, purge.
if [ "$mode" = all ] && [ -n "$service_deb" ]; then
	collect "" "$here/packaging/deb-lifecycle.sh" "$packages"
fi

# The stock world's results, once it is done; its exit status counts too.
if [ -n "$stock_pid" ]; then
	wait "$stock_pid"
	stock_rc=$?
	before_p=$passed before_f=$failed
	collect "" cat "$stock_out"
	[ "$stock_rc" = 0 ] || [ "$failed" != "$before_f" ] ||
		result FAIL stock "stock-world.sh exited $stock_rc; see $stock_out"
	kernel_lines+=("stock Debian 13 kernel: $((passed - before_p)) passed, $((failed - before_f)) failed")
fi

printf '%s\n' "${kernel_lines[@]}"
((failed == 0)) || printf 'failed: %s\n' "${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
