# shellcheck shell=sh
# A start that cannot work says why in one line, exits non-zero and loads nothing: NVIDIA
# driver missing, ib_core missing, nv_peer_mem refusing its options (the C module's users got
# "modprobe: Invalid argument" and nothing else).
svc=/etc/init.d/nv_peer_mem
extra=/lib/modules/$(uname -r)/extra
try_start() { # try_start WANT-RC WANT-TEXT DESCRIPTION
	out=$($svc start 2>&1)
	rc=$?
	echo "  \$ service nv_peer_mem start: rc=$rc: $out"
	check "$3: exit $1" test $rc = "$1"
	check "  one line" one_line "$out"
	check "  saying: $2" contains "$out" "$2"
	check "  nv_peer_mem not loaded" test ! -d /sys/module/nv_peer_mem
}

mv $extra/nvidia.ko /tmp/nvidia.ko
try_start 5 "the nvidia module is not installed" "no NVIDIA driver"
mv /tmp/nvidia.ko $extra/nvidia.ko

mv $extra/ib_core.ko /tmp/ib_core.ko
try_start 5 "the ib_core module is not installed" "no MLNX_OFED ib_core"
mv /tmp/ib_core.ko $extra/ib_core.ko

mkdir -p /etc/modprobe.d
echo "options nv_peer_mem enable_dbg=7" >/etc/modprobe.d/nv_peer_mem.conf
try_start 1 "invalid for parameter .enable_dbg" "a bad module option"
rm /etc/modprobe.d/nv_peer_mem.conf

check "after the fixes, start works" $svc start
check "stop" $svc stop
finish
