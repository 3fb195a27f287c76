# shellcheck shell=sh
# cudaFree racing registration and deregistration, from threads of one process as in a real
# application (tests/vm/race.c): whatever the interleaving, no double free, no use after free,
# no leak, no deadlock (KASAN, kmemleak and the fakes' deadlock detectors watch), and every pin,
# context and module reference is gone at the end.
check "load" load_world
N=40
# A free that lands while the registration's dma_map_pages waits for NVIDIA's API lock is the
# driver's own use after free (Documentation/design.md, "What no client can prevent"), and on
# R515-R530 so is one landing on a put_pages waiting there (tests/fakes/INTERFACE.md, rule 5:
# from R535 put_pages only looks the table up, p2p.c never counts it): since R515, which frees
# tables itself, random races may meet these windows. Each race frees one table once, and a
# client that looks at what its callback recorded after each call calls NVIDIA at most once
# with a freed table: at most one per race, and only where the race has a call that can meet
# it. Registration || cudaFree: the registration's dma_map_pages, or (R515-R530) the
# deregistration's put_pages after a registration that succeeded, never both (a registration
# that met the freed table failed, and has nothing to put). Deregistration || cudaFree: the
# put_pages only, so none from R535. R470 frees no table itself: none.
case $NV_GEN in
r470) reg_hz=0 dereg_hz=0 ;;
r515) reg_hz=1 dereg_hz=1 ;;
*) reg_hz=1 dereg_hz=0 ;;
esac
hz_total=0 hz_over=
# race_hazards MAX WHAT [FAILED]: the hazards of the race just run (since $hz_before) are at
# most MAX, and none unless FAILED is non-empty when given; adds them to hz_total, notes a race
# out of bounds in hz_over.
race_hazards() {
	hz=$(($(nv_stat hazards) - hz_before))
	hz_total=$((hz_total + hz))
	if [ "$hz" -gt "$1" ]; then hz_over="$hz_over $2:$hz"
	elif [ $# -gt 2 ] && [ "$hz" -gt 0 ] && [ -z "$3" ]; then hz_over="$hz_over $2:$hz-but-registered"; fi
}
# What each side may give (as the in-kernel stress, fakes/ib_core/stress.c): the registration
# EFAULT (the memory was no longer NVIDIA's: nv_mem declined it) or, on MLNX_OFED 4.9 only,
# EINVAL (the core refuses pages invalidated before activation); the deregistration ENOENT
# (no MR: the registration failed, or 4.9 tore it down inside the invalidation); cudaFree and
# cudaMalloc nothing. Anything else, say an EIO from a DMA mapping the IOMMU refused, fails.
reg_may="Bad address"
[ "$IB_CORE" != 4.9 ] || reg_may="$reg_may|Invalid argument"
i=0 outcomes=
while [ $i -lt $N ]; do
	va=$(hex "$GPU_VA + ($i % 4) * 0x1000000")
	hz_before=$(nv_stat hazards)
	# registration || cudaFree, the free delayed by 0..1.9 ms
	out=$(race -q "$NV/ctl|alloc $va 0x100000 shuffled" \
		-- "$IBC/ctl|reg $i edu$((i % 2)) $va 0x100000" "$NV/ctl|free $va|$((i * 50))" \
		-- "$IBC/ctl|dereg $i")
	# The window there is the registration's own dma_map_pages, which then fails: a hazard in
	# a race whose registration went through is some other call meeting a freed table (the
	# free is over before the deregistration starts).
	race_hazards $reg_hz "reg$i" "$(printf '%s\n' "$out" | grep '^2\.1 ')"
	outcomes="$outcomes${out:+$out
}"
	i=$((i + 1))
done
echo "race outcomes other than ok: $(printf '%s' "$outcomes" | sort | uniq -c | tr -s ' \n' ' ')"
unexpected=$(printf '%s' "$outcomes" | grep -v -E -x "2\.1 ($reg_may)|3\.1 No such file or directory")
check "every registration, cudaFree and deregistration gave what its race allows ($N races)" \
	test -z "$unexpected"
[ -z "$unexpected" ] || printf '%s\n' "$unexpected" | sort | uniq -c | sed 's/^/  unexpected: /'
check "no registrations left ($N registration/free races)" test -z "$(cat $IBC/regs)"
check "no module references left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "after $N registration/free races"
# Deregistration racing the free of a live registration.
i=0 fails=0
while [ $i -lt $N ]; do
	hz_before=$(nv_stat hazards)
	out=$(race -q "$NV/ctl|alloc $GPU_VA 0x80000 contiguous" -- "$IBC/ctl|reg 1 edu0 $GPU_VA 0x80000" \
		-- "$IBC/ctl|dereg 1|$((i * 25))" "$NV/ctl|free $GPU_VA")
	race_hazards $dereg_hz "dereg$i"
	[ -z "$out" ] || { fails=$((fails + 1)); echo "  iteration $i: $out"; }
	i=$((i + 1))
done
check "every deregistration and free succeeded ($N races)" test $fails = 0
check "no registrations left (dereg vs free)" test -z "$(cat $IBC/regs)"
check "no module references left (dereg vs free)" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "after dereg/free races"
echo "driver hazards met: $hz_total in $((2 * N)) races"
check "at most $reg_hz of the driver's windows met per registration race (one that failed), $dereg_hz per deregistration race${hz_over:+ (over:$hz_over)}" \
	test -z "$hz_over"
# The harness counts the REAL-DRIVER-HAZARD lines against the same number.
expect_hazards "$hz_total"
check "unload" unload_world
finish
