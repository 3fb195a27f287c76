# shellcheck shell=sh
# modprobe resolves nvidia and ib_core; both clients are registered in the right form.
check "modprobe nv_peer_mem pulls in nvidia and ib_core" modprobe nv_peer_mem
check "nvidia loaded" grep -q '^nvidia ' /proc/modules
check "ib_core loaded" grep -q '^ib_core ' /proc/modules
check "nv_mem registered extended with PEER_MEM_INVALIDATE_UNMAPS" \
	grep -q 'name=nv_mem .*ex=1 flags=0x1 invalidate=1' $IBC/clients
check "nv_mem_nc registered without invalidation" grep -q 'name=nv_mem_nc .*invalidate=0' $IBC/clients
check "memory_peers/nv_mem/version exists (what NCCL looks for)" test -s $PEERS/nv_mem/version
check "parameters visible in sysfs" test -e /sys/module/nv_peer_mem/parameters/enable_dbg
check "enable_dbg writable at run time" sh -c 'echo 1 > /sys/module/nv_peer_mem/parameters/enable_dbg'
check "refcount 0 when idle" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
check "rmmod nv_peer_mem" rmmod nv_peer_mem
check "clients gone from ib_core" test -z "$(cat $IBC/clients)"
check "memory_peers entries gone" test ! -e $PEERS/nv_mem
if modprobe nv_peer_mem peerdirect_support=2 2>/dev/null; then
	not_ok "peerdirect_support=2 accepted"
else
	ok "peerdirect_support=2 refused"
fi
check "bad parameter explained in the log" sh -c 'dmesg | grep -q "peerdirect_support must be 0 or 1"'
check "nothing registered after refused load" test -z "$(cat $IBC/clients)"
check "persistent_api_support=1: a single persistent nv_mem" modprobe nv_peer_mem persistent_api_support=1
check "  nv_mem is non-invalidating" grep -q 'name=nv_mem .*invalidate=0' $IBC/clients
check "  no nv_mem_nc" sh -c "! grep -q nv_mem_nc $IBC/clients"
check "unload" unload_world
finish
