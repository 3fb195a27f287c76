// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: one registration's life as MLNX_OFED 4.9 LTS runs
 * it.  Follows wjz304/mlnx-ofed-kernel at commit 8ba4057 ("update 4.9"):
 * drivers/infiniband/core/umem.c peer_umem_get()/peer_umem_release(),
 * drivers/infiniband/core/peer_mem.c ib_invalidate_peer_memory(),
 * ib_peer_create/destroy_invalidation_ctx(), ib_get/put_peer_client(),
 * drivers/infiniband/core/umem.c ib_umem_activate_invalidation_notifier(),
 * and the NIC side in drivers/infiniband/hw/mlx5/mr.c mlx5_ib_reg_user_mr(),
 * mlx5_invalidate_umem(), mlx5_ib_dereg_mr(), dereg_mr().
 *
 * There is no per-registration lock in 4.9: the client-wide
 * ib_peer_client->lock (here client->v4_lock) guards the ticket list and
 * is held by invalidate across the NIC's whole teardown (dma_unmap,
 * put_pages, release) on the invalidating thread.
 */
#include "fake_ib_core.h"

#include <linux/log2.h>

/* 4.9 ib_peer_create_invalidation_ctx() / ib_peer_insert_context(). */
static int fake_v4_insert_ticket(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;
	int ret;

	fake_xlock_lock_reporting(&c->v4_lock, "registration (insert_context)");
	mr->core_context = c->last_ticket++;
	ret = xa_err(xa_store(&c->ctx_xa, mr->core_context, mr, GFP_KERNEL));
	fake_xlock_unlock(&c->v4_lock);
	if (!ret)
		mr->has_ticket = true;
	return ret;
}

/* 4.9 ib_peer_destroy_invalidation_ctx(). */
static void fake_v4_destroy_ticket(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;
	bool peer_callback, inflight;

	if (!mr->has_ticket)
		return;
	/* Under the peer callback the lock is already held. */
	if (!mr->peer_callback)
		fake_xlock_lock_reporting(&c->v4_lock, "teardown (destroy_invalidation_ctx)");
	xa_erase(&c->ctx_xa, mr->core_context);
	mr->has_ticket = false;
	peer_callback = mr->peer_callback;
	inflight = mr->inflight_invalidation;
	if (inflight)
		complete(&mr->inflight_comp);
	if (!peer_callback)
		fake_xlock_unlock(&c->v4_lock);
}

static void fake_v4_doing(struct fake_mr *mr, const char *what)
{
	fake_xlock_doing(&mr->client->v4_lock, what);
}

/*
 * 4.9 peer_umem_release(): destroy the ticket, dma_unmap, put_pages,
 * dereg counters (nmap and nmap << page_shift), dealloc, release.
 */
static void fake_v4_umem_release(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;
	const struct peer_memory_client *ops = c->ops;

	fake_v4_destroy_ticket(mr);
	fake_v4_doing(mr, "invalidating: in client dma_unmap");
	ops->dma_unmap(&mr->sgt, mr->client_ctx, mr->dma_dev);
	fake_v4_doing(mr, "invalidating: in client put_pages");
	ops->put_pages(&mr->sgt, mr->client_ctx);
	atomic64_add(mr->nmap, &c->stats.num_dereg_pages);
	atomic64_add((u64)mr->nmap << mr->page_shift, &c->stats.num_dereg_bytes);
	atomic64_inc(&c->stats.num_dealloc_mrs);
	fake_inject(FAKE_INJ_BEFORE_RELEASE);
	fake_v4_doing(mr, "invalidating: in client release");
	fake_client_release_ctx(c, mr->client_ctx);
	fake_v4_doing(mr, "invalidating");
}

int fake_v4_reg(struct fake_mr *mr)
{
	const struct peer_memory_client *ops;
	struct fake_client *c;
	int ret, inj, check;

	c = fake_client_acquire(mr->id, mr->addr, mr->len, mr->cq, &mr->client_ctx);
	if (!c)
		return -EFAULT;
	mr->client = c;
	ops = c->ops;

	/* peer_umem_get(): kzalloc of the umem, may fail (ENOMEM). */
	ret = fake_inject(FAKE_INJ_AFTER_ACQUIRE);
	if (ret)
		goto end;

	/* MRs (IB_PEER_MEM_INVAL_SUPP) get a ticket whatever the client; CQs none. */
	mr->core_context = 0;
	if (!mr->cq) {
		ret = fake_v4_insert_ticket(mr);
		if (ret)
			goto end;
	}

	/* 4.9 passes the umem's own sg_head (not NULL) to get_pages. */
	ret = ops->get_pages(mr->addr, mr->len, 1, mr->ro, &mr->sgt, mr->client_ctx,
			     mr->core_context);
	if (ret) {
		pr_err("reg %lu: client %s: get_pages failed (%d)\n", mr->id, c->name, ret);
		goto out;
	}
	ret = fake_inject(FAKE_INJ_AFTER_GET_PAGES);
	if (ret)
		goto put_pages;

	/* get_page_size before dma_map (mandatory in 4.9). */
	mr->page_size = ops->get_page_size(mr->client_ctx);
	if (!mr->page_size) {
		fake_violation("reg %lu: client %s: get_page_size() returned 0 (4.9 takes ilog2 of it)",
			       mr->id, c->name);
		ret = -EINVAL;
		goto put_pages;
	}
	mr->page_shift = ilog2(mr->page_size);

	ret = ops->dma_map(&mr->sgt, mr->client_ctx, mr->dma_dev, 0, &mr->nmap);
	if (ret) {
		pr_err("reg %lu: client %s: dma_map failed (%d)\n", mr->id, c->name, ret);
		goto put_pages;
	}

	atomic64_add(mr->nmap, &c->stats.num_reg_pages);
	atomic64_add((u64)mr->nmap << mr->page_shift, &c->stats.num_reg_bytes);
	atomic64_inc(&c->stats.num_alloc_mrs);

	check = fake_sg_check(mr, mr->nmap);
	if (!check)
		mr->nic_page_size = fake_sg_best_pgsz(mr);
	inj = fake_inject(FAKE_INJ_AFTER_DMA_MAP);
	if (inj || check) {
		/* mlx5_ib_reg_user_mr() "error:" label: ib_umem_release(). */
		ret = inj ? inj : check;
		pr_err("reg %lu: the NIC driver fails the MR (%d): umem release\n",
		       mr->id, ret);
		fake_v4_umem_release(mr);
		return ret;
	}

	/* ib_umem_activate_invalidation_notifier() (MRs only). */
	if (mr->has_ticket) {
		fake_xlock_lock_reporting(&c->v4_lock, "registration (activate_invalidation_notifier)");
		if (mr->peer_invalidated) {
			pr_err("reg %lu: ib_umem_activate_invalidation_notifier: pages were invalidated by peer\n",
			       mr->id);
			ret = -EINVAL;
		} else {
			mr->v4_func = true;
		}
		fake_xlock_unlock(&c->v4_lock);
		if (ret) {
			fake_v4_umem_release(mr);
			return ret;
		}
	}
	return 0;

put_pages:
	ops->put_pages(&mr->sgt, mr->client_ctx);
out:
	fake_v4_destroy_ticket(mr);
end:
	fake_client_release_ctx(c, mr->client_ctx);
	return ret > 0 ? -EINVAL : ret;
}

/* mlx5_ib_dereg_mr() (4.9). */
void fake_v4_dereg(struct fake_mr *mr)
{
	if (atomic_inc_return(&mr->v4_invalidated) > 1) {
		/* An invalidation ran or runs the teardown: wait for it. */
		wait_for_completion(&mr->invalidation_comp);
		return;
	}
	fake_mr_revoke(mr, false);
	fake_v4_umem_release(mr);
}

/* 4.9 ib_invalidate_peer_memory() with mlx5_invalidate_umem(); returns 0. */
int fake_v4_invalidate(struct fake_client *c, u64 core_context)
{
	char who[TASK_COMM_LEN + 96];
	struct fake_mr *mr;

	if (fake_xlock_held_by_me(&c->v4_lock)) {
		fake_violation("client %s calls invalidate(core_context=%llu) from inside a callback the 4.9 core makes under its peer client lock (self-deadlock in MLNX_OFED 4.9)",
			       c->name, core_context);
		return 0;
	}
	if (!fake_xlock_lock_timed(&c->v4_lock, FAKE_DEADLOCK_SECS)) {
		fake_xlock_describe(&c->v4_lock, who, sizeof(who));
		atomic_inc(&fake_stat_deadlocks);
		fake_violation("deadlock: invalidate(core_context=%llu) waited %d s for the peer client lock held by %s",
			       core_context, FAKE_DEADLOCK_SECS, who);
		return 0;
	}
	atomic64_inc(&c->stats.num_free_callbacks);
	mr = xa_load(&c->ctx_xa, core_context);
	if (!mr)
		goto out;
	/* Not activated yet: mark it; activation will fail the MR. */
	if (!mr->v4_func) {
		mr->peer_invalidated = true;
		pr_info("reg %lu: invalidate(core_context=%llu) before activation: marked\n",
			mr->id, core_context);
		goto out;
	}
	fake_mr_get(mr);
	if (atomic_inc_return(&mr->v4_invalidated) > 1) {
		/* A dereg is under way: wait until it destroyed the ticket. */
		mr->inflight_invalidation = true;
		init_completion(&mr->inflight_comp);
		fake_xlock_unlock(&c->v4_lock);
		wait_for_completion(&mr->inflight_comp);
		fake_mr_put(mr);
		return 0;
	}
	mr->peer_callback = true;
	fake_xlock_doing(&c->v4_lock, "invalidating");
	fake_mr_revoke(mr, true);
	atomic_inc(&fake_stat_invalidations);
	atomic_inc(&fake_stat_unmaps_in_invalidate);
	fake_v4_umem_release(mr);
	complete_all(&mr->invalidation_comp);
	pr_info("reg %lu: invalidate(core_context=%llu) by client %s: unmapped, unpinned and released\n",
		mr->id, core_context, c->name);
	fake_mr_put(mr);
out:
	fake_xlock_unlock(&c->v4_lock);
	return 0;
}
