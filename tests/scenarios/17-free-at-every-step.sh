# shellcheck shell=sh
# cudaFree at every step of a registration and of a deregistration, and while each NVIDIA call
# is in progress: a stall injected into the fake nvidia.ko or ib_core holds the step open for
# 600 ms, and a thread of the same process frees the GPU memory 300 ms in. Whatever the step:
# no kernel report, no deadlock (both fakes time their waits and report one), and after the
# deregistration and the free nothing is left: no pin, mapping, registration, context or
# module reference.
check "load" load_world
# R515-R530 read the page table before put_pages waits for the API lock: a free that lands
# while a put waits there is the driver's use after free (tests/fakes/INTERFACE.md). Two steps can
# land a free on a waiting put (the probe's or the teardown's); on other drivers none.
if [ "$NV_GEN" = r515 ]; then expect_hazards 0-2; else expect_hazards 0; fi

# step NAME NV_INJECT IB_INJECT WHEN: WHEN is "reg" (free during the registration) or "dereg".
step() {
	name=$1 nv=$2 ib=$3 when=$4
	ctl_nv "inject clear"
	ctl_ib "inject clear"
	[ -z "$nv" ] || ctl_nv "inject $nv"
	[ -z "$ib" ] || ctl_ib "inject $ib"
	if [ "$when" = reg ]; then
		out=$(race "$NV/ctl|alloc $GPU_VA 0x80000 shuffled" \
			-- "$IBC/ctl|reg 1 edu0 $GPU_VA 0x80000" "$NV/ctl|free $GPU_VA|300000" \
			-- "$IBC/ctl|dereg 1")
	else
		out=$(race "$NV/ctl|alloc $GPU_VA 0x80000 shuffled" -- "$IBC/ctl|reg 1 edu0 $GPU_VA 0x80000" \
			-- "$IBC/ctl|dereg 1" "$NV/ctl|free $GPU_VA|300000")
	fi
	echo "  $name: $(echo "$out" | tr '\n' ' ')"
	ctl_nv "inject clear"
	ctl_ib "inject clear"
	check "$name: the free went through" contains "$out" '^[23]\.2 ok'
	check "$name: no registration left" test -z "$(cat $IBC/regs)"
	check "$name: no module reference left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
	check "$name: no deadlock" test "$(ib_stat deadlocks)" = 0
	expect_nv_clean "$name"
}

step "free while get_pages holds the API lock" "get_pages sleep_locked:600 2" "" reg
step "free between get_pages and dma_map" "" "after_get_pages sleep:600" reg
step "free while dma_map_pages holds the API lock" "dma_map_pages sleep_locked:600" "" reg
step "free after dma_map, before activation" "" "after_dma_map sleep:600" reg
step "free while the core's teardown runs unlocked" "" "teardown_unlocked sleep:600" dereg
step "free while dma_unmap_pages runs" "dma_unmap_pages sleep:600" "" dereg
step "free while put_pages waits for the API lock" "put_pages sleep:600" "" dereg
step "free while put_pages holds the API lock" "put_pages sleep_locked:600" "" dereg
step "free before release" "" "before_release sleep:600" dereg
check "unload" unload_world
finish
