# shellcheck shell=sh
# nv_peer_mem doctor on the stock machine with everything in place: GPUDirect RDMA can work,
# and it says how the module was built for Debian's kernel.
kver=$(uname -r)
check "start" systemctl start nv_peer_mem
out=$(nv_peer_mem doctor 2>&1)
rc=$?
echo "$out" | sed 's/^/  | /'
check "doctor: GPUDirect RDMA can work (exit 0)" test $rc = 0
check "  no FAIL" refused contains "$out" '^FAIL'
for want in "^OK nvidia.loaded" "^OK ib_core.loaded" "^OK ib_core.peerdirect" \
	"^OK nv_peer_mem.installed: \\(/usr\\)\\{0,1\\}/lib/modules/$kver/updates/dkms/nv_peer_mem.ko.* (vermagic $kver)" \
	"^INFO kernel.rust: built against the headers of $kver with their Rust build artifacts rebuilt: completed from /usr/src/linux-source-" \
	"^OK nv_peer_mem.loaded" "^OK service.onboot"; do
	check "  says: $want" contains "$out" "$want"
done
check "stop" systemctl stop nv_peer_mem
finish
