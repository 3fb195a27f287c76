// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: registrations ("MRs") as the test drives them
 * through debugfs, the NIC's use of them, and the dispatch to the flavour
 * (core_v5.c: MLNX_OFED 5.x/24.x, core_v4.c: MLNX_OFED 4.9).
 */
#include "fake_ib_core.h"

#include <linux/align.h>
#include <linux/device.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/workqueue.h>

/* id -> struct fake_mr; a reserved (NULL-looking) entry while registering. */
static DEFINE_XARRAY(fake_mrs);

/*
 * debugfs "stats": regs = live registrations; invalidations = invalidate
 * calls that revoked an active registration; unmaps_in_invalidate = those
 * in which the core itself called dma_unmap + put_pages.
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
	fake_xlock_destroy(&mr->map_lock);
	mutex_destroy(&mr->dma_lock);
	kfree(mr);
}

void fake_mr_get(struct fake_mr *mr)
{
	kref_get(&mr->ref);
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

void fake_mr_revoke(struct fake_mr *mr, bool by_invalidation)
{
	mutex_lock(&mr->dma_lock);
	mr->revoked = true;
	if (by_invalidation)
		WRITE_ONCE(mr->invalidated, true);
	mutex_unlock(&mr->dma_lock);
}

int fake_mr_reg(unsigned long id, const char *devname, u64 addr, u64 len,
		bool ro, bool cq)
{
	struct fake_mr *mr;
	int ret;

	if (!len || addr + len < addr) {
		pr_err("reg %lu: bad range 0x%llx+0x%llx\n", id, addr, len);
		return -EINVAL;
	}

	/* __GFP_ACCOUNT: the core's objects sit in the kmalloc-cg-* caches,
	 * apart from the client's (make bench measures the client's bytes). */
	mr = kzalloc(sizeof(*mr), GFP_KERNEL_ACCOUNT);
	if (!mr)
		return -ENOMEM;
	kref_init(&mr->ref);
	fake_xlock_init(&mr->map_lock);
	mutex_init(&mr->dma_lock);
	init_completion(&mr->inflight_comp);
	init_completion(&mr->invalidation_comp);
	mr->id = id;
	mr->addr = addr;
	mr->len = len;
	mr->ro = ro;
	mr->cq = cq;
	mr->xa_id = FAKE_NO_INVALIDATION_ID;
	mr->core_context = FAKE_NO_INVALIDATION_ID;

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

	ret = fake_v4() ? fake_v4_reg(mr) : fake_v5_reg(mr);
	if (ret) {
		xa_release(&fake_mrs, id);
		fake_mr_put(mr);
		return ret;
	}

	atomic_inc(&fake_stat_regs);
	/* Publish: replacing the reserved entry needs no allocation. */
	xa_store(&fake_mrs, id, mr, GFP_KERNEL);
	pr_info("reg %lu: client %s core_context %llu page_size 0x%lx nmap %d\n",
		id, mr->client->name, mr->core_context, mr->page_size, mr->nmap);
	return 0;
}

static void fake_mr_teardown(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;

	if (fake_v4())
		fake_v4_dereg(mr);
	else
		fake_v5_dereg(mr);
	atomic_dec(&fake_stat_regs);
	pr_info("dereg %lu: done (client %s)\n", mr->id, c->name);
}

struct fake_dereg_work {
	struct work_struct work;
	struct fake_mr *mr;
};

static void fake_dereg_workfn(struct work_struct *work)
{
	struct fake_dereg_work *w = container_of(work, struct fake_dereg_work, work);

	pr_info("dereg %lu: on worker %s/%d\n", w->mr->id, current->comm,
		task_pid_nr(current));
	fake_mr_teardown(w->mr);
}

bool fake_mr_exists(unsigned long id)
{
	return xa_load(&fake_mrs, id);
}

int fake_mr_dereg(unsigned long id, bool worker)
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

	if (worker) {
		struct fake_dereg_work w = { .mr = mr };

		INIT_WORK_ONSTACK(&w.work, fake_dereg_workfn);
		queue_work(system_unbound_wq, &w.work);
		flush_work(&w.work);
		destroy_work_on_stack(&w.work);
	} else {
		fake_mr_teardown(mr);
	}
	fake_mr_put(mr);
	return 0;
}

/* ---- NIC access ---- */

static int fake_mr_dma(unsigned long id, u64 off, u64 len, bool write)
{
	const char *what = write ? "write" : "read";
	struct fake_seg *segs = NULL;
	struct fake_mr *mr;
	void *buf;
	u64 base;
	int ret, n;

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

	/* The NIC reads the core's (client-filled) sg list while it is live. */
	mutex_lock(&mr->dma_lock);
	if (mr->revoked) {
		pr_err("%s %lu: registration is invalidated or gone\n", what, id);
		ret = -EIO;
	} else {
		n = fake_sg_segs(mr, &segs, &base);
		if (n < 0) {
			ret = n;
		} else {
			u64 voff = mr->addr - base + off;

			if (write)
				ret = fake_nic_write(mr->nic, segs, n, voff, buf, len);
			else
				ret = fake_nic_read(mr->nic, segs, n, voff, buf, len);
			kfree(segs);
		}
		if (ret)
			pr_err("%s %lu: NIC DMA failed (%d)\n", what, id, ret);
	}
	mutex_unlock(&mr->dma_lock);

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

/* ---- debugfs view ---- */

void fake_regs_show(struct seq_file *m)
{
	struct fake_mr *mr;
	unsigned long idx;

	xa_lock(&fake_mrs);
	xa_for_each(&fake_mrs, idx, mr) {
		seq_printf(m, "id=%lu dev=%s addr=0x%llx len=0x%llx client=%s core_context=%llu page_size=0x%lx nents=%d sg_bytes=0x%llx nic_page_size=0x%lx invalidated=%d\n",
			   mr->id, mr->nic ? fake_nic_name(mr->nic) : "none",
			   mr->addr, mr->len, mr->client->name, mr->core_context,
			   mr->page_size, mr->nmap, mr->sg_bytes, mr->nic_page_size,
			   READ_ONCE(mr->invalidated) ? 1 : 0);
	}
	xa_unlock(&fake_mrs);
}

void fake_mr_exit(void)
{
	if (!xa_empty(&fake_mrs))
		pr_err("unloading with live registrations\n");
	xa_destroy(&fake_mrs);
}
