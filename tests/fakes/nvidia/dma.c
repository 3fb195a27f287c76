// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: nvidia_p2p_dma_map_pages, nvidia_p2p_dma_unmap_pages
 * and nvidia_p2p_free_dma_mapping.
 *
 * Sources (NVIDIA/open-gpu-kernel-modules, 515.43.04 to 595.45.04):
 *  - kernel-open/nvidia/nv-p2p.c nvidia_p2p_dma_map_pages: -EINVAL for a
 *    NULL peer, table or mapping pointer; reads the table (gpu_uuid,
 *    entries, page_size, pages[]) and only then calls rm_p2p_dma_map_pages,
 *    which takes the API lock (src/nvidia/arch/nvalloc/unix/src/osapi.c);
 *    after it returns it links the mapping into the table's list. So a call
 *    that waited for the API lock while the free path freed the table
 *    writes into freed memory: a hazard of the real driver.
 *  - nvidia_p2p_dma_unmap_pages: -EINVAL for NULL arguments; takes only the
 *    table's mapping semaphore (never the API lock, so it works inside a
 *    free callback); a mapping not on the table's list returns 0 untouched;
 *    WARN_ON(peer != dma_mapping->pci_dev).
 *  - nvidia_p2p_free_dma_mapping: a no-op (515+). r470: the client frees the
 *    mapping in its free callback (Mellanox/nv_peer_memory nv_peer_mem.c).
 * The fake maps every 64 KiB page with dma_map_resource() for the peer, so
 * under an IOMMU the peer sees IOVAs.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/dma-mapping.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>

#include "fake_nvidia.h"

#define FNV_BAD_MAPPING_VERSION	0x00030000u

/* Map @t for @peer; fnv_lock and the API lock held. */
static int fnv_dma_map_locked(struct pci_dev *peer, struct fnv_table *t,
			      const struct fnv_fault_req *fault,
			      struct nvidia_p2p_dma_mapping **dma_mapping)
{
	struct fnv_gpu *gpu = t->buf->gpu;
	struct fnv_mapping *fm;
	unsigned long i;
	int ret;

	/* __GFP_ACCOUNT: apart from the module's objects (see table.c). */
	fm = kzalloc(sizeof(*fm), GFP_KERNEL_ACCOUNT);
	if (!fm)
		return -ENOMEM;
	fm->npages = t->npages;
	fm->dma = kvcalloc(fm->npages, sizeof(*fm->dma), GFP_KERNEL_ACCOUNT);
	if (!fm->dma) {
		ret = -ENOMEM;
		goto err_free_mapping;
	}

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
	fm->m.version = fault->kind == FNV_FAULT_VERSION ?
			FNV_BAD_MAPPING_VERSION : NVIDIA_P2P_DMA_MAPPING_VERSION;
	fm->m.page_size_type = t->pt.page_size;
	fm->m.entries = fm->npages;
	if (fault->kind == FNV_FAULT_ENTRIES)
		fm->m.entries--;	/* the fake itself keeps using npages */
	fm->m.dma_addresses = fm->dma;
	fm->m.private = fm;
	fm->m.pci_dev = peer;
	fnv_mapping_add(fm, t);
	fnv_stats.mappings++;
	*dma_mapping = &fm->m;
	return 0;

err_unmap:
	while (i--)
		dma_unmap_resource(&peer->dev, fm->dma[i], FNV_PAGE_SIZE,
				   DMA_BIDIRECTIONAL, 0);
	kvfree(fm->dma);
err_free_mapping:
	kfree(fm);
	return ret;
}

/*
 * The table is one of ours and still pinned; fnv_lock held. Before the API
 * lock a table in its free callback still counts (the real driver reads it
 * fine, then waits for the lock held by the free path).
 */
static int fnv_dma_check_table(struct nvidia_p2p_page_table *pt, u64 since,
			       bool locked, struct fnv_table **tp)
{
	int ret;

	ret = fnv_table_check("dma_map_pages", pt, since, tp);
	if (ret)
		return ret;
	if ((*tp)->state == FNV_TABLE_DEAD ||
	    (locked && (*tp)->state != FNV_TABLE_LIVE)) {
		/* r470 only: the table waits for the client to free it. */
		pr_info("dma_map_pages: va=0x%llx was freed by its free callback\n",
			(*tp)->va);
		return -EINVAL;
	}
	return 0;
}

static int fnv_dma_map_pages_call(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	u64 since = fnv_seq_now();
	struct fnv_fault_req fault;
	struct fnv_table *t;
	u64 va, pages;
	int ret;

	might_sleep();
	fnv_inject_take(FNV_OP_DMA_MAP_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	if (!peer || !page_table || !dma_mapping) {
		pr_info("dma_map_pages: NULL peer, page table or dma_mapping pointer\n");
		return -EINVAL;
	}

	/* The real driver reads the table before it takes the API lock. */
	mutex_lock(&fnv_lock);
	ret = fnv_dma_check_table(page_table, since, false, &t);
	va = ret ? 0 : t->va;
	mutex_unlock(&fnv_lock);
	if (ret)
		return ret;
	*dma_mapping = NULL;

	ret = fnv_api_lock("dma_map_pages", "dma_map_pages va=0x%llx for %s",
			   va, pci_name(peer));
	if (ret)
		return ret;
	fnv_inject_stall_locked(FNV_OP_DMA_MAP_PAGES, &fault);

	mutex_lock(&fnv_lock);
	ret = fnv_dma_check_table(page_table, since, true, &t);
	if (!ret)
		ret = fnv_dma_map_locked(peer, t, &fault, dma_mapping);
	pages = ret ? 0 : t->npages;
	mutex_unlock(&fnv_lock);
	fnv_cost_charge(FNV_CALL_MAP, pages);
	fnv_api_unlock();
	return ret;
}

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_dma_map_pages_call(peer, page_table, dma_mapping);

	fnv_table_returned(page_table);
	fnv_call_end(FNV_CALL_MAP, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_dma_map_pages);

static int fnv_dma_unmap_pages_call(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	u64 since = fnv_seq_now();
	struct fnv_fault_req fault;
	struct fnv_mapping *fm;
	struct fnv_table *t;
	u64 pages = 0;
	int ret;

	might_sleep();
	fnv_inject_take(FNV_OP_DMA_UNMAP_PAGES, &fault);
	if (fault.kind == FNV_FAULT_ERRNO)
		return fault.err;

	if (!peer || !page_table || !dma_mapping) {
		pr_info("dma_unmap_pages: NULL peer, page table or dma_mapping pointer\n");
		return -EINVAL;
	}

	/* Only the table's mapping lock: works inside a free callback. */
	mutex_lock(&fnv_lock);
	ret = fnv_table_check("dma_unmap_pages", page_table, since, &t);
	if (ret)
		goto unlock;

	fm = fnv_mapping_lookup(dma_mapping);
	if (!fm || fm->table != t) {
		pr_info("dma_unmap_pages: %p is not on the mapping list of the table of va=0x%llx (already unmapped?): returns 0\n",
			dma_mapping, t->va);
		goto unlock;
	}
	if (peer != fm->peer)
		fnv_violation("dma_unmap_pages: mapping of va=0x%llx was made for %s, not %s (the real driver WARNs)\n",
			      t->va, pci_name(fm->peer), pci_name(peer));
	/* r470 after the callback: the mapping is dead, only the object goes. */
	pages = fm->npages;
	fnv_mapping_destroy(fm);
unlock:
	mutex_unlock(&fnv_lock);
	fnv_cost_charge(FNV_CALL_UNMAP, pages);
	return ret;
}

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_dma_unmap_pages_call(peer, page_table, dma_mapping);

	fnv_call_end(FNV_CALL_UNMAP, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_dma_unmap_pages);

static int fnv_free_dma_mapping_call(struct nvidia_p2p_dma_mapping *dma_mapping)
{
#if FNV_DRIVER_FREES
	/* nv-p2p.c 515+: a no-op; must not touch the (maybe freed) mapping. */
	return 0;
#else
	struct fnv_mapping *fm;
	int ret = 0;

	might_sleep();
	mutex_lock(&fnv_lock);
	fm = fnv_mapping_lookup(dma_mapping);
	if (!fm) {
		fnv_violation("free_dma_mapping: %p is not a DMA mapping of ours (freed twice?)\n",
			      dma_mapping);
		ret = -EINVAL;
	} else if (fm->table->state == FNV_TABLE_LIVE) {
		fnv_violation("free_dma_mapping: va=0x%llx is still pinned (use dma_unmap_pages)\n",
			      fm->table->va);
		ret = -EINVAL;
	} else {
		fnv_mapping_destroy(fm);
	}
	mutex_unlock(&fnv_lock);
	return ret;
#endif
}

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	u64 t0 = fnv_call_begin();
	int ret = fnv_free_dma_mapping_call(dma_mapping);

	fnv_call_end(FNV_CALL_FREE, t0);
	return ret;
}
EXPORT_SYMBOL(nvidia_p2p_free_dma_mapping);
