# shellcheck shell=sh
# The first boot of the stock machine, as the packages left it (ONBOOT=yes): systemd is PID 1,
# the kernel is Debian's own, and the nv_peer_mem unit loaded the module DKMS built for it, on
# top of the NVIDIA driver and ib_core.
kver=$(uname -r)
conf=/etc/infiniband/nv_peer_mem.conf
check "PID 1 is systemd" test "$(cat /proc/1/comm)" = systemd
check "the kernel is Debian's $kver" grep -q 'Debian' /proc/version
check "ONBOOT=yes, as installed" grep -qx 'ONBOOT=yes' $conf
check "the nv_peer_mem unit is enabled" systemctl is-enabled --quiet nv_peer_mem
check "  and loaded the module at boot" systemctl is-active --quiet nv_peer_mem
check "nv_peer_mem is loaded" test -d /sys/module/nv_peer_mem
check "  on top of nvidia" test -e /sys/module/nvidia/holders/nv_peer_mem
check "  and of ib_core" test -e /sys/module/ib_core/holders/nv_peer_mem
check "  ordered after the boot's module loading" \
	contains "$(systemctl show -p After nv_peer_mem)" systemd-modules-load.service
check "  with both clients registered with ib_core" \
	test "$(grep -c '^name=nv_mem\(_nc\)\{0,1\} ' $IBC/clients)" = 2
ko=$(modinfo -n nv_peer_mem 2>&1)
check "the module is DKMS's ($ko)" contains "$ko" "^/lib/modules/$kver/updates/dkms/nv_peer_mem\.ko"
vermagic=$(modinfo -F vermagic nv_peer_mem 2>&1)
check "  built for $kver ($vermagic)" contains "$vermagic" "^$kver "
check "  against the headers DKMS completed" test -s "/var/cache/nv_peer_mem/rust-trees/$kver/.nv_peer_mem-rust-tree"
echo "  $(cat "/var/cache/nv_peer_mem/rust-trees/$kver/.nv_peer_mem-rust-tree" 2>&1)"
t=$(cat /proc/sys/kernel/tainted)
# 4096: out-of-tree module (O), 8192: unsigned module (E); anything else is a report.
check "kernel taint only out-of-tree and unsigned ($t)" test $((t & ~12288)) = 0
finish
