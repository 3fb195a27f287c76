# shellcheck shell=sh
# The second boot, with ONBOOT=no: the unit is enabled but leaves the module unloaded and says
# why; a start by hand still loads it.
conf=/etc/infiniband/nv_peer_mem.conf
check "ONBOOT=no" grep -qx 'ONBOOT=no' $conf
check "nv_peer_mem not loaded at boot" test ! -d /sys/module/nv_peer_mem
check "  though nvidia and ib_core are (udev loaded them for their devices)" \
	test -d /sys/module/nvidia -a -d /sys/module/ib_core
check "  though the unit is enabled" systemctl is-enabled --quiet nv_peer_mem
log=$(journalctl -b -u nv_peer_mem --no-pager 2>&1)
check "  and the unit said why" contains "$log" 'ONBOOT=no in /etc/infiniband/nv_peer_mem.conf: not loading at boot'
check "systemctl start by hand loads it" systemctl start nv_peer_mem
check "  loaded" test -d /sys/module/nv_peer_mem
check "systemctl stop" systemctl stop nv_peer_mem
check "  unloaded" test ! -d /sys/module/nv_peer_mem
finish
