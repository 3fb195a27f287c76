"""After an unmap or an invalidation MLNX_OFED 5.x/24.x zeroes its sg_table (REFERENCE §6): a
client that frees its sg list through ib_core's table frees nothing. Invalidate and deregister a
few registrations each way, then ask kmemleak: no sg list may be left unreferenced."""
import os
import time

from lib import *

KMEMLEAK = "/sys/kernel/debug/kmemleak"

check("load", load_world)
for i in range(1, 5):
    va = GPU_VA + i * 0x1000000
    check(f"cudaMalloc {i}", ctl_nv, f"alloc {va:#x} 0x100000 fragmented")
    check(f"register {i}", ctl_ib, f"reg {i} edu{i % 2} {va + 0x800:#x} 0xf0000")
    if i % 2 == 0:
        check("  cudaFree under it (invalidation)", ctl_nv, f"free {va:#x}")
        write_error(f"{IBC}/ctl", f"dereg {i}")  # 4.9 released it inside the invalidation
    else:
        check("  deregister (unmap)", ctl_ib, f"dereg {i}")
        check("  cudaFree", ctl_nv, f"free {va:#x}")
expect_nv_clean()
check("unload", unload_world)
if os.path.exists(KMEMLEAK):
    time.sleep(6)
    try_write(KMEMLEAK, "scan")
    try_write(KMEMLEAK, "scan")
    report = read(KMEMLEAK)
    leaks = report.count("unreferenced object")
    check("kmemleak finds no unreferenced object", leaks == 0)
    if leaks:
        say("\n".join(report.splitlines()[:40]))
    try_write(KMEMLEAK, "clear")
finish()
