# shellcheck shell=sh
# The nv_peer_mem service as an admin drives it, with the package's files installed and the
# module that DKMS built: start loads it (modprobe pulls in nvidia and ib_core), status reports
# the registrations, stop refuses while registrations are live and leaves the module loaded.
svc=/etc/init.d/nv_peer_mem
run() { out=$("$svc" "$@" 2>&1); rc=$?; echo "  \$ service nv_peer_mem $*: rc=$rc: $out"; }

run status
check "status before start: exit 3" test $rc = 3
check "  says not loaded" test "$out" = "nv_peer_mem: not loaded"
run start
check "start: exit 0" test $rc = 0
check "  nv_peer_mem loaded" test -d /sys/module/nv_peer_mem
check "  modprobe resolved nvidia and ib_core" sh -c 'test -d /sys/module/nvidia && test -d /sys/module/ib_core'
check "  both clients registered with ib_core" sh -c "grep -q '^name=nv_mem ' $IBC/clients && grep -q '^name=nv_mem_nc ' $IBC/clients"
ko=$(modinfo -n nv_peer_mem)
case $ko in /*) ;; *) ko=/lib/modules/$(uname -r)/$ko ;; esac
check "  the module is the one DKMS built ($ko)" sh -c "case $ko in */updates/dkms/*) true ;; *) false ;; esac"
check "  same bytes as DKMS installed" test "$(sha256sum <"$ko")" = "$(cat /etc/nvpm/dkms-module.sha256)"
run start
check "start again: exit 0, nothing to do" test "$rc:$out" = "0:nv_peer_mem: already loaded"
out=$(as_nobody "$svc" stop 2>&1); rc=$?
check "stop by a user: exit 4 (LSB: insufficient privilege)" test $rc = 4
check "  in one line" one_line "$out"
check "  saying why" contains "$out" "only root can load or unload"
check "  module still loaded" test -d /sys/module/nv_peer_mem
out=$(as_nobody "$svc" restart 2>&1); rc=$?
check "restart by a user: exit 4, module still loaded" sh -c "test $rc = 4 && test -d /sys/module/nv_peer_mem"
out=$(as_nobody "$svc" status 2>&1); rc=$?
check "status by a user: exit 0" test $rc = 0
run status
check "status: exit 0" test $rc = 0
check "  loaded, version, no registrations" contains "$out" 'loaded (version 1.4.0), 0 live registrations$'

check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x20000 contiguous"
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x20000"
dma_check 1 0x10000 "$GPU_VA + 0x10000"
run status
check "status counts the registration" contains "$out" '1 live registration$'
check "  per client, from the module's own counters" contains "$out" '^  client nv_mem: 1 live registration, 131072 bytes of GPU memory pinned; 1 registered, 0 deregistered, 0 invalidations, 0 errors so far$'
check "  nv_mem_nc too" contains "$out" '^  client nv_mem_nc: 0 live registrations, 0 bytes'
check "  and what a missing memory_peers means (24.x on 6.6+)" contains "$out" "ib_core has no /sys/kernel/mm/memory_peers .*NCCL will not detect GPUDirect RDMA.*nv_peer_mem doctor"
run stop
check "stop with a live registration fails" test $rc = 1
check "  in one line" one_line "$out"
check "  naming the registrations" contains "$out" '1 GPU memory registration still live'
check "  module still loaded" test -d /sys/module/nv_peer_mem
run restart
check "restart with a live registration fails too, module kept" sh -c "test $rc = 1 && test -d /sys/module/nv_peer_mem"
dma_check 1 0 "$GPU_VA"
check "deregister" ctl_ib "dereg 1"

run stop
check "stop: exit 0" test $rc = 0
check "  nv_peer_mem unloaded" test ! -d /sys/module/nv_peer_mem
check "  nvidia and ib_core left alone" sh -c 'test -d /sys/module/nvidia && test -d /sys/module/ib_core'
run stop
check "stop when stopped: exit 0" test $rc = 0
out=$(as_nobody "$svc" start 2>&1); rc=$?
check "start by a user: exit 4, nothing loaded" sh -c "test $rc = 4 && test ! -d /sys/module/nv_peer_mem"
run restart
check "restart from stopped: loaded" sh -c "test $rc = 0 && test -d /sys/module/nv_peer_mem"
run force-reload
check "force-reload: loaded" sh -c "test $rc = 0 && test -d /sys/module/nv_peer_mem"
run stop
check "stop" test $rc = 0
run doctor
check "doctor through the service: runs, exit 0 or 1" sh -c "test $rc -le 1"
check "  one finding per line" contains "$out" '^\(OK\|INFO\|WARN\|FAIL\) nvidia.loaded: '
check "nv_peer_mem is also a command (/usr/sbin/nv_peer_mem)" sh -c '/usr/sbin/nv_peer_mem status; test $? = 3'
run bogus
check "unknown action: exit 2" test $rc = 2
check "  with usage" contains "$out" usage
expect_nv_clean
finish
