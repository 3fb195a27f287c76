# shellcheck shell=sh
# The service on a systemd machine, both ways an administrator calls it: systemctl and
# service(8). The module was loaded at boot (stock-boot); this leaves it unloaded.
loaded() { test -d /sys/module/nv_peer_mem; }
out=$(systemctl status nv_peer_mem 2>&1)
check "systemctl status: exit 0 while loaded" test $? = 0
check "  says active" contains "$out" 'Active: active (exited)'
check "systemctl stop" systemctl stop nv_peer_mem
check "  unloaded" refused loaded
systemctl status nv_peer_mem >/dev/null 2>&1
check "systemctl status: exit 3 when stopped" test $? = 3
check "systemctl start" systemctl start nv_peer_mem
check "  loaded" loaded
out=$(service nv_peer_mem status 2>&1)
check "service nv_peer_mem status: exit 0" test $? = 0
check "service nv_peer_mem restart" service nv_peer_mem restart
check "  loaded" loaded
check "service nv_peer_mem stop" service nv_peer_mem stop
check "  unloaded" refused loaded
check "service nv_peer_mem start" service nv_peer_mem start
check "  loaded" loaded
out=$(nv_peer_mem status 2>&1)
check "nv_peer_mem status: exit 0" test $? = 0
echo "$out" | sed 's/^/  | /'
check "systemctl stop, for the scenarios after" systemctl stop nv_peer_mem
check "  unloaded" refused loaded
finish
