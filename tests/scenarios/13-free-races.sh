# shellcheck shell=sh
# cudaFree racing registration and deregistration, from threads of one process as in a real
# application (tests/vm/race.c): whatever the interleaving, no double free, no use after free,
# no leak, no deadlock (KASAN, kmemleak and the fakes' deadlock detectors watch), and every pin,
# context and module reference is gone at the end.
check "load" load_world
N=40
# A free that lands while the registration's dma_map_pages waits for NVIDIA's API lock is the
# driver's own use after free (Documentation/design.md, "What no client can prevent"), and on
# R515-R530 so is one landing on a put_pages waiting there: since R515, which frees tables
# itself, random races may meet these windows. The other scenarios assert none happen elsewhere.
if [ "$NV_GEN" = r470 ]; then expect_hazards 0; else expect_hazards "0-$((2 * N))"; fi
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
	# registration || cudaFree, the free delayed by 0..1.9 ms
	out=$(race -q "$NV/ctl|alloc $va 0x100000 shuffled" \
		-- "$IBC/ctl|reg $i edu$((i % 2)) $va 0x100000" "$NV/ctl|free $va|$((i * 50))" \
		-- "$IBC/ctl|dereg $i")
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
	out=$(race -q "$NV/ctl|alloc $GPU_VA 0x80000 contiguous" -- "$IBC/ctl|reg 1 edu0 $GPU_VA 0x80000" \
		-- "$IBC/ctl|dereg 1|$((i * 25))" "$NV/ctl|free $GPU_VA")
	[ -z "$out" ] || { fails=$((fails + 1)); echo "  iteration $i: $out"; }
	i=$((i + 1))
done
check "every deregistration and free succeeded ($N races)" test $fails = 0
check "no registrations left (dereg vs free)" test -z "$(cat $IBC/regs)"
check "no module references left (dereg vs free)" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "after dereg/free races"
check "unload" unload_world
finish
