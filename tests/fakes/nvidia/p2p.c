// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: the P2P page table and DMA mapping API.
 *
 * Every pointer a client passes in is looked up among the objects we handed
 * out, so a double free or a stale pointer is reported as a violation
 * instead of being dereferenced.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/build_bug.h>
#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/stddef.h>

#include "fake_nvidia.h"

/* The layout the client relies on (x86_64). */
static_assert(sizeof(struct nvidia_p2p_page) == 32);
static_assert(offsetof(struct nvidia_p2p_page_table, page_size) == 4);
static_assert(offsetof(struct nvidia_p2p_page_table, pages) == 8);
static_assert(offsetof(struct nvidia_p2p_page_table, entries) == 16);
static_assert(offsetof(struct nvidia_p2p_page_table, gpu_uuid) == 24);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, page_size_type) == 4);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, entries) == 8);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, dma_addresses) == 16);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, private) == 24);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, pci_dev) == 32);

#define FNV_BAD_TABLE_VERSION	0x00020000u
#define FNV_BAD_MAPPING_VERSION	0x00030000u

#ifdef FNV_HAVE_CAP_SYMBOL
int nvidia_p2p_cap_persistent_pages = 1;
EXPORT_SYMBOL(nvidia_p2p_cap_persistent_pages);
#endif

/* ---- object helpers, all called with fnv_lock held ---- */

struct fnv_table *fnv_table_lookup(struct nvidia_p2p_page_table *pt)
{
	struct fnv_table *t;

	lockdep_assert_held(&fnv_lock);
	if (!pt)
		return NULL;
	list_for_each_entry(t, &fnv_tables, node)
		if (&t->pt == pt && !t->client_freed)
			return t;
	return NULL;
}

static struct fnv_mapping *fnv_mapping_lookup(struct nvidia_p2p_dma_mapping *m)
{
	struct fnv_mapping *fm;

	lockdep_assert_held(&fnv_lock);
	if (!m)
		return NULL;
	list_for_each_entry(fm, &fnv_mappings, node)
		if (&fm->m == m)
			return fm;
	return NULL;
}

static void fnv_mapping_unmap(struct fnv_mapping *fm, unsigned long n)
{
	unsigned long i;

	for (i = 0; i < n; i++)
		dma_unmap_resource(&fm->peer->dev, fm->dma[i], FNV_PAGE_SIZE,
				   DMA_BIDIRECTIONAL, 0);
}

/* The table died under the mapping: unmap it, keep the object. */
static void fnv_mapping_kill(struct fnv_mapping *fm)
{
	if (!fm->mapped)
		return;
	fnv_mapping_unmap(fm, fm->npages);
	fm->mapped = false;
	fnv_stats.mappings--;
	fnv_stats.dead_mappings++;
}

static void fnv_mapping_destroy(struct fnv_mapping *fm)
{
	if (fm->mapped) {
		fnv_mapping_unmap(fm, fm->npages);
		fnv_stats.mappings--;
	} else {
		fnv_stats.dead_mappings--;
	}
	list_del(&fm->node);
	list_del(&fm->table_node);
	pci_dev_put(fm->peer);
	kvfree(fm->dma);
	kfree(fm);
}

static struct fnv_table *fnv_table_create(struct fnv_buffer *buf, u64 va,
					  u64 len)
{
	struct fnv_table *t;
	unsigned long i;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return NULL;

	t->npages = len >> FNV_PAGE_SHIFT;
	t->page_structs = kvcalloc(t->npages, sizeof(*t->page_structs),
				   GFP_KERNEL);
	if (!t->page_structs)
		goto err_free_table;
	t->page_ptrs = kvcalloc(t->npages, sizeof(*t->page_ptrs), GFP_KERNEL);
	if (!t->page_ptrs)
		goto err_free_structs;

	INIT_LIST_HEAD(&t->mappings);
	t->buf = buf;
	t->va = va;
	t->len = len;
	t->first = (va - buf->va) >> FNV_PAGE_SHIFT;
	memcpy(t->uuid, buf->gpu->uuid, FNV_UUID_LEN);

	for (i = 0; i < t->npages; i++) {
		t->page_structs[i].physical_address =
			fnv_gpu_page_phys(buf->gpu, buf->pages[t->first + i]);
		t->page_ptrs[i] = &t->page_structs[i];
	}

	t->pt.version = NVIDIA_P2P_PAGE_TABLE_VERSION;
	t->pt.page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	t->pt.pages = t->page_ptrs;
	t->pt.entries = t->npages;
	t->pt.gpu_uuid = t->uuid;
	return t;

err_free_structs:
	kvfree(t->page_structs);
err_free_table:
	kfree(t);
	return NULL;
}

static void fnv_table_destroy(struct fnv_table *t)
{
	WARN_ON(!list_empty(&t->mappings));
	list_del(&t->node);
	kvfree(t->page_ptrs);
	kvfree(t->page_structs);
	kfree(t);
}

/* A dead table goes once the client freed it and its mapping objects. */
static void fnv_table_maybe_destroy(struct fnv_table *t)
{
	if (t->state == FNV_TABLE_DEAD && t->client_freed &&
	    list_empty(&t->mappings))
		fnv_table_destroy(t);
}

/* Stop @t pinning its buffer; the caller releases the buffer if needed. */
static void fnv_table_unpin(struct fnv_table *t)
{
	struct fnv_buffer *buf = t->buf;

	list_del(&t->buf_node);
	buf->pins--;
	fnv_stats.pins--;
	if (t->persistent) {
		buf->persistent_pins--;
		fnv_stats.persistent_pins--;
	}
	t->buf = NULL;
}

/* put_pages / put_pages_persistent on a live table: unmap, unpin, free. */
void fnv_table_put_locked(struct fnv_table *t, const char *op)
{
	struct fnv_mapping *fm, *next;
	struct fnv_buffer *buf = t->buf;

	lockdep_assert_held(&fnv_lock);
	list_for_each_entry_safe(fm, next, &t->mappings, table_node) {
		fnv_violation("%s: va=0x%llx len=0x%llx still DMA-mapped for %s (dma_unmap_pages first)\n",
			      op, t->va, t->len, pci_name(fm->peer));
		fnv_mapping_destroy(fm);
	}
	fnv_table_unpin(t);
	fnv_table_destroy(t);
	fnv_buffer_release_if_unused(buf);
}

/*
 * Start invalidating the next live table of @buf that has a free callback:
 * it stops pinning the buffer and becomes INVALIDATING, which keeps the
 * wrapper alive while the caller runs the callback without fnv_lock.
 */
struct fnv_table *fnv_table_begin_invalidate(struct fnv_buffer *buf)
{
	struct fnv_table *t;

	lockdep_assert_held(&fnv_lock);
	list_for_each_entry(t, &buf->tables, buf_node) {
		if (t->persistent || !t->free_callback)
			continue;
		fnv_table_unpin(t);
		t->state = FNV_TABLE_INVALIDATING;
		fnv_stats.callbacks++;
		fnv_stats.dead_tables++;
		return t;
	}
	return NULL;
}

/* The callback returned: unmap what the client left mapped. */
void fnv_table_end_invalidate(struct fnv_table *t)
{
	struct fnv_mapping *fm;

	lockdep_assert_held(&fnv_lock);
	list_for_each_entry(fm, &t->mappings, table_node)
		fnv_mapping_kill(fm);
	t->state = FNV_TABLE_DEAD;
	fnv_table_maybe_destroy(t);
}

/* Module exit: every object still around was leaked by a client. */
void fnv_p2p_teardown(void)
{
	struct fnv_mapping *fm, *fm_next;
	struct fnv_table *t, *t_next;

	mutex_lock(&fnv_lock);
	list_for_each_entry_safe(fm, fm_next, &fnv_mappings, node) {
		fnv_violation("unload: DMA mapping of va=0x%llx for %s was never %s\n",
			      fm->table->va, pci_name(fm->peer),
			      fm->mapped ? "unmapped" : "freed");
		fnv_mapping_destroy(fm);
	}
	list_for_each_entry_safe(t, t_next, &fnv_tables, node) {
		if (t->state == FNV_TABLE_LIVE) {
			fnv_violation("unload: %spin va=0x%llx len=0x%llx was never put\n",
				      t->persistent ? "persistent " : "",
				      t->va, t->len);
			fnv_table_unpin(t);
		} else if (!t->client_freed) {
			fnv_violation("unload: page table va=0x%llx len=0x%llx was never freed after its free callback\n",
				      t->va, t->len);
			fnv_stats.dead_tables--;
		}
		fnv_table_destroy(t);
	}
	mutex_unlock(&fnv_lock);
}

/* ---- pinning ---- */

int fnv_p2p_get_pages(const char *op, u64 va, u64 len,
		      struct nvidia_p2p_page_table **page_table,
		      bool persistent, void (*free_callback)(void *data),
		      void *data, const struct fnv_fault_req *fault)
{
	struct fnv_buffer *buf;
	struct fnv_table *t;
	int ret = 0;

	might_sleep();
	if (!page_table) {
		pr_err("%s: NULL page_table pointer\n", op);
		return -EINVAL;
	}
	if (!len || !IS_ALIGNED(va, FNV_PAGE_SIZE) ||
	    !IS_ALIGNED(len, FNV_PAGE_SIZE) || va + len < va) {
		pr_info("%s: va=0x%llx len=0x%llx is not a 64 KiB aligned range\n",
			op, va, len);
		return -EINVAL;
	}

	mutex_lock(&fnv_lock);
	buf = fnv_buffer_find_range(va, len);
	if (!buf) {
		pr_info("%s: va=0x%llx len=0x%llx is not inside one live buffer\n",
			op, va, len);
		ret = -EINVAL;
		goto unlock;
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
		t->pt.page_size = NVIDIA_P2P_PAGE_SIZE_128KB;
	else if (fault->kind == FNV_FAULT_VERSION)
		t->pt.version = FNV_BAD_TABLE_VERSION;

	list_add_tail(&t->node, &fnv_tables);
	list_add_tail(&t->buf_node, &buf->tables);
	buf->pins++;
	fnv_stats.pins++;
	if (persistent) {
		buf->persistent_pins++;
		fnv_stats.persistent_pins++;
	}
	*page_table = &t->pt;
unlock:
	mutex_unlock(&fnv_lock);
	return ret;
}

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	struct fnv_fault_req fault;

	might_sleep();
	fnv_inject_take(FNV_OP_GET_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	if (p2p_token || va_space) {
		pr_info("get_pages: token 0x%llx / va_space %u are not supported\n",
			p2p_token, va_space);
		return -EINVAL;
	}
	return fnv_p2p_get_pages("get_pages", virtual_address, length,
				 page_table, false, free_callback, data,
				 &fault);
}
EXPORT_SYMBOL(nvidia_p2p_get_pages);

int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	struct fnv_fault_req fault;
	struct fnv_table *t;
	int ret = 0;

	might_sleep();
	fnv_inject_take(FNV_OP_PUT_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	mutex_lock(&fnv_lock);
	t = fnv_table_lookup(page_table);
	if (!t) {
		fnv_violation("put_pages: %p is not a page table of ours (freed twice?)\n",
			      page_table);
		ret = -EINVAL;
	} else if (t->persistent) {
		fnv_violation("put_pages: va=0x%llx is a persistent pin (use put_pages_persistent)\n",
			      t->va);
		ret = -EINVAL;
	} else if (t->state != FNV_TABLE_LIVE) {
		/* Raced with (or called from) the free callback: allowed. */
		pr_info("put_pages: va=0x%llx was already freed by its free callback\n",
			t->va);
		ret = -EINVAL;
	} else if (t->va != virtual_address) {
		fnv_violation("put_pages: va=0x%llx does not match the table's va=0x%llx\n",
			      virtual_address, t->va);
		ret = -EINVAL;
	} else {
		fnv_table_put_locked(t, "put_pages");
	}
	mutex_unlock(&fnv_lock);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_put_pages);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	struct fnv_fault_req fault;
	struct fnv_table *t;
	int ret = 0;

	might_sleep();
	fnv_inject_take(FNV_OP_FREE_PAGE_TABLE, &fault);
	mutex_lock(&fnv_lock);
	t = fnv_table_lookup(page_table);
	if (!t) {
		fnv_violation("free_page_table: %p is not a page table of ours (freed twice?)\n",
			      page_table);
		ret = -EINVAL;
	} else if (t->state == FNV_TABLE_LIVE) {
		fnv_violation("free_page_table: va=0x%llx is still pinned (use put_pages)\n",
			      t->va);
		ret = -EINVAL;
	} else {
		t->client_freed = true;
		fnv_stats.dead_tables--;
		fnv_table_maybe_destroy(t);
	}
	mutex_unlock(&fnv_lock);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_free_page_table);

/* ---- DMA mappings ---- */

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	struct fnv_fault_req fault;
	struct fnv_mapping *fm;
	struct fnv_table *t;
	struct fnv_gpu *gpu;
	unsigned long i;
	int ret = 0;

	might_sleep();
	fnv_inject_take(FNV_OP_DMA_MAP_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	if (!peer || !dma_mapping) {
		pr_err("dma_map_pages: NULL peer or dma_mapping pointer\n");
		return -EINVAL;
	}

	mutex_lock(&fnv_lock);
	t = fnv_table_lookup(page_table);
	if (!t) {
		fnv_violation("dma_map_pages: %p is not a page table of ours\n",
			      page_table);
		ret = -EINVAL;
		goto unlock;
	}
	if (t->state != FNV_TABLE_LIVE) {
		pr_info("dma_map_pages: va=0x%llx was freed by its free callback\n",
			t->va);
		ret = -EINVAL;
		goto unlock;
	}

	fm = kzalloc(sizeof(*fm), GFP_KERNEL);
	if (!fm) {
		ret = -ENOMEM;
		goto unlock;
	}
	fm->npages = t->npages;
	fm->dma = kvcalloc(fm->npages, sizeof(*fm->dma), GFP_KERNEL);
	if (!fm->dma) {
		ret = -ENOMEM;
		goto err_free_mapping;
	}

	gpu = t->buf->gpu;
	for (i = 0; i < fm->npages; i++) {
		phys_addr_t phys = fnv_gpu_page_phys(gpu,
						     t->buf->pages[t->first + i]);
		dma_addr_t addr = dma_map_resource(&peer->dev, phys,
						   FNV_PAGE_SIZE,
						   DMA_BIDIRECTIONAL, 0);

		if (dma_mapping_error(&peer->dev, addr)) {
			pr_err("dma_map_pages: cannot map %pa for %s\n",
			       &phys, pci_name(peer));
			ret = -EIO;
			goto err_unmap;
		}
		fm->dma[i] = addr;
	}

	fm->peer = pci_dev_get(peer);
	fm->table = t;
	fm->mapped = true;
	fm->m.version = fault.kind == FNV_FAULT_VERSION ?
			FNV_BAD_MAPPING_VERSION : NVIDIA_P2P_DMA_MAPPING_VERSION;
	fm->m.page_size_type = t->pt.page_size;
	fm->m.entries = fm->npages;
	fm->m.dma_addresses = fm->dma;
	fm->m.private = fm;
	fm->m.pci_dev = peer;
	list_add_tail(&fm->node, &fnv_mappings);
	list_add_tail(&fm->table_node, &t->mappings);
	fnv_stats.mappings++;
	*dma_mapping = &fm->m;
	mutex_unlock(&fnv_lock);
	return 0;

err_unmap:
	while (i--)
		dma_unmap_resource(&peer->dev, fm->dma[i], FNV_PAGE_SIZE,
				   DMA_BIDIRECTIONAL, 0);
	kvfree(fm->dma);
err_free_mapping:
	kfree(fm);
unlock:
	mutex_unlock(&fnv_lock);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct fnv_fault_req fault;
	struct fnv_mapping *fm;
	struct fnv_table *t;
	int ret = 0;

	might_sleep();
	fnv_inject_take(FNV_OP_DMA_UNMAP_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	mutex_lock(&fnv_lock);
	fm = fnv_mapping_lookup(dma_mapping);
	if (!fm) {
		fnv_violation("dma_unmap_pages: %p is not a DMA mapping of ours (freed twice?)\n",
			      dma_mapping);
		ret = -EINVAL;
		goto unlock;
	}
	t = fm->table;
	if (&t->pt != page_table || t->client_freed) {
		fnv_violation("dma_unmap_pages: mapping of va=0x%llx passed with %s page table %p\n",
			      t->va, t->client_freed ? "the freed" : "another",
			      page_table);
		ret = -EINVAL;
		goto unlock;
	}
	if (peer != fm->peer) {
		fnv_violation("dma_unmap_pages: mapping of va=0x%llx was made for %s, not %s\n",
			      t->va, pci_name(fm->peer),
			      peer ? pci_name(peer) : "NULL");
		ret = -EINVAL;
		goto unlock;
	}
	/* Also fine after the free callback: then it only frees the object. */
	fnv_mapping_destroy(fm);
	fnv_table_maybe_destroy(t);
unlock:
	mutex_unlock(&fnv_lock);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	struct fnv_mapping *fm;
	struct fnv_table *t;
	int ret = 0;

	might_sleep();
	mutex_lock(&fnv_lock);
	fm = fnv_mapping_lookup(dma_mapping);
	if (!fm) {
		fnv_violation("free_dma_mapping: %p is not a DMA mapping of ours (freed twice?)\n",
			      dma_mapping);
		ret = -EINVAL;
		goto unlock;
	}
	t = fm->table;
	if (t->state == FNV_TABLE_LIVE) {
		fnv_violation("free_dma_mapping: va=0x%llx is still pinned (use dma_unmap_pages)\n",
			      t->va);
		ret = -EINVAL;
		goto unlock;
	}
	fnv_mapping_destroy(fm);
	fnv_table_maybe_destroy(t);
unlock:
	mutex_unlock(&fnv_lock);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_free_dma_mapping);
