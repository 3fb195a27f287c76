# shellcheck shell=sh
# nv_peer_mem doctor on the emulated machine (tests/README.md): gpu1 and edu1 share a PCIe
# switch (PIX), the other pairs meet at the root complex (PHB); the IOMMU translates; the
# memory_peers files NCCL looks for exist only where this world's core creates them.
D=/usr/libexec/nv_peer_mem/nv_peer_mem-doctor
doctor() { out=$("$D" "$@" 2>&1); rc=$?; printf '%s\n' "$out" | sed 's/^/  | /'; }
has() { printf '%s\n' "$out" | grep -q -- "$1"; }
bdf_of() { basename "$(readlink "$1")"; }

check "load" load_world
set -- /sys/bus/pci/drivers/nvidia/0000:*
gpu0=$(basename "$1") gpu1=$(basename "${2:-}")
edu0=$(bdf_of /sys/class/infiniband/edu0/device)
edu1=$(bdf_of /sys/class/infiniband/edu1/device)
check "two GPUs bound to the nvidia driver, two NICs in /sys/class/infiniband" \
	sh -c "test -n '$gpu0' && test -n '$gpu1' && test -n '$edu0' && test -n '$edu1'"
dmesg >/tmp/kernel.log
doctor --kernel-log /tmp/kernel.log
check "GPUDirect RDMA can work: exit 0" test "$rc" = 0
check "no FAIL line" sh -c "! printf '%s\n' \"\$out\" | grep -q '^FAIL'"
check "no traceback" sh -c "! printf '%s\n' \"\$out\" | grep -q Traceback"
check "sees both GPUs" has "^OK gpu.devices: .*$gpu0.*$gpu1"
check "sees both NICs" has "^OK rdma.devices: .*edu0 ($edu0).*edu1 ($edu1)"
check "PeerDirect API found in ib_core" has '^OK ib_core.peerdirect: PeerDirect API present'
check "nv_peer_mem found for this kernel" has "^OK nv_peer_mem.installed: .*$(uname -r)"
check "loaded, with its version" has '^OK nv_peer_mem.loaded: loaded, version 1.4.0'
check "gpu1 - edu1: PIX (one PCIe switch)" has "^OK topology: GPU $gpu1 .* NIC edu1 ($edu1): PIX"
check "gpu0 - edu0: PHB (root complex)" has "^WARN topology: GPU $gpu0 .* NIC edu0 ($edu0): PHB"
check "gpu1 - edu0: PHB" has "^WARN topology: GPU $gpu1 .* NIC edu0 ($edu0): PHB"
check "IOMMU translating (intel_iommu=on, strict)" has '^WARN iommu.mode: .*translated'
check "16 MiB BAR: small" has "^WARN gpu.bar1: GPU $gpu0: .*16 MiB: registrations are capped by it"
check "UCX finds /sys/module/nv_peer_mem/version" has '^OK ucx.detect: .*/sys/module/nv_peer_mem/version'
if [ -d $PEERS ]; then
	check "with memory_peers ($IB_CORE): NCCL finds nv_mem" has '^OK nccl.detect: .*memory_peers/nv_mem/version'
else
	check "without memory_peers ($IB_CORE): NCCL will not see GPUDirect RDMA, and the doctor says so" \
		has '^WARN nccl.detect: '
	check "  the memory_peers finding" has '^INFO memory_peers: '
fi
doctor --json --kernel-log /tmp/kernel.log
check "--json: exit 0 and valid JSON with gpudirect_rdma true and 4 pairs" sh -c "test $rc = 0 && printf '%s' \"\$1\" |
	/usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"gpudirect_rdma\"] is True and len(d[\"pairs\"]) == 4'" - "$out"
out=$(as_nobody "$D" --kernel-log /tmp/kernel.log 2>&1); rc=$?
check "a user can run it: exit 0 or 1, findings, no traceback" \
	sh -c "test $rc -le 1 && printf '%s\n' \"\$1\" | grep -q '^OK nvidia.loaded' && ! printf '%s\n' \"\$1\" | grep -q Traceback" - "$out"

check "unload nv_peer_mem and ib_core" sh -c "rmmod nv_peer_mem && rmmod ib_core"
doctor --kernel-log /tmp/kernel.log
check "without ib_core: exit 1" test "$rc" = 1
check "  FAIL ib_core.loaded with a fix" has '^FAIL ib_core.loaded: .* -> fix: '
check "unload nvidia" rmmod nvidia
finish
