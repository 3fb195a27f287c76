"""Host memory, freed GPU memory and another process's GPU memory are not ours: acquire says so
quietly and keeps nothing."""
from lib import *

check("load", load_world)
klog_flush()
expect_write_error("Bad address", "host address not claimed (EFAULT)", f"{IBC}/ctl",
                   "reg 1 edu0 0x7ffd00001000 0x10000")
expect_write_error("Bad address", "freed GPU range not claimed", f"{IBC}/ctl",
                   f"reg 2 edu0 {GPU_VA:#x} 0x10000")
check("cudaMalloc in this process", ctl_nv, f"alloc {GPU_VA:#x} 0x10000 contiguous")
# NVIDIA finds GPU memory by the calling process: another process's buffer is not its memory.
# So this registration, alone of the scenario's writes, comes from a child process (a shell).
check("another process's GPU memory not claimed (EFAULT)",
      lambda: not sh(f"echo 'reg 3 edu0 {GPU_VA:#x} 0x10000' > {IBC}/ctl 2>/dev/null")
      and "reg 3: no peer client claims" in dmesg())
check("cudaFree", ctl_nv, f"free {GPU_VA:#x}")
check("no log noise from nv_peer_mem", "nv_peer_mem" not in dmesg())
check("no context kept (refcount 0)", refcnt() == "0")
check("nv_mem counts 3 ranges not its own", nvpm_stat("nv_mem", "err_not_mine") == "3")
expect_nv_clean()
check("unload", unload_world)
finish()
