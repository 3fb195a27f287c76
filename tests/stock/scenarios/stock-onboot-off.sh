# shellcheck shell=sh
# Before the second boot: the administrator sets ONBOOT=no.
conf=/etc/infiniband/nv_peer_mem.conf
check "set ONBOOT=no" sed -i 's/^ONBOOT=.*/ONBOOT=no/' $conf
check "  written" grep -qx 'ONBOOT=no' $conf
sync
finish
