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
i=0
while [ $i -lt $N ]; do
	va=$(hex "$GPU_VA + ($i % 4) * 0x1000000")
	# registration || cudaFree, the free delayed by 0..1.9 ms
	race -q "$NV/ctl|alloc $va 0x100000 shuffled" \
		-- "$IBC/ctl|reg $i edu$((i % 2)) $va 0x100000" "$NV/ctl|free $va|$((i * 50))" \
		-- "$IBC/ctl|dereg $i" >/dev/null
	i=$((i + 1))
done
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
