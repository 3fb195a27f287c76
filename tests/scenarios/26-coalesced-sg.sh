# shellcheck shell=sh
# Coalesced sg tables (coalesce_sg): runs of DMA-contiguous GPU pages become one entry, so the
# NIC can use pages larger than 64 KiB; coalesce_sg=0 gives one entry per page. Both ways the
# core's checks (trimming, coverage, addresses inside the BAR) and the NIC's DMA reads must
# pass, also for a range whose first and last pages sit inside a long run. NVIDIA maps every
# 64 KiB page with its own dma_map_resource(), so runs exist only where DMA addresses are the
# BAR's physical addresses: edu1 gets an identity IOMMU domain (as with iommu=pt), edu0 keeps
# its translating one. Default: on, except in legacy mode (MLNX_OFED 4.9).
edu1=$(for d in /sys/bus/pci/devices/*; do
	[ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x1234:0x11e8 ] && echo "$d"
done | sed -n 2p)
type_file=$edu1/iommu_group/type
old_type=$(cat "$type_file")
check "edu1 in an identity IOMMU domain (was $old_type)" sh -c "echo identity >$type_file"
check "load" load_world
P=/sys/module/nv_peer_mem/parameters/coalesce_sg
check "coalesce_sg is auto (-1) by default" test "$(cat $P)" = -1
expect_write_error "Invalid argument" "coalesce_sg=2 refused" $P 2

# reg_expect ID NIC ADDR LEN NENTS NIC_PAGE_SIZE DESCRIPTION: register, then the core's entry
# count and the page size mlx5 would pick (ib_umem_find_best_pgsz) must be as given ("-": any).
reg_expect() {
	check "$7" ctl_ib "reg $1 $2 $3 $4"
	line=$(grep "^id=$1 " $IBC/regs)
	echo "  $line"
	[ "$5" = - ] || check "  $5 sg entries" contains "$line" " nents=$5 "
	[ "$6" = - ] || check "  NIC page size $6" contains "$line" " nic_page_size=$6 "
}

# one_way ON|OFF: the cases with coalescing on or off.
one_way() {
	if [ "$1" = on ]; then run=1 inner=1 big=0x200000; else run=32 inner=31 big=0x10000; fi
	check "cudaMalloc 2 MiB contiguous (first pages of the BAR)" ctl_nv "alloc $GPU_VA 0x200000 contiguous"
	reg_expect 1 edu1 $GPU_VA 0x200000 $run $big "[$1] contiguous 2 MiB for edu1"
	dma_check 1 0 "$GPU_VA"
	dma_check 1 0x1ff000 "$GPU_VA + 0x1ff000"
	a=$(hex "$GPU_VA + 0x13000")
	n=$((0x200000 - 0x13000 - 0x5800))
	reg_expect 2 edu1 "$a" $n $inner - "[$1] unaligned range inside the run"
	dma_check 2 0 "$a"
	dma_check 2 0xed000 "$a + 0xed000"
	last=$(((n - 4096) & ~0xfff))
	dma_check 2 $last "$a + $last"
	reg_expect 3 edu0 $GPU_VA 0x200000 - - "[$1] the same buffer for edu0 (IOMMU: one IOVA per page)"
	dma_check 3 0x10000 "$GPU_VA + 0x10000"
	for id in 1 2 3; do ctl_ib "dereg $id"; done
	check "cudaFree" ctl_nv "free $GPU_VA"
	check "cudaMalloc 512 KiB fragmented" ctl_nv "alloc $GPU_VA 0x80000 fragmented"
	reg_expect 4 edu1 $GPU_VA 0x80000 8 0x10000 "[$1] fragmented: no two pages adjacent, 8 entries"
	dma_check 4 0x70000 "$GPU_VA + 0x70000"
	ctl_ib "dereg 4"
	check "cudaFree" ctl_nv "free $GPU_VA"
	check "cudaMalloc 1 MiB shuffled" ctl_nv "alloc $GPU_VA 0x100000 shuffled"
	reg_expect 5 edu1 "$(hex "$GPU_VA + 0x3000")" 0xfa000 - - "[$1] shuffled, unaligned"
	dma_check 5 0x7f000 "$GPU_VA + 0x82000"
	dma_check 5 0xf9000 "$GPU_VA + 0xfc000"
	ctl_ib "dereg 5"
	check "cudaFree" ctl_nv "free $GPU_VA"
	expect_nv_clean "coalescing $1"
}

check "default in this world" ctl_nv "alloc $GPU_VA 0x200000 contiguous"
if core_is_49; then want=32; else want=1; fi
reg_expect 9 edu1 $GPU_VA 0x200000 $want - "  default: $want entries for 2 contiguous MiB"
ctl_ib "dereg 9"
ctl_nv "free $GPU_VA"
check "coalesce_sg=1" sh -c "echo 1 >$P"
one_way on
check "coalesce_sg=0" sh -c "echo 0 >$P"
one_way off
check "violations: none in the fakes" test "$(ib_stat violations):$(nv_stat violations)" = 0:0
check "unload" unload_world
check "edu1 back in its $old_type domain" sh -c "echo $old_type >$type_file"
finish
