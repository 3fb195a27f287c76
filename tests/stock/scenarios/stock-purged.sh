# shellcheck shell=sh
# Right after apt purge, on the same boot: no module, no unit, nothing of the packages. Nothing
# can load nv_peer_mem at the next boot when no nv_peer_mem.ko is left on the disk or in the
# initramfs, so the reboot that used to follow (85 s of a core, 2026-11-25) is not needed.
check "nothing loaded nv_peer_mem" test ! -d /sys/module/nv_peer_mem
check "modprobe finds no nv_peer_mem" refused modinfo nv_peer_mem
check "no nv_peer_mem.ko in /lib/modules" test -z "$(find /lib/modules -name 'nv_peer_mem.ko*')"
initrd=$(lsinitramfs "/boot/initrd.img-$(uname -r)" 2>&1)
check "the initramfs lists its /init" contains "$initrd" '^init$'
check "  and no nv_peer_mem" test -z "$(echo "$initrd" | grep nv_peer_mem)"
check "systemd knows no nv_peer_mem unit" refused systemctl cat nv_peer_mem.service
check "  no unit file, no enablement link, no init script" \
	test ! -e /lib/systemd/system/nv_peer_mem.service -a ! -e /etc/systemd/system/multi-user.target.wants/nv_peer_mem.service -a ! -e /etc/init.d/nv_peer_mem
check "dkms knows no nv_peer_mem" test -z "$(dkms status nv_peer_mem 2>&1)"
check "no config file, no source, no cache" \
	test ! -e /etc/infiniband/nv_peer_mem.conf -a ! -e /var/cache/nv_peer_mem -a -z "$(ls -d /usr/src/nv_peer_mem-* 2>/dev/null)"
finish
