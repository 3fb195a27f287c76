# shellcheck shell=sh
# One pin per registration: the pin acquire makes to recognise GPU memory is the one get_pages
# keeps (the C modules pin, unpin, then pin again). What that opens: a free between acquire and
# get_pages, a release without get_pages (the core failed in between), host memory, the
# persistent client, and probe_then_pin=1, which goes back to the C modules' way.
check "load" load_world
check "cudaMalloc 2 MiB" ctl_nv "alloc $GPU_VA 0x200000 contiguous"

# calls NAME: how often nvidia.ko was called for NAME (pin, unpin) so far.
calls() { nv_stat "$1_calls"; }

p0=$(calls pin) u0=$(calls unpin)
check "register" ctl_ib "reg 1 edu0 $GPU_VA 0x200000"
check "one pin call for the registration, no unpin" \
	test "$(($(calls pin) - p0)):$(($(calls unpin) - u0))" = 1:0
dma_check 1 0x1f0000 "$GPU_VA + 0x1f0000"
check "deregister" ctl_ib "dereg 1"
check "one unpin at deregistration" test "$(($(calls unpin) - u0))" = 1
expect_nv_clean "one pin"

check "probe_then_pin=1 at run time" sh -c 'echo 1 >/sys/module/nv_peer_mem/parameters/probe_then_pin'
p0=$(calls pin) u0=$(calls unpin)
check "register with probe-then-pin" ctl_ib "reg 2 edu0 $GPU_VA 0x200000"
check "  two pin calls and the probe's unpin" \
	test "$(($(calls pin) - p0)):$(($(calls unpin) - u0))" = 2:1
dma_check 2 0x10000 "$GPU_VA + 0x10000"
check "  deregister" ctl_ib "dereg 2"
expect_nv_clean "probe-then-pin"
check "probe_then_pin=0 again" sh -c 'echo 0 >/sys/module/nv_peer_mem/parameters/probe_then_pin'
expect_write_error "Invalid argument" "probe_then_pin=2 refused" \
	/sys/module/nv_peer_mem/parameters/probe_then_pin 2

# The core fails between acquire and get_pages (ib_peer_umem_get's allocation): release comes
# without get_pages and must give back acquire's pin.
check "core fails after acquire (ENOMEM injected)" ctl_ib "inject after_acquire -12"
expect_write_error "Cannot allocate memory" "  the registration fails with ENOMEM" $IBC/ctl \
	"reg 3 edu0 $GPU_VA 0x200000"
check "  the claimed pin is given back" test "$(nv_stat pins)" = 0
check "  nothing counted as registered" test "$(nvpm_stat nv_mem live_registrations)" = 0
check "  no module reference left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0

# cudaFree between acquire and get_pages: the claimed pin's free callback runs; get_pages
# refuses the registration instead of pinning freed memory.
# (The race's threads are one process, which allocates the buffer anew: NVIDIA finds GPU
# memory by process.)
check "cudaFree, so that the racing process can allocate it" ctl_nv "free $GPU_VA"
ctl_ib "inject after_acquire sleep:1500"
out=$(race "$NV/ctl|alloc $GPU_VA 0x200000 contiguous" \
	-- "$IBC/ctl|reg 4 edu0 $GPU_VA 0x200000" "$NV/ctl|free $GPU_VA|500000")
ctl_ib "inject clear"
echo "  $(echo "$out" | tr '\n' ' ')"
check "free between acquire and get_pages: the registration fails (EFAULT)" \
	contains "$out" '^2\.1 Bad address'
check "  the free went through" contains "$out" '^2\.2 ok'
check "  one free callback ran" test "$(nv_stat callbacks)" = 1
check "  logged and counted as freed during registration" \
	test "$(nvpm_stat nv_mem err_freed_during_registration)" = 1
# efault_logged TEXT: the registration got EFAULT and the module logged TEXT.
efault_logged() { contains "$out" '^2\.1 Bad address' && contains "$(dmesg)" "$1"; }
check "  EFAULT, logged: GPU memory at $GPU_VA (+0x200000) was freed during registration" \
	efault_logged "nv_peer_mem: GPU memory at $GPU_VA (+0x200000) was freed during registration"
check "  no invalidation (nothing was mapped)" test "$(nvpm_stat nv_mem invalidations)" = 0
check "  no module reference left" test "$(cat /sys/module/nv_peer_mem/refcnt)" = 0
expect_nv_clean "free between acquire and get_pages"

# Host memory: each client asked (nv_mem, then nv_mem_nc where it exists) tries one pin, which
# NVIDIA refuses; nothing to unpin.
clients=1
nv_has_persistent && clients=2
p0=$(calls pin) u0=$(calls unpin)
expect_write_error "Bad address" "host memory is not claimed" $IBC/ctl "reg 5 edu0 0x600000000000 0x10000"
check "  one refused pin call per client, no unpin" \
	test "$(($(calls pin) - p0)):$(($(calls unpin) - u0))" = $clients:0

if nv_has_persistent; then
	check "cudaMalloc for a CQ" ctl_nv "alloc $GPU_VA 0x40000 contiguous"
	p0=$(calls pin) u0=$(calls unpin)
	check "CQ buffer on nv_mem_nc" ctl_ib "reg 6 edu0 $GPU_VA 0x40000 cq"
	check "  one persistent pin call" test "$(($(calls pin) - p0)):$(nv_stat persistent_pins)" = 1:1
	dma_check 6 0x30000 "$GPU_VA + 0x30000"
	check "  deregister" ctl_ib "dereg 6"
	check "  one unpin" test "$(($(calls unpin) - u0))" = 1
	check "cudaFree" ctl_nv "free $GPU_VA"
fi
expect_nv_clean
check "unload" unload_world
finish
