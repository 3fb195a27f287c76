// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: persistent pins (no free callback; the memory stays
 * pinned across "cudaFree" until put). Built in the "full" flavour only.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/module.h>

#include "fake_nvidia.h"

int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags)
{
	struct fnv_fault_req fault;

	might_sleep();
	fnv_inject_take(FNV_OP_GET_PAGES_PERSISTENT, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	if (flags) {
		pr_info("get_pages_persistent: flags 0x%x are not supported\n",
			flags);
		return -EINVAL;
	}
	return fnv_p2p_get_pages("get_pages_persistent", virtual_address,
				 length, page_table, true, NULL, NULL, &fault);
}
EXPORT_SYMBOL(nvidia_p2p_get_pages_persistent);

int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags)
{
	struct fnv_fault_req fault;
	struct fnv_table *t;
	int ret = 0;

	might_sleep();
	fnv_inject_take(FNV_OP_PUT_PAGES_PERSISTENT, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	if (flags) {
		pr_info("put_pages_persistent: flags 0x%x are not supported\n",
			flags);
		return -EINVAL;
	}

	mutex_lock(&fnv_lock);
	t = fnv_table_lookup(page_table);
	if (!t) {
		fnv_violation("put_pages_persistent: %p is not a page table of ours (freed twice?)\n",
			      page_table);
		ret = -EINVAL;
	} else if (!t->persistent) {
		fnv_violation("put_pages_persistent: va=0x%llx was not pinned persistently (use put_pages)\n",
			      t->va);
		ret = -EINVAL;
	} else if (t->va != virtual_address) {
		fnv_violation("put_pages_persistent: va=0x%llx does not match the table's va=0x%llx\n",
			      virtual_address, t->va);
		ret = -EINVAL;
	} else {
		fnv_table_put_locked(t, "put_pages_persistent");
	}
	mutex_unlock(&fnv_lock);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages_persistent);
