# shellcheck shell=sh
# NVIDIA's free callback can outlive ib_core's release of the registration: cudaFree racing a
# deregistration. While the callback still runs the module's code, rmmod must be refused (else
# the callback returns into freed module text); once it returns, everything is released.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x40000"
dma_check 1 0x10000 "$GPU_VA + 0x10000"
# The callback invalidates, then stalls freeing NVIDIA's page table. The stall is long (under
# the 60 s hung-task limit) and this test ends it itself once rmmod has been tried: a short one
# ran out before rmmod on a loaded machine (6.12, CI of 2026-11-25).
check "arm a 30 s stall in free_page_table" ctl_nv "inject free_page_table sleep:30000"
ctl_nv "free $GPU_VA" &
freer=$!
wait_log "free_page_table: injected stall" 200
check "the callback is stalled after invalidating" grep -q "id=1 .*invalidated=1" $IBC/regs
check "deregister while the callback runs" ctl_ib "dereg 1"
check "ib_core has released the registration" test -z "$(cat $IBC/regs)"
check "the callback still holds a module reference" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 1
out=$(rmmod nv_peer_mem 2>&1)
check "rmmod refused while the callback runs" test $? -ne 0
case $out in
*"in use"* | *busy* | *"temporarily unavailable"*) ok "  because it is in use ($out)" ;;
*) not_ok "  unexpected rmmod outcome: '$out'" ;;
esac
check "the stall was still on during rmmod" sh -c '! dmesg | grep -q "free_page_table: stall over"'
check "end the stall" ctl_nv "inject wake"
check "cudaFree returns" wait $freer
check "the stall was ended by the test, not by its timeout" \
	sh -c 'dmesg | grep -q "free_page_table: stall over (woken)"'
check "module reference dropped after the callback" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "after the callback"
check "unload" unload_world
finish
