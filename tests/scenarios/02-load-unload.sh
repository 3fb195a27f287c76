# shellcheck shell=sh
# modprobe resolves nvidia and ib_core; the clients are registered in the form this world's
# core understands (extended with PEER_MEM_INVALIDATE_UNMAPS on 5.x/24.x, legacy on 4.9 through
# the admin's peerdirect_support=1); nv_mem_nc only where nvidia.ko has persistent pages.
check "modprobe nv_peer_mem pulls in nvidia and ib_core" modprobe nv_peer_mem
check "nvidia loaded" grep -q '^nvidia ' /proc/modules
check "ib_core loaded" grep -q '^ib_core ' /proc/modules
if core_is_49; then
	check "nv_mem registered in the legacy form (MLNX_OFED 4.9)" \
		grep -q 'name=nv_mem .*ex=0 flags=0x0 invalidate=1' $IBC/clients
	check "memory_peers/nv_mem/version exists (4.9 creates it)" test -s $PEERS/nv_mem/version
else
	check "nv_mem registered extended with PEER_MEM_INVALIDATE_UNMAPS" \
		grep -q 'name=nv_mem .*ex=1 flags=0x1 invalidate=1' $IBC/clients
fi
if [ "$IB_CORE" = 24.x ]; then
	check "no memory_peers directory (24.x on Linux 6.6+)" test ! -e $PEERS
fi
if nv_has_persistent; then
	check "nv_mem_nc registered without invalidation" grep -q 'name=nv_mem_nc .*invalidate=0' $IBC/clients
else
	check "no nv_mem_nc: nvidia.ko ($NV_GEN) has no persistent pages" sh -c "! grep -q nv_mem_nc $IBC/clients"
fi
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
if nv_has_persistent; then
	check "persistent_api_support=1: a single persistent nv_mem" modprobe nv_peer_mem persistent_api_support=1
	check "  nv_mem is non-invalidating" grep -q 'name=nv_mem .*invalidate=0' $IBC/clients
	check "  no nv_mem_nc" sh -c "! grep -q nv_mem_nc $IBC/clients"
else
	check "persistent_api_support=1 without persistent pages: loads" modprobe nv_peer_mem persistent_api_support=1
	check "  falls back to the invalidating nv_mem, and says so" sh -c \
		"grep -q 'name=nv_mem .*invalidate=1' $IBC/clients && dmesg | grep -q 'offers no persistent pages'"
fi
check "unload" unload_world
finish
