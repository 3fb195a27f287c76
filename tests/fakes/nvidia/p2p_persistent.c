// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: persistent pins (no free callback; the memory stays
 * pinned across "cudaFree" until put). Built in flavours r535 and r580.
 *
 * Sources (NVIDIA/open-gpu-kernel-modules):
 *  - kernel-open/nvidia/nv-p2p.c 535.43.02-560.35.03: get_pages_persistent
 *    and put_pages_persistent return -EINVAL for any flags.
 *  - kernel-open/nvidia/nv-p2p.c 570.86.15-595.45.04: get_pages_persistent
 *    accepts NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING; RmP2PGetPagesPersistent
 *    (src/nvidia/src/kernel/gpu/bus/p2p.c) refuses it with
 *    NV_ERR_NOT_SUPPORTED (-ENOTSUPP) unless the GPU has coherent CPU
 *    mappings, which a PCIe GPU like ours has not. Other bits are ignored.
 *    The fake gives r580 this behaviour (570-575 have it too).
 *  - get_pages_persistent finds the buffer through the calling process
 *    (rm_p2p_get_gpu_info and RmP2PGetPagesPersistent both go through
 *    RmP2PGetInfoWithoutToken); put_pages_persistent does not: it hands RM
 *    the internal object saved in the table's wrapper.
 *  - put_pages_persistent(NULL) returns 0; otherwise it copies
 *    page_table->gpu_uuid before taking the API lock.
 *  - nv-p2p.h: not supported on MIG-enabled devices and vGPU (module
 *    parameter mig=1 makes get_pages_persistent return -ENOTSUPP).
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/module.h>

#include "fake_nvidia.h"

static int fnv_get_pages_persistent_call(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	struct fnv_fault_req fault;

	might_sleep();
	fnv_inject_take(FNV_OP_GET_PAGES_PERSISTENT, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fnv_get_pages_injected(page_table, virtual_address, length, fault.err);

#if FNV_GEN >= 580
	if (flags & NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING) {
		pr_info("get_pages_persistent: forced BAR1 mappings need a coherent GPU: -ENOTSUPP\n");
		return -ENOTSUPP;
	}
#else
	if (flags) {
		pr_info("get_pages_persistent: flags 0x%x: -EINVAL\n", flags);
		return -EINVAL;
	}
#endif
	return fnv_p2p_get_pages(FNV_OP_GET_PAGES_PERSISTENT, virtual_address,
				 length, page_table, true, NULL, NULL, &fault);
}

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_get_pages_persistent_call(virtual_address, length, page_table,
						      flags);

	fnv_call_end(FNV_CALL_PIN, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_get_pages_persistent);

/* Both checks of put_pages_persistent; fnv_lock held. */
static int fnv_persistent_check(struct nvidia_p2p_page_table *pt, u64 since,
				struct fnv_table **tp)
{
	int ret;

	ret = fnv_table_check("put_pages_persistent", pt, since, tp);
	if (ret)
		return ret;
	if (!(*tp)->persistent) {
		fnv_violation("put_pages_persistent: va=0x%llx was not pinned persistently (use put_pages)\n",
			      (*tp)->va);
		return -EINVAL;
	}
	return 0;
}

static int fnv_put_pages_persistent_call(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	u64 since = fnv_seq_now();
	struct fnv_fault_req fault;
	struct fnv_table *t;
	u64 pages = 0;
	int ret;

	might_sleep();
	fnv_inject_take(FNV_OP_PUT_PAGES_PERSISTENT, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	if (flags) {
		pr_info("put_pages_persistent: flags 0x%x: -EINVAL\n", flags);
		return -EINVAL;
	}
	if (!page_table)
		return 0;

	mutex_lock(&fnv_lock);
	ret = fnv_persistent_check(page_table, since, &t);
	mutex_unlock(&fnv_lock);
	if (ret)
		return ret;

	ret = fnv_api_lock("put_pages_persistent",
			   "put_pages_persistent va=0x%llx", virtual_address);
	if (ret)
		return ret;
	fnv_inject_stall_locked(FNV_OP_PUT_PAGES_PERSISTENT, &fault);

	mutex_lock(&fnv_lock);
	ret = fnv_persistent_check(page_table, since, &t);
	if (!ret) {
		pages = t->npages;
		if (t->va != virtual_address)
			fnv_violation("put_pages_persistent: va=0x%llx does not match the table's va=0x%llx (the driver ignores it)\n",
				      virtual_address, t->va);
		fnv_table_put_locked(t, "put_pages_persistent");
	}
	mutex_unlock(&fnv_lock);
	fnv_cost_charge(FNV_CALL_UNPIN, pages);
	fnv_api_unlock();
	return ret;
}

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_put_pages_persistent_call(virtual_address, page_table,
						      flags);

	fnv_call_end(FNV_CALL_UNPIN, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages_persistent);
