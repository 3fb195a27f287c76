# shellcheck shell=sh
# ONBOOT in /etc/infiniband/nv_peer_mem.conf. This VM booted with ONBOOT=no and ran the init
# script as sysvinit does at boot (PREVLEVEL=N); a start by hand still loads the module.
conf=/etc/infiniband/nv_peer_mem.conf
svc=/etc/init.d/nv_peer_mem
echo "  boot-time start printed: $(cat /tmp/boot-rc.log)"
check "boot ran with ONBOOT=no" grep -q '^ONBOOT=no' $conf
check "boot-time start exited 0" test "$(cat /tmp/boot-rc.rc)" = 0
check "  and said why it did not load" grep -q 'ONBOOT=no in /etc/infiniband/nv_peer_mem.conf: not loading at boot' /tmp/boot-rc.log
check "nv_peer_mem not loaded after boot" test ! -d /sys/module/nv_peer_mem
check "manual start loads it anyway" $svc start
check "  loaded" test -d /sys/module/nv_peer_mem
check "stop" $svc stop

sed -i 's/^ONBOOT=.*/ONBOOT=yes/' $conf
check "boot-time start with ONBOOT=yes" env PREVLEVEL=N RUNLEVEL=2 $svc start
check "  loaded" test -d /sys/module/nv_peer_mem
check "stop" $svc stop

sed -i 's/^ONBOOT=.*/ONBOOT=perhaps/' $conf
out=$(env PREVLEVEL=N RUNLEVEL=2 $svc start 2>&1)
rc=$?
check "invalid ONBOOT: exit 6 (not configured)" test $rc = 6
check "  one line" one_line "$out"
check "  naming the value ($out)" contains "$out" 'ONBOOT=perhaps'
check "  not loaded" test ! -d /sys/module/nv_peer_mem
sed -i 's/^ONBOOT=.*/ONBOOT=no/' $conf
finish
