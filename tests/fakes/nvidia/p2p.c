// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: nvidia_p2p_get_pages, nvidia_p2p_put_pages and
 * nvidia_p2p_free_page_table, per generation.
 *
 * Sources (NVIDIA/open-gpu-kernel-modules unless said otherwise):
 *  - kernel-open/nvidia/nv-p2p.c 515.43.04 (= 530.41.03): exports
 *    nvidia_p2p_cap_persistent_pages; a NULL free callback means a
 *    persistent pin; put_pages reads page_table->gpu_uuid and the wrapper
 *    around the table before and after entering RM.
 *  - kernel-open/nvidia/nv-p2p.c 535.43.02: no capability symbol; a NULL
 *    callback is -EINVAL; put_pages(NULL) is 0 and never dereferences a
 *    non-persistent table (only passes it to RM as a lookup key);
 *    NV_ERR_OBJECT_NOT_FOUND from RM becomes 0.
 *  - src/nvidia/src/kernel/gpu/bus/p2p.c (RmP2PGetInfoWithoutToken) and
 *    kernel-open/nvidia/os-interface.c (os_get_current_process returns
 *    current->tgid): with token 0, get_pages and put_pages only find
 *    objects of the calling process.
 *  - pre-515 (r470): Mellanox/nv_peer_memory nv_peer_mem.c: the client
 *    frees the table with nvidia_p2p_free_page_table inside its callback,
 *    and "inflight put_pages with valid pointer will fail gracefully"
 *    (returns an error). RM's RmP2PGetPages (src/nvidia/src/kernel/gpu/bus/
 *    p2p.c, still present in 515 without callers) rejects a NULL callback
 *    or NULL data with NV_ERR_INVALID_ARGUMENT: r470 does the same.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/module.h>
#include <linux/sched.h>

#include "fake_nvidia.h"

/* An unknown major for every generation (r580's own major is 2). */
#define FNV_BAD_TABLE_VERSION	0x00030000u

#if FNV_GEN == 515
int nvidia_p2p_cap_persistent_pages = 1;
EXPORT_SYMBOL(nvidia_p2p_cap_persistent_pages);
#endif

/* ---- pinning ---- */

int fnv_p2p_get_pages(enum fnv_op op, u64 va, u64 len,
		      struct nvidia_p2p_page_table **page_table,
		      bool persistent, void (*free_callback)(void *data),
		      void *data, const struct fnv_fault_req *fault)
{
	const char *name = fnv_op_names[op];
	struct fnv_buffer *buf;
	struct fnv_table *t;
	bool aligned;
	int ret;

	might_sleep();
	if (!page_table) {
		fnv_violation("%s: NULL page_table pointer (the real driver writes through it)\n",
			      name);
		return -EINVAL;
	}
	aligned = len && IS_ALIGNED(va, FNV_PAGE_SIZE) && IS_ALIGNED(len, FNV_PAGE_SIZE) &&
		  va + len >= va;
#if FNV_GEN >= 580
	/* nv-p2p.c (560+): 64 KiB aligned, checked before *page_table is written. */
	if (!aligned) {
		pr_info("%s: va=0x%llx len=0x%llx is not a 64 KiB aligned range\n",
			name, va, len);
		return -EINVAL;
	}
#endif
	/* nv-p2p.c writes NULL, then its table: from here a failure leaves it dangling. */
	*page_table = NULL;

	ret = fnv_api_lock(name, "%s va=0x%llx len=0x%llx", name, va, len);
	if (ret)
		return ret;
	fnv_inject_stall_locked(op, fault);

	mutex_lock(&fnv_lock);
	/* RM's _rmP2PGetPages (515+) checks the alignment too. */
	if (!aligned) {
		pr_info("%s: va=0x%llx len=0x%llx is not a 64 KiB aligned range\n",
			name, va, len);
		ret = -EINVAL;
		goto dangle;
	}
	buf = fnv_buffer_find_range(va, len);
	if (!buf) {
		pr_info("%s: va=0x%llx len=0x%llx is not inside one live buffer\n",
			name, va, len);
		ret = -EINVAL;
		goto dangle;
	}
	if (buf->owner != current->tgid) {
		pr_info("%s: va=0x%llx belongs to process %d, the calling process %d finds nothing\n",
			name, va, buf->owner, current->tgid);
		ret = -EINVAL;
		goto dangle;
	}
	/* nv-p2p.h: persistent pins are not supported on MIG or vGPU. */
	if (persistent && READ_ONCE(fnv_mig)) {
		pr_info("%s: va=0x%llx: persistent pins are not supported on MIG/vGPU (mig=1)\n",
			name, va);
		ret = -ENOTSUPP;
		goto dangle;
	}

	t = fnv_table_create(buf, va, len);
	if (!t) {
		ret = -ENOMEM;
		goto unlock;
	}
	t->persistent = persistent;
	t->free_callback = free_callback;
	t->data = data;
	if (fault->kind == FNV_FAULT_PAGESIZE)
		t->pt.page_size = fault->page_size;
	else if (fault->kind == FNV_FAULT_ENTRIES)
		t->pt.entries--;	/* the fake itself keeps using npages */
	else if (fault->kind == FNV_FAULT_VERSION)
		t->pt.version = FNV_BAD_TABLE_VERSION;
	fnv_table_pin(t, buf);
	*page_table = &t->pt;
	goto unlock;
dangle:
	fnv_table_dangle(page_table, va, len);
unlock:
	mutex_unlock(&fnv_lock);
	fnv_cost_charge(FNV_CALL_PIN, ret ? 0 : len / FNV_PAGE_SIZE);
	fnv_api_unlock();
	return ret;
}

/*
 * An injected error of get_pages stands for RM's (BAR1 exhausted, a bad handle...), which
 * comes after nv-p2p.c allocated the table: the caller's pointer is left at the freed table.
 */
int fnv_get_pages_injected(struct nvidia_p2p_page_table **page_table, u64 va, u64 len, int err)
{
	if (page_table) {
		*page_table = NULL;
		mutex_lock(&fnv_lock);
		fnv_table_dangle(page_table, va, len);
		mutex_unlock(&fnv_lock);
	}
	return err;
}

static int fnv_get_pages_call(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	struct fnv_fault_req fault;
	bool persistent = false;

	might_sleep();
	fnv_inject_take(FNV_OP_GET_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fnv_get_pages_injected(page_table, virtual_address, length, fault.err);

#if FNV_GEN >= 535
	if (!free_callback) {
		pr_info("get_pages: NULL free callback is -EINVAL (persistent pins use nvidia_p2p_get_pages_persistent)\n");
		return -EINVAL;
	}
#elif FNV_GEN == 515
	persistent = !free_callback;
	if (persistent && (p2p_token || va_space)) {
		/* 515 stores -ENOTSUPP as an NV_STATUS, which maps to -EIO. */
		pr_info("get_pages: persistent pin with token/va_space: -EIO\n");
		return -EIO;
	}
#else
	if (!free_callback || !data) {
		pr_info("get_pages: NULL free callback or data is -EINVAL in this generation\n");
		return -EINVAL;
	}
#endif
	if (p2p_token || va_space) {
		pr_info("get_pages: token 0x%llx / va_space %u: no such P2P object\n",
			p2p_token, va_space);
		return -EINVAL;
	}
	return fnv_p2p_get_pages(FNV_OP_GET_PAGES, virtual_address, length,
				 page_table, persistent, free_callback, data,
				 &fault);
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_get_pages_call(p2p_token, va_space, virtual_address, length,
					   page_table, free_callback, data);

	if (!ret)
		fnv_table_returned(*page_table);
	fnv_call_end(FNV_CALL_PIN, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_get_pages);

/* put_pages on one of our tables, fnv_lock held. */
static int fnv_put_pages_table(struct fnv_table *t, u64 va)
{
	if (t->state != FNV_TABLE_LIVE) {
		/* r470 only: r515+ have freed the table by now. */
		pr_info("put_pages: va=0x%llx: its free callback already ran, fails gracefully\n",
			t->va);
		return -EINVAL;
	}
	if (t->persistent) {
#if FNV_GEN == 515
		fnv_table_put_locked(t, "put_pages");
		return 0;
#else
		fnv_violation("put_pages: va=0x%llx is a persistent pin (use put_pages_persistent); the driver finds nothing and returns 0\n",
			      t->va);
		return 0;
#endif
	}
	if (t->owner != current->tgid) {
		pr_info("put_pages: va=0x%llx was pinned by process %d; the calling %s %d finds nothing: returns 0, nothing unpinned\n",
			t->va, t->owner,
			(current->flags & PF_KTHREAD) ? "kernel thread" : "process",
			current->tgid);
		return 0;
	}
	if (va != t->va)
		fnv_violation("put_pages: va=0x%llx does not match the table's va=0x%llx (the driver ignores it)\n",
			      va, t->va);
	fnv_table_put_locked(t, "put_pages");
	return 0;
}

static int fnv_put_pages_call(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	u64 since = fnv_seq_now();
	struct fnv_tomb *tomb;
	struct fnv_fault_req fault;
	enum fnv_pt_state st;
	struct fnv_table *t;
	u64 pages = 0;
	int ret;

	might_sleep();
	fnv_inject_take(FNV_OP_PUT_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

#if FNV_GEN >= 535
	if (!page_table)
		return 0;
#else
	if (!page_table) {
		fnv_violation("put_pages: NULL page table (the real driver dereferences it)\n");
		return -EINVAL;
	}
	/* 515: reads page_table->gpu_uuid before taking the API lock. */
	mutex_lock(&fnv_lock);
	ret = fnv_table_check("put_pages", page_table, since, &t);
	mutex_unlock(&fnv_lock);
	if (ret)
		return ret;
#endif

	ret = fnv_api_lock("put_pages", "put_pages va=0x%llx", virtual_address);
	if (ret)
		return ret;
	fnv_inject_stall_locked(FNV_OP_PUT_PAGES, &fault);

	mutex_lock(&fnv_lock);
	st = fnv_table_resolve(page_table, since, &t, &tomb);
	switch (st) {
	case FNV_PT_TABLE:
		pages = t->npages;
		ret = fnv_put_pages_table(t, virtual_address);
		break;
#if FNV_GEN >= 535
	case FNV_PT_DIED_DURING:
	case FNV_PT_DIED_BEFORE:
		/* RM: NV_ERR_OBJECT_NOT_FOUND, which nv-p2p.c turns into 0. */
		pr_info("put_pages: page table of va=0x%llx is already gone: not found, returns 0\n",
			tomb->va);
		ret = 0;
		break;
	default:
		fnv_violation("put_pages: %p is not a page table of ours (the driver returns 0)\n",
			      page_table);
		ret = 0;
		break;
#else
	default:
		/* 515 reads the wrapper again after RM returns. */
		ret = fnv_table_report("put_pages", st, tomb, page_table);
		break;
#endif
	}
	mutex_unlock(&fnv_lock);
	fnv_cost_charge(FNV_CALL_UNPIN, pages);
	fnv_api_unlock();
	return ret;
}

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_put_pages_call(p2p_token, va_space, virtual_address,
					   page_table);

	/* A put that succeeded freed the table: its address is anyone's now. */
	if (ret)
		fnv_table_returned(page_table);
	fnv_call_end(FNV_CALL_UNPIN, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages);

static int fnv_free_page_table_call(struct nvidia_p2p_page_table *page_table)
{
	u64 since = fnv_seq_now();
	struct fnv_fault_req fault;

	might_sleep();
	fnv_inject_take(FNV_OP_FREE_PAGE_TABLE, &fault);
#if FNV_DRIVER_FREES
	/* nv-p2p.c 515+: a no-op; the driver frees after the callback. */
	(void)since;
	return 0;
#else
	{
		struct fnv_table *t;
		int ret;

		mutex_lock(&fnv_lock);
		ret = fnv_table_check("free_page_table", page_table, since, &t);
		if (!ret && t->state == FNV_TABLE_LIVE) {
			fnv_violation("free_page_table: va=0x%llx is still pinned (use put_pages)\n",
				      t->va);
			ret = -EINVAL;
		} else if (!ret) {
			if (!list_empty(&t->mappings))
				pr_info("free_page_table: va=0x%llx still has DMA mappings: freed with it\n",
					t->va);
			fnv_table_free(t, FNV_DIED_CLIENT_FREE);
		}
		mutex_unlock(&fnv_lock);
		return ret;
	}
#endif
}

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_free_page_table_call(page_table);

	fnv_call_end(FNV_CALL_FREE, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_free_page_table);
