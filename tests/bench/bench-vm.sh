# shellcheck shell=sh
# make bench, inside the VM (sourced by /init after tests/lib.sh): registration timed in the
# kernel by the fake ib_core's "bench" (the client's calls only) and, for the floor, by the fake
# nvidia.ko's "floor" (the P2P calls and the cheapest sg list). Prints one "BENCH key=value..."
# line per case; tests/bench/report.py turns them into JSON, a table and plots.
# The NIC is edu1 in an identity IOMMU domain (iommu=pt, as GPUDirect RDMA setups run), so
# contiguous BAR pages have contiguous DMA addresses.
SIZES=${BENCH_SIZES:-"0x10000 0x40000 0x100000 0x200000 0x800000 0x2000000 0x8000000 0x20000000 0x40000000"}
VA=0x7f0000000000
VA2=0x7f0040000000
edu1=$(for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1234:0x11e8 ] && echo "$d"
done | sed -n 2p)
echo identity >"$edu1/iommu_group/type" || echo "bench: edu1 keeps its IOMMU domain"
load_world || { echo "not ok - load"; exit 1; }
P=/sys/module/nv_peer_mem/parameters
# The cost model's scale (nvpm.cost_pct=, from NVPM_BENCH_COST_PCT): the emulated test kernel
# runs kernel code far slower than a native one, so the model's times are scaled up to keep
# NVIDIA's share of a registration what it is on real hardware (Documentation/performance.md).
COST=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^nvpm\.cost_pct=//p')
: "${COST:=100}"
echo "$COST" >/sys/module/nvidia/parameters/cost_scale_pct
echo "BENCH kind=info cost_scale_pct=$COST"

# iters SIZE: enough iterations for a stable mean, fewer for big buffers.
iters() {
	case $(($1)) in
	65536) echo 1000 ;; 262144) echo 500 ;; 1048576 | 2097152) echo 200 ;;
	8388608) echo 50 ;; 33554432) echo 20 ;; 134217728) echo 10 ;; *) echo 4 ;;
	esac
}
api_ns() { nv_stat api_ns; }

# module_case CASE LAYOUT SIZE: the module's registration, timed phase by phase.
module_case() {
	c=$1 layout=$2 size=$3 n=$(iters "$3")
	ctl_ib "bench clear"
	a0=$(api_ns) p0=$(nv_stat pin_calls) u0=$(nv_stat unpin_calls)
	ctl_ib "bench $c edu1 $VA $size $n" || { echo "not ok - bench $c $layout $size"; return; }
	a1=$(api_ns) p1=$(nv_stat pin_calls) u1=$(nv_stat unpin_calls)
	echo "BENCH kind=module case=$c layout=$layout size=$((size)) nvidia_ns=$(((a1 - a0) / n)) pin_calls=$(((p1 - p0) / n)) unpin_calls=$(((u1 - u0) / n)) $(cat $IBC/bench)"
}

# floor_case LAYOUT SIZE: the same sequence straight against the P2P API.
floor_case() {
	layout=$1 size=$2 n=$(iters "$2")
	a0=$(api_ns)
	ctl_nv "floor $VA $size $n 1" || { echo "not ok - floor $layout $size"; return; }
	a1=$(api_ns)
	echo "BENCH kind=floor case=floor layout=$layout size=$((size)) nvidia_ns=$(((a1 - a0) / n)) $(cat $NV/floor)"
}

# held_case CASE LAYOUT SIZE: one registration through the core: entries, NIC page size and the
# bytes the module holds (registration view).
held_case() {
	ctl_ib "reg 1 edu1 $VA $3" || { echo "not ok - reg $1 $2 $3"; return; }
	view=$(sed -n '2p' /sys/kernel/debug/nv_peer_mem/registrations)
	reg=$(grep '^id=1 ' $IBC/regs)
	# shellcheck disable=SC2086 # fields
	set -- "$1" "$2" "$3" $view
	echo "BENCH kind=held case=$1 layout=$2 size=$(($3)) sg_entries=${10} bytes=${12} $(echo "$reg" | tr ' ' '\n' | grep -E '^(nents|nic_page_size)=' | tr '\n' ' ')"
	ctl_ib "dereg 1"
}

with_buffer() { # with_buffer LAYOUT SIZE COMMAND...: cudaMalloc, run, cudaFree
	layout=$1 size=$2
	shift 2
	ctl_nv "alloc $VA $size $layout" || { echo "not ok - alloc $layout $size"; return; }
	"$@"
	ctl_nv "free $VA"
}

for s in $SIZES; do
	with_buffer contiguous "$s" module_case one-pin contiguous "$s"
	with_buffer contiguous "$s" floor_case contiguous "$s"
	with_buffer contiguous "$s" held_case one-pin contiguous "$s"
	echo 1 >$P/probe_then_pin
	with_buffer contiguous "$s" module_case probe-then-pin contiguous "$s"
	echo 0 >$P/probe_then_pin
	echo 0 >$P/coalesce_sg
	with_buffer contiguous "$s" module_case per-page-sg contiguous "$s"
	with_buffer contiguous "$s" held_case per-page-sg contiguous "$s"
	echo -1 >$P/coalesce_sg
done
for layout in fragmented shuffled; do
	for s in 0x200000 0x8000000; do
		with_buffer $layout $s module_case one-pin $layout $s
		with_buffer $layout $s floor_case $layout $s
		with_buffer $layout $s held_case one-pin $layout $s
	done
done

# Two threads of one process, each registering its own 2 MiB buffer, against one thread; with
# the cost model (NVIDIA serializes pins and maps under its API lock) and without it.
threads_case() { # threads_case COST_PCT
	echo "$1" >/sys/module/nvidia/parameters/cost_scale_pct
	# The racing process allocates the buffers: NVIDIA finds GPU memory by process.
	ctl_ib "bench clear"
	race -q "$NV/ctl|alloc $VA 0x200000 contiguous" "$NV/ctl|alloc $VA2 0x200000 contiguous" \
		-- "$IBC/ctl|bench t1 edu1 $VA 0x200000 400" \
		-- "$NV/ctl|free $VA" "$NV/ctl|free $VA2"
	echo "BENCH kind=threads case=1-thread cost_pct=$1 size=2097152 $(cat $IBC/bench)"
	ctl_ib "bench clear"
	race -q "$NV/ctl|alloc $VA 0x200000 contiguous" "$NV/ctl|alloc $VA2 0x200000 contiguous" \
		-- "$IBC/ctl|bench t2a edu1 $VA 0x200000 400" "$IBC/ctl|bench t2b edu1 $VA2 0x200000 400" \
		-- "$NV/ctl|free $VA" "$NV/ctl|free $VA2"
	echo "BENCH kind=threads case=2-threads cost_pct=$1 size=2097152 $(tr '\n' ' ' <$IBC/bench)"
}
threads_case "$COST"
threads_case 0
echo "$COST" >/sys/module/nvidia/parameters/cost_scale_pct

# Lookup cost: 1 against 10 000 live registrations (of one 64 KiB buffer, on edu0).
ctl_nv "alloc 0x7f0080000000 0x10000 contiguous"
with_buffer contiguous 0x200000 module_case live-1 contiguous 0x200000
ctl_ib "reg-many 100 10000 edu0 0x7f0080000000 0x10000" || echo "not ok - 10000 registrations"
echo "BENCH kind=info live_registrations=$(cat /sys/module/nv_peer_mem/stats/nv_mem/live_registrations)"
with_buffer contiguous 0x200000 module_case live-10000 contiguous 0x200000
ctl_ib "dereg-many 100 10000"
ctl_nv "free 0x7f0080000000"

# Invalidation latency: cudaFree of a registered buffer until the free callback, which
# invalidates through ib_core, returned.
for s in 0x200000 0x8000000; do
	n=20 c0=$(nv_stat callback_ns)
	i=0
	while [ $i -lt $n ]; do
		ctl_nv "alloc $VA $s contiguous"
		ctl_ib "reg 1 edu1 $VA $s"
		ctl_nv "free $VA"
		ctl_ib "dereg 1"
		i=$((i + 1))
	done
	echo "BENCH kind=invalidate size=$((s)) iters=$n invalidate_ns=$((($(nv_stat callback_ns) - c0) / n))"
done
expect_nv_clean "after the benchmark"
unload_world
finish
