// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: the life of one peer-memory registration ("MR"):
 * acquire -> get_pages -> dma_map -> get_page_size -> checks -> trimming,
 * invalidation, and teardown, in the order MLNX_OFED 5.x (or 4.x) uses.
 */
#include "fake_ib_core.h"

#include <linux/align.h>
#include <linux/device.h>
#include <linux/iommu.h>
#include <linux/log2.h>
#include <linux/minmax.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>

#define FAKE_IVSHMEM_VENDOR 0x1af4
#define FAKE_IVSHMEM_DEVICE 0x1110
#define FAKE_IVSHMEM_GPU_BAR 2
#define FAKE_MAX_GPUS 16

/* id -> struct fake_mr; a reserved (NULL-looking) entry while registering. */
static DEFINE_XARRAY(fake_mrs);

/*
 * debugfs "stats": regs = live registrations; invalidations = invalidate
 * calls that revoked a mapped registration; unmaps_in_invalidate = those in
 * which the core itself called dma_unmap + put_pages (legacy client, or the
 * 4.x core).  memory_peers counters: num_alloc_mrs on a successful reg,
 * num_dealloc_mrs on release, num_reg/dereg_pages in PAGE_SIZE pages of the
 * user range and num_reg/dereg_bytes its length, counted as "dereg" when the
 * mapping goes away (invalidate or dereg); num_free_callbacks counts every
 * invalidate call, known core_context or not (peer_client.c).
 */
atomic_t fake_stat_regs = ATOMIC_INIT(0);
atomic_t fake_stat_invalidations = ATOMIC_INIT(0);
atomic_t fake_stat_unmaps_in_invalidate = ATOMIC_INIT(0);

static void fake_mr_free(struct kref *ref)
{
	struct fake_mr *mr = container_of(ref, struct fake_mr, ref);

	if (mr->nic)
		fake_nic_put(mr->nic);
	if (mr->client)
		fake_client_put(mr->client);
	mutex_destroy(&mr->map_lock);
	kfree(mr->segs);
	kfree(mr->sgt);
	kfree(mr);
}

void fake_mr_put(struct fake_mr *mr)
{
	kref_put(&mr->ref, fake_mr_free);
}

static struct fake_mr *fake_mr_lookup(unsigned long id)
{
	struct fake_mr *mr;

	xa_lock(&fake_mrs);
	mr = xa_load(&fake_mrs, id);
	if (mr)
		kref_get(&mr->ref);
	xa_unlock(&fake_mrs);
	return mr;
}

static u64 fake_mr_user_pages(const struct fake_mr *mr)
{
	return (ALIGN(mr->addr + mr->len, PAGE_SIZE) -
		ALIGN_DOWN(mr->addr, PAGE_SIZE)) >> PAGE_SHIFT;
}

/*
 * map_lock is held across client calls; remembering the holder lets an
 * invalidate re-entered from inside one of those calls on the same thread
 * be reported instead of deadlocking (as it would in MLNX_OFED).
 */
static void fake_mr_lock(struct fake_mr *mr)
{
	mutex_lock(&mr->map_lock);
	WRITE_ONCE(mr->lock_owner, current);
}

static void fake_mr_unlock(struct fake_mr *mr)
{
	WRITE_ONCE(mr->lock_owner, NULL);
	mutex_unlock(&mr->map_lock);
}

/* ---- first/last sg entry trimming (peer page size != PAGE_SIZE) ---- */

static u64 fake_mr_head_trim(const struct fake_mr *mr)
{
	return ALIGN_DOWN(mr->addr, PAGE_SIZE) - ALIGN_DOWN(mr->addr, mr->page_size);
}

static u64 fake_mr_tail_trim(const struct fake_mr *mr)
{
	return ALIGN(mr->addr + mr->len, mr->page_size) -
	       ALIGN(mr->addr + mr->len, PAGE_SIZE);
}

static void fake_mr_trim(struct fake_mr *mr)
{
	struct scatterlist *sg, *first = NULL, *last = NULL;
	u64 head = fake_mr_head_trim(mr), tail = fake_mr_tail_trim(mr);
	int i;

	for_each_sg(mr->sgt->sgl, sg, mr->nmap, i) {
		if (i == 0)
			first = sg;
		last = sg;
	}

	/* Save both originals before touching either (they may coincide). */
	mr->first_sg = first;
	mr->first_dma = sg_dma_address(first);
	mr->first_dma_len = sg_dma_len(first);
	mr->first_len = first->length;
	mr->last_sg = last;
	mr->last_dma = sg_dma_address(last);
	mr->last_dma_len = sg_dma_len(last);
	mr->last_len = last->length;

	sg_dma_address(first) += head;
	sg_dma_len(first) -= head;
	if (first->length >= head)
		first->length -= head;
	sg_dma_len(last) -= tail;
	if (last->length >= tail)
		last->length -= tail;
	mr->trimmed = true;
}

static void fake_mr_untrim(struct fake_mr *mr)
{
	if (!mr->trimmed)
		return;
	sg_dma_address(mr->last_sg) = mr->last_dma;
	sg_dma_len(mr->last_sg) = mr->last_dma_len;
	mr->last_sg->length = mr->last_len;
	sg_dma_address(mr->first_sg) = mr->first_dma;
	sg_dma_len(mr->first_sg) = mr->first_dma_len;
	mr->first_sg->length = mr->first_len;
	mr->trimmed = false;
}

/* ---- checks on what the client produced ---- */

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

/*
 * Validate the mapping ("Client checks" in INTERFACE.md) and record the
 * untrimmed DMA view for the NIC.  Returns -EINVAL after logging a
 * FAKE-VIOLATION line.
 */
static int fake_mr_check(struct fake_mr *mr)
{
	struct fake_bar_set *bars;
	struct iommu_domain *domain = NULL;
	struct scatterlist *sg;
	unsigned long ps = mr->page_size;
	u64 start, end, total = 0;
	int i, ret = -EINVAL;

	if (!ps || !is_power_of_2(ps) || ps < PAGE_SIZE) {
		fake_violation("reg %lu: client %s: get_page_size() returned 0x%lx",
			       mr->id, mr->client->name, ps);
		return -EINVAL;
	}
	if (!mr->sgt->sgl || mr->nmap <= 0 || mr->nmap > mr->sgt->nents) {
		fake_violation("reg %lu: client %s: dma_map() left nmap=%d with sg_table nents=%u%s",
			       mr->id, mr->client->name, mr->nmap, mr->sgt->nents,
			       mr->sgt->sgl ? "" : " and no sg list");
		return -EINVAL;
	}

	bars = kzalloc(sizeof(*bars), GFP_KERNEL);
	mr->segs = kcalloc(mr->nmap, sizeof(*mr->segs), GFP_KERNEL);
	if (!bars || !mr->segs) {
		pr_err("reg %lu: out of memory\n", mr->id);
		ret = -ENOMEM;
		goto out;
	}
	fake_collect_gpu_bars(bars);
	if (mr->nic)
		domain = iommu_get_domain_for_dev(mr->dma_dev);
	if (domain && domain->type == IOMMU_DOMAIN_IDENTITY)
		domain = NULL;

	start = ALIGN_DOWN(mr->addr, ps);
	end = ALIGN(mr->addr + mr->len, ps);

	for_each_sg(mr->sgt->sgl, sg, mr->nmap, i) {
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

			if (!phys || !fake_in_gpu_bar(bars, phys)) {
				fake_violation("reg %lu: client %s: sg entry %d: dma %pad (phys %pa) is not in BAR %d of an ivshmem device",
					       mr->id, mr->client->name, i, &iova,
					       &phys, FAKE_IVSHMEM_GPU_BAR);
				goto out;
			}
		}
		mr->segs[i].dma = dma;
		mr->segs[i].len = len;
		total += len;
	}
	mr->nsegs = mr->nmap;

	if (total != end - start) {
		fake_violation("reg %lu: client %s: sg entries cover 0x%llx bytes (%llu pages), [0x%llx, 0x%llx) at page size 0x%lx needs 0x%llx",
			       mr->id, mr->client->name, total, total >> PAGE_SHIFT,
			       mr->addr, mr->addr + mr->len, ps, end - start);
		goto out;
	}

	if (ps != PAGE_SIZE) {
		/* The core trims entries assuming page_size granularity. */
		u64 head = fake_mr_head_trim(mr), tail = fake_mr_tail_trim(mr);
		u64 first_len = mr->segs[0].len, last_len = mr->segs[mr->nmap - 1].len;

		if ((mr->nmap == 1 && first_len <= head + tail) ||
		    (mr->nmap > 1 && (first_len <= head || last_len <= tail))) {
			fake_violation("reg %lu: client %s: first/last sg entries (0x%llx/0x%llx bytes) are shorter than the trim to the user range (0x%llx/0x%llx)",
				       mr->id, mr->client->name, first_len, last_len,
				       head, tail);
			goto out;
		}
	}
	ret = 0;
out:
	kfree(bars);
	if (ret) {
		kfree(mr->segs);
		mr->segs = NULL;
		mr->nsegs = 0;
	}
	return ret;
}

/* ---- client calls that undo a mapping (map_lock held) ---- */

static void fake_mr_unmap_calls(struct fake_mr *mr)
{
	const struct peer_memory_client *ops = mr->client->ops;

	lockdep_assert_held(&mr->map_lock);
	fake_mr_untrim(mr);
	ops->dma_unmap(mr->sgt, mr->client_ctx, mr->dma_dev);
	ops->put_pages(mr->sgt, mr->client_ctx);
}

static void fake_mr_count_dereg(struct fake_mr *mr)
{
	atomic64_add(fake_mr_user_pages(mr), &mr->client->stats.num_dereg_pages);
	atomic64_add(mr->len, &mr->client->stats.num_dereg_bytes);
}

/* ---- registration ---- */

static struct fake_client *fake_mr_acquire(struct fake_mr *mr)
{
	struct fake_client *c, *winner = NULL;

	mutex_lock(&fake_clients_lock);
	list_for_each_entry(c, &fake_clients, node) {
		void *ctx = NULL;
		int ret;

		/* CQ/QP buffers only go to clients that never invalidate. */
		if (mr->cq && c->invalidating)
			continue;
		ret = c->ops->acquire(mr->addr, mr->len, NULL, NULL, &ctx);
		if (ret > 0) {
			kref_get(&c->ref);
			atomic_inc(&c->nr_mrs);
			mr->client_ctx = ctx;
			winner = c;
			break;
		}
	}
	mutex_unlock(&fake_clients_lock);
	return winner;
}

int fake_mr_reg(unsigned long id, const char *devname, u64 addr, u64 len,
		bool ro, bool cq)
{
	const struct peer_memory_client *ops;
	struct fake_client *c;
	struct fake_mr *mr;
	int ret;

	if (!len || addr + len < addr) {
		pr_err("reg %lu: bad range 0x%llx+0x%llx\n", id, addr, len);
		return -EINVAL;
	}

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return -ENOMEM;
	kref_init(&mr->ref);
	mutex_init(&mr->map_lock);
	mr->id = id;
	mr->addr = addr;
	mr->len = len;
	mr->ro = ro;
	mr->cq = cq;
	mr->state = FAKE_MR_REGISTERING;
	mr->core_context = U32_MAX;
	mr->sgt = kzalloc(sizeof(*mr->sgt), GFP_KERNEL);
	if (!mr->sgt) {
		fake_mr_put(mr);
		return -ENOMEM;
	}

	if (!strcmp(devname, "none")) {
		mr->dma_dev = fake_none_dev;
	} else {
		mr->nic = fake_nic_get(devname);
		if (!mr->nic) {
			pr_err("reg %lu: no NIC named %s\n", id, devname);
			fake_mr_put(mr);
			return -ENODEV;
		}
		mr->dma_dev = fake_nic_device(mr->nic);
	}

	/* Reserve the id: concurrent users of the id see nothing yet. */
	ret = xa_insert(&fake_mrs, id, NULL, GFP_KERNEL);
	if (ret) {
		pr_err("reg %lu: id in use (%d)\n", id, ret);
		fake_mr_put(mr);
		return ret == -EBUSY ? -EEXIST : ret;
	}

	c = fake_mr_acquire(mr);
	if (!c) {
		pr_err("reg %lu: no peer client claims [0x%llx, 0x%llx)%s\n",
		       id, addr, addr + len, cq ? " as a CQ buffer" : "");
		ret = -EFAULT;
		goto err_unreserve;
	}
	mr->client = c;
	ops = c->ops;

	/*
	 * Invalidations of this registration wait on map_lock until it is
	 * fully set up (the NIC driver has "activated the notifier").
	 */
	fake_mr_lock(mr);
	if (c->invalidating) {
		u32 cc;

		ret = xa_alloc_cyclic(&c->ctx_xa, &cc, mr, XA_LIMIT(0, U32_MAX - 1),
				      &c->next_ctx, GFP_KERNEL);
		if (ret < 0) {
			pr_err("reg %lu: no core_context id (%d)\n", id, ret);
			goto err_release;
		}
		mr->core_context = cc;
		mr->has_ctx_id = true;
	}

	ret = ops->get_pages(addr, len, 1, ro ? 1 : 0, NULL, mr->client_ctx,
			     mr->core_context);
	if (ret) {
		pr_err("reg %lu: client %s: get_pages failed (%d)\n", id, c->name, ret);
		if (ret > 0)
			ret = -EINVAL;
		goto err_release;
	}

	ret = ops->dma_map(mr->sgt, mr->client_ctx, mr->dma_dev, 0, &mr->nmap);
	if (ret) {
		pr_err("reg %lu: client %s: dma_map failed (%d)\n", id, c->name, ret);
		if (ret > 0)
			ret = -EINVAL;
		goto err_put_pages;
	}

	mr->page_size = ops->get_page_size ? ops->get_page_size(mr->client_ctx) : PAGE_SIZE;

	ret = fake_mr_check(mr);
	if (ret)
		goto err_unmap;
	if (mr->page_size != PAGE_SIZE)
		fake_mr_trim(mr);

	mr->state = FAKE_MR_MAPPED;
	atomic64_inc(&c->stats.num_alloc_mrs);
	atomic64_add(fake_mr_user_pages(mr), &c->stats.num_reg_pages);
	atomic64_add(len, &c->stats.num_reg_bytes);
	atomic_inc(&fake_stat_regs);
	fake_mr_unlock(mr);

	/* Publish: replacing the reserved entry needs no allocation. */
	xa_store(&fake_mrs, id, mr, GFP_KERNEL);
	pr_info("reg %lu: client %s core_context %llu page_size 0x%lx nmap %d\n",
		id, c->name, mr->core_context, mr->page_size, mr->nmap);
	return 0;

err_unmap:
	fake_mr_untrim(mr);
	ops->dma_unmap(mr->sgt, mr->client_ctx, mr->dma_dev);
err_put_pages:
	ops->put_pages(mr->sgt, mr->client_ctx);
err_release:
	mr->state = FAKE_MR_DEAD;
	fake_mr_unlock(mr);
	if (mr->has_ctx_id)
		xa_erase(&c->ctx_xa, mr->core_context);
	mr->has_ctx_id = false;
	if (ops->release)
		ops->release(mr->client_ctx);
	fake_client_mr_gone(c);
err_unreserve:
	xa_release(&fake_mrs, id);
	fake_mr_put(mr);
	return ret;
}

/* ---- invalidation (from the client, through peer_client.c) ---- */

void fake_mr_invalidate(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;

	if (READ_ONCE(mr->lock_owner) == current) {
		fake_violation("reg %lu: client %s calls invalidate(core_context=%llu) from inside its own callback for that registration (self-deadlock in MLNX_OFED)",
			       mr->id, c->name, mr->core_context);
		return;
	}

	fake_mr_lock(mr);
	if (mr->state != FAKE_MR_MAPPED) {
		fake_mr_unlock(mr);
		return;
	}

	/* Revoke the NIC's access first: read/write now fail with -EIO. */
	WRITE_ONCE(mr->invalidated, true);
	atomic_inc(&fake_stat_invalidations);

	if (fake_core_version == 4) {
		/* MLNX_OFED 4.x: everything, release included, happens here. */
		fake_mr_unmap_calls(mr);
		if (c->ops->release)
			c->ops->release(mr->client_ctx);
		atomic64_inc(&c->stats.num_dealloc_mrs);
		atomic_inc(&fake_stat_unmaps_in_invalidate);
		mr->state = FAKE_MR_RELEASED;
	} else if (fake_client_unmaps_itself(c)) {
		mr->state = FAKE_MR_INVALIDATED;
	} else {
		fake_mr_unmap_calls(mr);
		atomic_inc(&fake_stat_unmaps_in_invalidate);
		mr->state = FAKE_MR_INVALIDATED_UNMAPPED;
	}
	fake_mr_count_dereg(mr);
	fake_mr_unlock(mr);

	pr_info("reg %lu: invalidated by client %s (core_context %llu)\n",
		mr->id, c->name, mr->core_context);
}

/* ---- teardown ---- */

static void fake_mr_teardown(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;
	bool need_release = false;

	fake_mr_lock(mr);
	switch (mr->state) {
	case FAKE_MR_MAPPED:
		fake_mr_unmap_calls(mr);
		fake_mr_count_dereg(mr);
		need_release = true;
		break;
	case FAKE_MR_INVALIDATED:
	case FAKE_MR_INVALIDATED_UNMAPPED:
		need_release = true;
		break;
	default:
		break;
	}
	mr->state = FAKE_MR_DEAD;
	fake_mr_unlock(mr);

	if (mr->has_ctx_id)
		xa_erase(&c->ctx_xa, mr->core_context);
	if (need_release) {
		if (c->ops->release)
			c->ops->release(mr->client_ctx);
		atomic64_inc(&c->stats.num_dealloc_mrs);
	}
	atomic_dec(&fake_stat_regs);
	fake_client_mr_gone(c);
}

int fake_mr_dereg(unsigned long id)
{
	struct fake_mr *mr;

	xa_lock(&fake_mrs);
	mr = xa_load(&fake_mrs, id);
	if (mr)
		__xa_erase(&fake_mrs, id);
	xa_unlock(&fake_mrs);
	if (!mr) {
		pr_err("dereg %lu: no such registration\n", id);
		return -ENOENT;
	}

	fake_mr_teardown(mr);
	pr_info("dereg %lu: done\n", id);
	fake_mr_put(mr);
	return 0;
}

/* ---- NIC access ---- */

static int fake_mr_dma(unsigned long id, u64 off, u64 len, bool write)
{
	const char *what = write ? "write" : "read";
	struct fake_mr *mr;
	void *buf;
	int ret;

	if (!len || len > FAKE_DMA_BUF_SIZE) {
		pr_err("%s %lu: length %llu not in 1..%d\n", what, id, len,
		       FAKE_DMA_BUF_SIZE);
		return -EINVAL;
	}
	mr = fake_mr_lookup(id);
	if (!mr) {
		pr_err("%s %lu: no such registration\n", what, id);
		return -ENOENT;
	}
	if (off >= mr->len || len > mr->len - off) {
		pr_err("%s %lu: [0x%llx, +0x%llx) outside the registration (0x%llx bytes)\n",
		       what, id, off, len, mr->len);
		ret = -EINVAL;
		goto out_put;
	}
	if (!mr->nic) {
		pr_err("%s %lu: registered for device none, which cannot DMA\n",
		       what, id);
		ret = -ENODEV;
		goto out_put;
	}

	buf = kmalloc(len, GFP_KERNEL);
	if (!buf) {
		ret = -ENOMEM;
		goto out_put;
	}
	if (write)
		fake_dma_buf_load(buf, len);

	fake_mr_lock(mr);
	if (mr->state != FAKE_MR_MAPPED) {
		pr_err("%s %lu: registration is invalidated or gone\n", what, id);
		ret = -EIO;
	} else {
		u64 voff = mr->addr - ALIGN_DOWN(mr->addr, mr->page_size) + off;

		if (write)
			ret = fake_nic_write(mr->nic, mr->segs, mr->nsegs, voff, buf, len);
		else
			ret = fake_nic_read(mr->nic, mr->segs, mr->nsegs, voff, buf, len);
		if (ret)
			pr_err("%s %lu: NIC DMA failed (%d)\n", what, id, ret);
	}
	fake_mr_unlock(mr);

	if (!ret && !write)
		fake_dma_buf_store(buf, len);
	kfree(buf);
out_put:
	fake_mr_put(mr);
	return ret;
}

int fake_mr_read(unsigned long id, u64 off, u64 len)
{
	return fake_mr_dma(id, off, len, false);
}

int fake_mr_write(unsigned long id, u64 off, u64 len)
{
	return fake_mr_dma(id, off, len, true);
}

/* ---- debugfs views ---- */

void fake_regs_show(struct seq_file *m)
{
	struct fake_mr *mr;
	unsigned long idx;

	xa_lock(&fake_mrs);
	xa_for_each(&fake_mrs, idx, mr) {
		seq_printf(m, "id=%lu dev=%s addr=0x%llx len=0x%llx client=%s core_context=%llu page_size=0x%lx nents=%d invalidated=%d\n",
			   mr->id, mr->nic ? fake_nic_name(mr->nic) : "none",
			   mr->addr, mr->len, mr->client->name, mr->core_context,
			   mr->page_size, mr->nmap, READ_ONCE(mr->invalidated) ? 1 : 0);
	}
	xa_unlock(&fake_mrs);
}

void fake_mr_exit(void)
{
	if (!xa_empty(&fake_mrs))
		pr_err("unloading with live registrations\n");
	xa_destroy(&fake_mrs);
}
