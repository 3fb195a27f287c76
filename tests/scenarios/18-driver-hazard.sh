# shellcheck shell=sh
# The one window no client can close (Documentation/design.md, "What no client can prevent"):
# cudaFree lands while nvidia_p2p_dma_map_pages waits for NVIDIA's API lock. The free path holds
# that lock while it runs the free callback and frees the page table when the callback returns;
# the waiting dma_map_pages then uses the freed table inside the real driver. Waiting for it in
# the callback would deadlock instead. The fake reports the driver's use after free
# (REAL-DRIVER-HAZARD) instead of committing it; nv_peer_mem must fail the registration cleanly.
check "load" load_world
hz0=$(nv_stat hazards)
# Drivers before R515 leave a revoked table to the client, so there the call meets a dead table
# it can refuse; since R515 the driver has freed it.
if [ "$NV_GEN" = r470 ]; then hz=0; else hz=1; fi
expect_hazards $hz
ctl_nv "inject dma_map_pages sleep:1500"
out=$(race "$NV/ctl|alloc $GPU_VA 0x80000 shuffled" \
	-- "$IBC/ctl|reg 1 edu0 $GPU_VA 0x80000" "$NV/ctl|free $GPU_VA|700000" -- "$IBC/ctl|dereg 1")
echo "  $(echo "$out" | tr '\n' ' ')"
check "the registration failed (the memory was freed under it)" contains "$out" '^2\.1 Bad address'
check "the fake saw dma_map_pages meet the freed table ($hz): the real driver's use after free" \
	test "$(nv_stat hazards)" = $((hz0 + hz))
check "no registration left" test -z "$(cat $IBC/regs)"
check "no module reference left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean
check "unload" unload_world
finish
