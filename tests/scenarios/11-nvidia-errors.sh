# shellcheck shell=sh
# Every way nvidia.ko can fail surfaces as the right errno with one log line, and leaves no
# pin, mapping, context or module reference behind.
check "load" load_world
check "cudaMalloc" ctl_nv "alloc $GPU_VA 0x40000 contiguous"

# inject_case OP WHAT COUNT ERRTEXT LOGTEXT DESCRIPTION
inject_case() {
	ctl_nv "inject clear"
	ctl_nv "inject $1 $2 $3"
	klog_flush
	expect_write_error "$4" "$6" $IBC/ctl "reg 1 edu0 $GPU_VA 0x40000"
	n=$(dmesg | grep -c "nv_peer_mem: .*$5")
	if [ "$n" -ge 1 ]; then ok "  logged: $5"; else not_ok "  no log line matching '$5'"; dmesg | tail -5; fi
	check "  no registration left" test -z "$(cat $IBC/regs)"
	check "  no module reference left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
	expect_nv_clean "$6"
}
# acquire's probe and get_pages both see the error: GPU memory that cannot be pinned is still
# claimed, so the user gets NVIDIA's errno instead of EFAULT.
inject_case get_pages -12 2 "Cannot allocate memory" "BAR1" "BAR exhausted: ENOMEM"
inject_case get_pages -5 2 "Input/output error" "pinning GPU memory" "driver error: EIO"
inject_case get_pages -95 2 "Operation not supported" "pinning GPU memory" "unsupported: EOPNOTSUPP"
# NVIDIA returns the kernel-internal ENOTSUPP (524); ibv_reg_mr must not say "Unknown error 524".
inject_case get_pages -524 2 "Operation not supported" "pinning GPU memory" "ENOTSUPP (524) reaches users as EOPNOTSUPP"
inject_case dma_map_pages -12 1 "Cannot allocate memory" "DMA-mapping GPU memory" "dma_map fails: ENOMEM"
inject_case get_pages pagesize 2 "Invalid argument" "only 64 KiB pages" "128 KiB GPU pages refused"
inject_case get_pages version 2 "Invalid argument" "page table version" "incompatible page table version"
inject_case dma_map_pages version 1 "Invalid argument" "DMA mapping version" "incompatible mapping version"
ctl_nv "inject clear"
check "a clean registration still works" ctl_ib "reg 2 edu0 $GPU_VA 0x40000"
dma_check 2 0x30000 "$GPU_VA + 0x30000"
check "deregister" ctl_ib "dereg 2"
expect_write_error "Invalid argument" "dma_map for a non-PCI device refused" $IBC/ctl "reg 3 none $GPU_VA 0x40000"
check "  logged" sh -c 'dmesg | grep -q "not a PCI device"'
expect_nv_clean "after all"
check "unload" unload_world
finish
