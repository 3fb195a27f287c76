# shellcheck shell=sh
# The boot after apt purge: no module, no unit, nothing of the packages.
check "nothing loaded nv_peer_mem" test ! -d /sys/module/nv_peer_mem
check "modprobe finds no nv_peer_mem" refused modinfo nv_peer_mem
check "no nv_peer_mem.ko in /lib/modules" test -z "$(find /lib/modules -name 'nv_peer_mem.ko*')"
check "systemd knows no nv_peer_mem unit" refused systemctl cat nv_peer_mem.service
check "  no unit file, no enablement link, no init script" \
	test ! -e /lib/systemd/system/nv_peer_mem.service -a ! -e /etc/systemd/system/multi-user.target.wants/nv_peer_mem.service -a ! -e /etc/init.d/nv_peer_mem
check "dkms knows no nv_peer_mem" test -z "$(dkms status nv_peer_mem 2>&1)"
check "no config file, no source, no cache" \
	test ! -e /etc/infiniband/nv_peer_mem.conf -a ! -e /var/cache/nv_peer_mem -a -z "$(ls -d /usr/src/nv_peer_mem-* 2>/dev/null)"
finish
