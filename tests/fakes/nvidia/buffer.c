// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: GPU buffers ("cudaMalloc" / "cudaFree") at
 * test-chosen GPU virtual addresses.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/export.h>
#include <linux/sched.h>
#include <linux/ktime.h>
#include <linux/slab.h>

#include "fake_nvidia.h"

const char *const fnv_layout_names[FNV_LAYOUT_NR] = {
	[FNV_LAYOUT_CONTIGUOUS] = "contiguous",
	[FNV_LAYOUT_FRAGMENTED] = "fragmented",
	[FNV_LAYOUT_SHUFFLED] = "shuffled",
};

static void fnv_buffer_destroy(struct fnv_buffer *buf)
{
	fnv_gpu_free_pages(buf->gpu, buf->pages, buf->npages);
	list_del(&buf->node);
	kvfree(buf->pages);
	kfree(buf);
}

/* Freed buffers whose memory is still pinned do not occupy their VA. */
static bool fnv_buffer_overlaps(u64 va, u64 size)
{
	struct fnv_buffer *buf;

	list_for_each_entry(buf, &fnv_buffers, node)
		if (!buf->freed && va < buf->va + buf->size &&
		    buf->va < va + size)
			return true;
	return false;
}

int fnv_buffer_alloc(u64 va, u64 size, enum fnv_layout layout, int gpu_index)
{
	struct fnv_buffer *buf;
	struct fnv_gpu *gpu;
	int ret;

	if (!size || !IS_ALIGNED(va, FNV_PAGE_SIZE) ||
	    !IS_ALIGNED(size, FNV_PAGE_SIZE) || va + size < va) {
		pr_err("alloc: va=0x%llx size=0x%llx must be non-empty and 64 KiB aligned\n",
		       va, size);
		return -EINVAL;
	}

	mutex_lock(&fnv_lock);

	gpu = fnv_gpu_find(gpu_index);
	if (!gpu) {
		pr_err("alloc: no GPU%d\n", gpu_index);
		ret = -ENODEV;
		goto unlock;
	}

	if (fnv_buffer_overlaps(va, size)) {
		pr_err("alloc: va=0x%llx size=0x%llx overlaps a live buffer\n",
		       va, size);
		ret = -EEXIST;
		goto unlock;
	}

	if (size >> FNV_PAGE_SHIFT > gpu->free_pages) {
		pr_err("alloc: GPU%d has only %lu free pages for size=0x%llx\n",
		       gpu->index, gpu->free_pages, size);
		ret = -ENOMEM;
		goto unlock;
	}

	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf) {
		ret = -ENOMEM;
		goto unlock;
	}
	buf->gpu = gpu;
	buf->va = va;
	buf->size = size;
	buf->npages = size >> FNV_PAGE_SHIFT;
	buf->layout = layout;
	/* RM registers the process that owns the memory (token 0 lookups). */
	buf->owner = current->tgid;
	INIT_LIST_HEAD(&buf->tables);

	buf->pages = kvcalloc(buf->npages, sizeof(*buf->pages), GFP_KERNEL);
	if (!buf->pages) {
		ret = -ENOMEM;
		goto err_free_buf;
	}

	ret = fnv_gpu_alloc_pages(gpu, layout, buf->npages, buf->pages);
	if (ret) {
		pr_err("alloc: GPU%d has no room for %lu %s pages (%lu free)\n",
		       gpu->index, buf->npages, fnv_layout_names[layout],
		       gpu->free_pages);
		goto err_free_pages;
	}

	list_add_tail(&buf->node, &fnv_buffers);
	mutex_unlock(&fnv_lock);
	return 0;

err_free_pages:
	kvfree(buf->pages);
err_free_buf:
	kfree(buf);
unlock:
	mutex_unlock(&fnv_lock);
	return ret;
}
/* For the fake ib_core's in-kernel stress races (looked up with symbol_get). */
EXPORT_SYMBOL_GPL(fnv_buffer_alloc);

/*
 * The unfreed buffer wholly containing [va, va + len), or NULL.
 * Caller holds fnv_lock.
 */
struct fnv_buffer *fnv_buffer_find_range(u64 va, u64 len)
{
	struct fnv_buffer *buf;

	lockdep_assert_held(&fnv_lock);
	list_for_each_entry(buf, &fnv_buffers, node)
		if (!buf->freed && va >= buf->va &&
		    va + len <= buf->va + buf->size)
			return buf;
	return NULL;
}

/* Return a freed buffer's pages once nothing pins them. Caller holds fnv_lock. */
void fnv_buffer_release_if_unused(struct fnv_buffer *buf)
{
	lockdep_assert_held(&fnv_lock);
	if (buf->freed && !buf->freeing && list_empty(&buf->tables))
		fnv_buffer_destroy(buf);
}

/*
 * "cudaFree", after NVIDIA/open-gpu-kernel-modules
 * src/nvidia/src/kernel/gpu/bus/third_party_p2p.c CliDelThirdPartyP2PVidmemInfo
 * (515-595): with the API lock held (the free ioctl runs under it), for each
 * mapping of the memory: call its free callback, which is nv-p2p.c's
 * nv_p2p_mem_info_free_callback: the client's callback and then (515+) the
 * freeing of the page table and its DMA mappings; then the next one.
 * Persistent pins (and r515 pins with a NULL callback) keep the memory
 * until they are put. The callbacks run in the writer's context.
 */
int fnv_buffer_free(u64 va)
{
	struct fnv_fault_req fault;
	struct fnv_buffer *buf;
	struct fnv_table *t;
	bool found = false;
	int ret;

	ret = fnv_api_lock("free", "free va=0x%llx", va);
	if (ret)
		return ret;

	mutex_lock(&fnv_lock);
	list_for_each_entry(buf, &fnv_buffers, node) {
		if (!buf->freed && buf->va == va) {
			found = true;
			break;
		}
	}
	if (!found) {
		mutex_unlock(&fnv_lock);
		fnv_api_unlock();
		pr_err("free: no live buffer starts at va=0x%llx\n", va);
		return -EINVAL;
	}

	/* No new pins from here on; @freeing keeps @buf alive while unlocked. */
	buf->freed = true;
	buf->freeing = true;

	while ((t = fnv_table_begin_invalidate(buf))) {
		void (*callback)(void *data) = t->free_callback;
		void *data = t->data;
		u64 id = t->id, tva = t->va, tlen = t->len, t0;

		mutex_unlock(&fnv_lock);
		fnv_api_doing("free va=0x%llx: in the free callback of the pin va=0x%llx len=0x%llx",
			      va, tva, tlen);
		fnv_inject_take(FNV_OP_CALLBACK, &fault);
		t0 = ktime_get_ns();
		callback(data);
		fnv_callback_timed(ktime_get_ns() - t0);
		fnv_api_doing("free va=0x%llx: freeing the page table of va=0x%llx",
			      va, tva);
		mutex_lock(&fnv_lock);
		/* r470: the client may have freed the table in its callback. */
		t = fnv_table_find_id(id);
		if (t)
			fnv_table_end_invalidate(t);
	}

	buf->freeing = false;
	fnv_buffer_release_if_unused(buf);
	mutex_unlock(&fnv_lock);
	fnv_api_unlock();
	return 0;
}
/* For the fake ib_core's in-kernel stress races (looked up with symbol_get). */
EXPORT_SYMBOL_GPL(fnv_buffer_free);

/* Module exit, after fnv_p2p_teardown(): drop whatever is left. */
void fnv_buffers_teardown(void)
{
	struct fnv_buffer *buf, *next;
	unsigned int n = 0;

	mutex_lock(&fnv_lock);
	list_for_each_entry_safe(buf, next, &fnv_buffers, node) {
		fnv_buffer_destroy(buf);
		n++;
	}
	mutex_unlock(&fnv_lock);

	if (n)
		pr_info("unload: released %u buffers still allocated\n", n);
}
