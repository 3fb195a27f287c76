// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: what the core does with the client's sg list.
 *  - fake_sg_check(): fake-only checks of what dma_map() produced (the real
 *    core checks nothing; a broken list would make the real NIC DMA garbage).
 *  - fake_sg_fix()/fake_sg_restore(): 24.07 peer_mem.c fix_peer_sgls() and
 *    the restore at the top of ib_unmap_peer_client(), same order.
 *  - fake_sg_segs(): the NIC's view, read from the live list.
 */
#include "fake_ib_core.h"

#include <linux/align.h>
#include <linux/iommu.h>
#include <linux/log2.h>
#include <linux/pci.h>
#include <linux/slab.h>

#define FAKE_IVSHMEM_VENDOR 0x1af4
#define FAKE_IVSHMEM_DEVICE 0x1110
#define FAKE_IVSHMEM_GPU_BAR 2
#define FAKE_MAX_GPUS 16

struct fake_bar_set {
	int n;
	struct {
		resource_size_t start, end;
	} bar[FAKE_MAX_GPUS];
};

static void fake_collect_gpu_bars(struct fake_bar_set *set)
{
	struct pci_dev *pdev = NULL;

	set->n = 0;
	while ((pdev = pci_get_device(FAKE_IVSHMEM_VENDOR, FAKE_IVSHMEM_DEVICE, pdev))) {
		struct resource *res = &pdev->resource[FAKE_IVSHMEM_GPU_BAR];

		if (set->n >= FAKE_MAX_GPUS) {
			pci_dev_put(pdev);
			break;
		}
		if (!(res->flags & IORESOURCE_MEM) || !res->start)
			continue;
		set->bar[set->n].start = res->start;
		set->bar[set->n].end = res->end;
		set->n++;
	}
}

static bool fake_in_gpu_bar(const struct fake_bar_set *set, phys_addr_t phys)
{
	int i;

	for (i = 0; i < set->n; i++)
		if (phys >= set->bar[i].start &&
		    phys + PAGE_SIZE - 1 <= set->bar[i].end)
			return true;
	return false;
}

/* 5.x trimming amounts (24.07 fix_peer_sgls()). */
static u64 fake_head_trim(const struct fake_mr *mr)
{
	return ALIGN_DOWN(mr->addr, PAGE_SIZE) - ALIGN_DOWN(mr->addr, mr->page_size);
}

static u64 fake_tail_trim(const struct fake_mr *mr)
{
	return ALIGN(mr->addr + mr->len, mr->page_size) -
	       ALIGN(mr->addr + mr->len, PAGE_SIZE);
}

/* 4.9: an invalidate came before activation (it marks the MR; activation fails it). */
static bool fake_v4_invalidated_early(struct fake_mr *mr)
{
	bool marked;

	if (!fake_v4())
		return false;
	fake_xlock_lock_reporting(&mr->client->v4_lock, "registration (sg check)");
	marked = mr->peer_invalidated;
	fake_xlock_unlock(&mr->client->v4_lock);
	return marked;
}

/*
 * Check the list right after dma_map()/get_page_size(), before any
 * trimming.  @nents: the client's *nmap.  Returns 0 or -EINVAL after a
 * FAKE-VIOLATION line; the registration then fails where the real NIC
 * driver would have failed building its translation table.
 */
int fake_sg_check(struct fake_mr *mr, int nents)
{
	struct fake_bar_set *bars;
	struct iommu_domain *domain = NULL;
	struct scatterlist *sg;
	unsigned long ps = mr->page_size;
	u64 start, end, total = 0, first_len = 0, last_len = 0;
	int i, ret = -EINVAL;

	if (!ps || !is_power_of_2(ps) || ps < PAGE_SIZE) {
		fake_violation("reg %lu: client %s: get_page_size() returned 0x%lx (not a power of two >= PAGE_SIZE)",
			       mr->id, mr->client->name, ps);
		return -EINVAL;
	}
	if (!mr->sgt.sgl || nents <= 0 ||
	    (!fake_v4() && nents > (int)mr->sgt.orig_nents)) {
		fake_violation("reg %lu: client %s: dma_map() left nmap=%d, sg_table orig_nents=%u%s",
			       mr->id, mr->client->name, nents, mr->sgt.orig_nents,
			       mr->sgt.sgl ? "" : " and no sg list");
		return -EINVAL;
	}

	bars = kzalloc(sizeof(*bars), GFP_KERNEL);
	if (!bars)
		return -ENOMEM;
	fake_collect_gpu_bars(bars);
	if (mr->nic)
		domain = iommu_get_domain_for_dev(mr->dma_dev);
	if (domain && domain->type == IOMMU_DOMAIN_IDENTITY)
		domain = NULL;

	start = ALIGN_DOWN(mr->addr, ps);
	end = ALIGN(mr->addr + mr->len, ps);

	/* Any multiple of PAGE_SIZE per entry, in any mixture (24.07 peer_mem.h). */
	for_each_sg(mr->sgt.sgl, sg, nents, i) {
		dma_addr_t dma = sg_dma_address(sg);
		u64 len = sg_dma_len(sg), off;

		if (!len || !IS_ALIGNED(dma, PAGE_SIZE) || !IS_ALIGNED(len, PAGE_SIZE)) {
			fake_violation("reg %lu: client %s: sg entry %d (dma %pad len 0x%llx) does not start and end PAGE_SIZE-aligned",
				       mr->id, mr->client->name, i, &dma, len);
			goto out;
		}
		for (off = 0; off < len; off += PAGE_SIZE) {
			dma_addr_t iova = dma + off;
			phys_addr_t phys = domain ? iommu_iova_to_phys(domain, iova) : iova;

			if (!phys && fake_v4_invalidated_early(mr)) {
				/*
				 * 4.9 holds no lock here: the client was told to
				 * invalidate before activation and unmapped, as
				 * it must; the real core reads nothing and fails
				 * the MR at activation. Not the client's fault.
				 */
				pr_info("reg %lu: client %s: sg entry %d unmapped by an invalidation before activation\n",
					mr->id, mr->client->name, i);
				goto out;
			}
			if (!phys || !fake_in_gpu_bar(bars, phys)) {
				fake_violation("reg %lu: client %s: sg entry %d: dma %pad (phys %pa) is not in BAR %d of an ivshmem device",
					       mr->id, mr->client->name, i, &iova,
					       &phys, FAKE_IVSHMEM_GPU_BAR);
				goto out;
			}
		}
		if (i == 0)
			first_len = len;
		last_len = len;
		total += len;
	}

	if (total != end - start) {
		fake_violation("reg %lu: client %s: sg entries cover 0x%llx bytes (%llu pages), [0x%llx, 0x%llx) at page size 0x%lx needs 0x%llx",
			       mr->id, mr->client->name, total, total >> PAGE_SHIFT,
			       mr->addr, mr->addr + mr->len, ps, end - start);
		goto out;
	}

	if (!fake_v4() && ps != PAGE_SIZE) {
		/* fix_peer_sgls() shortens entry 0 and entry nents-1 only. */
		u64 head = fake_head_trim(mr), tail = fake_tail_trim(mr);

		if ((nents == 1 && first_len <= head + tail) ||
		    (nents > 1 && (first_len <= head || last_len <= tail))) {
			fake_violation("reg %lu: client %s: first/last sg entries (0x%llx/0x%llx bytes) are shorter than the trim to the user range (0x%llx/0x%llx)",
				       mr->id, mr->client->name, first_len, last_len,
				       head, tail);
			goto out;
		}
	}
	mr->sg_bytes = total;
	ret = 0;
out:
	kfree(bars);
	return ret;
}

/*
 * 24.07 fix_peer_sgls(): walks the table like for_each_sgtable_sg()
 * (orig_nents); entry 0 loses the head (address, dma length, length),
 * entry nents-1 the tail (dma length, length).  When both are the same
 * entry the tail values are saved after the head was cut, as the source
 * does; the restore order (last, then first) undoes that exactly.
 */
void fake_sg_fix(struct fake_mr *mr)
{
	struct scatterlist *sg;
	int i;

	for_each_sg(mr->sgt.sgl, sg, mr->sgt.orig_nents, i) {
		if (i == 0) {
			u64 offset = fake_head_trim(mr);

			mr->first_sg = sg;
			mr->first_dma_address = sg_dma_address(sg);
			mr->first_dma_length = sg_dma_len(sg);
			mr->first_length = sg->length;
			sg_dma_address(sg) += offset;
			sg_dma_len(sg) -= offset;
			sg->length -= offset;
		}
		if (i == mr->sgt.nents - 1) {
			u64 trim = fake_tail_trim(mr);

			mr->last_sg = sg;
			mr->last_dma_length = sg_dma_len(sg);
			mr->last_length = sg->length;
			sg_dma_len(sg) -= trim;
			sg->length -= trim;
			break; /* fake: later entries are untouched anyway */
		}
	}
}

void fake_sg_restore(struct fake_mr *mr)
{
	if (mr->last_sg) {
		mr->last_sg->length = mr->last_length;
		sg_dma_len(mr->last_sg) = mr->last_dma_length;
	}
	if (mr->first_sg) {
		sg_dma_address(mr->first_sg) = mr->first_dma_address;
		mr->first_sg->length = mr->first_length;
		sg_dma_len(mr->first_sg) = mr->first_dma_length;
	}
}

/*
 * The page size mlx5 would build its translation table with: upstream
 * ib_umem_find_best_pgsz() (drivers/infiniband/core/umem.c) over the list
 * the NIC sees, with mlx5's MR page sizes (4 KiB and every larger power of
 * two).  Every entry boundary whose DMA address and virtual address differ
 * in low bits caps it, so one entry per 64 KiB page means 64 KiB at most.
 */
unsigned long fake_sg_best_pgsz(struct fake_mr *mr)
{
	unsigned long bitmap = GENMASK(BITS_PER_LONG - 2, PAGE_SHIFT);
	int n = fake_v4() ? mr->nmap : (int)mr->sgt.nents;
	u64 virt = mr->addr, va, len = mr->len, mask;
	u64 pgoff = mr->addr & ~PAGE_MASK;
	struct scatterlist *sg;
	int i;

	if (fake_v4()) {
		/* 4.9's umem starts at the peer page, untrimmed. */
		virt = ALIGN_DOWN(mr->addr, mr->page_size);
		len = ALIGN(mr->addr + mr->len, mr->page_size) - virt;
		pgoff = 0;
	}
	if (!mr->sgt.sgl || n <= 0 || !len)
		return 0;
	va = virt;
	mask = bitmap & GENMASK_ULL(63, fls64((len - 1 + virt) ^ virt));
	for_each_sg(mr->sgt.sgl, sg, n, i) {
		mask |= (sg_dma_address(sg) + pgoff) ^ va;
		va += sg_dma_len(sg) - pgoff;
		if (i != n - 1)
			mask |= va;
		pgoff = 0;
	}
	if (mask)
		bitmap &= GENMASK(__ffs64(mask), 0);
	return bitmap ? rounddown_pow_of_two(bitmap) : 0;
}

/*
 * The NIC's view: the DMA entries as the core holds them now (5.x: trimmed,
 * so byte 0 of entry 0 is the user address rounded down to PAGE_SIZE; 4.9:
 * untrimmed, rounded down to the peer page size).  Caller holds mr->dma_lock
 * and has checked that the registration is live.
 */
int fake_sg_segs(struct fake_mr *mr, struct fake_seg **segsp, u64 *base)
{
	int n = fake_v4() ? mr->nmap : (int)mr->sgt.nents;
	struct fake_seg *segs;
	struct scatterlist *sg;
	int i;

	if (!mr->sgt.sgl || n <= 0)
		return -EIO;
	segs = kcalloc(n, sizeof(*segs), GFP_KERNEL);
	if (!segs)
		return -ENOMEM;
	for_each_sg(mr->sgt.sgl, sg, n, i) {
		segs[i].dma = sg_dma_address(sg);
		segs[i].len = sg_dma_len(sg);
	}
	*segsp = segs;
	*base = ALIGN_DOWN(mr->addr, fake_v4() ? mr->page_size : PAGE_SIZE);
	return n;
}
