// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: one registration's life as MLNX_OFED 5.x/24.x runs
 * it.  Follows wjz304/mlnx-ofed-kernel drivers/infiniband/core/peer_mem.c
 * (24.07, commit 2c0186b): ib_peer_umem_get(), ib_unmap_peer_client(),
 * ib_invalidate_peer_memory(), ib_umem_activate_invalidation_notifier(),
 * ib_umem_stop_invalidation_notifier(), ib_peer_umem_release(); the caller
 * side (when activate/stop/release run) follows drivers/infiniband/hw/mlx5/mr.c
 * (24.07) create_real_mr() and __mlx5_ib_dereg_mr()/mlx5_revoke_mr().
 */
#include "fake_ib_core.h"

#include <linux/string.h>

static void fake_v5_doing(struct fake_mr *mr, const char *what)
{
	fake_xlock_doing(&mr->map_lock, what);
}

/*
 * 24.07 ib_unmap_peer_client(), step by step: restore the trimmed entries,
 * dma_unmap + put_pages only when going to UNMAPPED, then zero the core's
 * sg_table and count the MR as deallocated; dereg counters on any move to
 * UNMAPPED from MAPPED or INVALIDATED (nents is 0 by then: num_dereg_pages
 * adds 0); the state always becomes @to.
 */
static void fake_v5_unmap(struct fake_mr *mr, enum fake_map_state cur,
			  enum fake_map_state to)
{
	const struct peer_memory_client *ops = mr->client->ops;
	struct fake_client_stats *st = &mr->client->stats;

	if (cur == FAKE_MAPPED && (to == FAKE_UNMAPPED || to == FAKE_INVALIDATED)) {
		fake_sg_restore(mr);
		if (to == FAKE_UNMAPPED) {
			fake_v5_doing(mr, "in client dma_unmap");
			ops->dma_unmap(&mr->sgt, mr->client_ctx, mr->dma_dev);
			fake_v5_doing(mr, "in client put_pages");
			ops->put_pages(&mr->sgt, mr->client_ctx);
			fake_v5_doing(mr, NULL);
		}
		memset(&mr->sgt, 0, sizeof(mr->sgt));
		atomic64_inc(&st->num_dealloc_mrs);
	}
	if ((cur == FAKE_MAPPED && to == FAKE_UNMAPPED) ||
	    (cur == FAKE_INVALIDATED && to == FAKE_UNMAPPED)) {
		atomic64_add(mr->sgt.nents, &st->num_dereg_pages);
		atomic64_add(mr->len, &st->num_dereg_bytes);
	}
	mr->state = to;
}

/* 24.07 ib_umem_stop_invalidation_notifier(). */
static void fake_v5_stop_notifier(struct fake_mr *mr)
{
	bool unmap_on_invalidate = fake_client_unmaps_itself(mr->client);
	enum fake_map_state cur = FAKE_UNMAPPED;
	bool locked = true;

	if (mr->notifier_active) {
		fake_xlock_lock_reporting(&mr->map_lock, "teardown (stop_invalidation_notifier)");
		mr->notifier_active = false;
	} else if (mr->xa_id != FAKE_NO_INVALIDATION_ID) {
		/*
		 * Not activated: ib_peer_umem_get() left mapping_lock locked by
		 * this thread.  The 24.07 source locks it again here, which
		 * would block forever; the fake goes on holding it once.
		 */
		pr_info("reg %lu: MLNX_OFED 24.07 would block forever here (stop_invalidation_notifier re-locks the mapping_lock it still holds before activation); the fake goes on\n",
			mr->id);
	} else {
		/*
		 * No invalidation id: the lock was dropped at the end of
		 * registration; the source does not take it and still unlocks
		 * it below (an unbalanced unlock).  The fake skips both.
		 */
		locked = false;
	}
	fake_v5_doing(mr, "tearing down");

	if (!unmap_on_invalidate) {
		fake_v5_unmap(mr, mr->state, FAKE_UNMAPPED);
	} else {
		/* Block ib_invalidate_peer_memory() */
		cur = mr->state;
		mr->state = FAKE_UNMAPPED;
	}
	if (locked)
		fake_xlock_unlock(&mr->map_lock);

	if (unmap_on_invalidate) {
		/* dma_unmap/put_pages without mapping_lock: may race an invalidate. */
		fake_inject(FAKE_INJ_TEARDOWN_UNLOCKED);
		fake_v5_unmap(mr, cur, FAKE_UNMAPPED);
	}
}

/* 24.07 ib_peer_umem_release(). */
static void fake_v5_release(struct fake_mr *mr)
{
	struct fake_client *c = mr->client;

	/* "For no invalidation cases, make sure it is unmapped" (unlocked). */
	fake_v5_unmap(mr, mr->state, FAKE_UNMAPPED);
	if (mr->xa_id != FAKE_NO_INVALIDATION_ID)
		xa_erase(&c->ctx_xa, mr->xa_id);
	fake_inject(FAKE_INJ_BEFORE_RELEASE);
	fake_client_release_ctx(c, mr->client_ctx);
}

int fake_v5_reg(struct fake_mr *mr)
{
	const struct peer_memory_client *ops;
	struct fake_client *c;
	int ret, inj, check;

	/* ib_get_peer_client() */
	c = fake_client_acquire(mr->id, mr->addr, mr->len, mr->cq, &mr->client_ctx);
	if (!c)
		return -EFAULT;	/* the original pin error ("Peers are asked only after ... failed") */
	mr->client = c;
	ops = c->ops;
	mr->xa_id = FAKE_NO_INVALIDATION_ID;

	fake_xlock_lock_timed(&mr->map_lock, 0);
	/* ib_peer_umem_get(): kzalloc of the peer umem, may fail (ENOMEM). */
	fake_v5_doing(mr, "registering: between acquire and get_pages (injected)");
	ret = fake_inject(FAKE_INJ_AFTER_ACQUIRE);
	if (ret)
		goto err_umem;
	if (c->invalidating) {
		ret = xa_alloc_cyclic(&c->ctx_xa, &mr->xa_id, mr,
				      XA_LIMIT(0, FAKE_NO_INVALIDATION_ID - 1),
				      &c->next_ctx, GFP_KERNEL);
		if (ret < 0)
			goto err_umem;
	}
	mr->core_context = mr->xa_id;

	/* write = 1 always; force = !writable (24.07 comment in ib_peer_umem_get()). */
	fake_v5_doing(mr, "registering: in client get_pages");
	ret = ops->get_pages(mr->addr, mr->len, 1, mr->ro, NULL, mr->client_ctx,
			     mr->xa_id);
	if (ret) {
		pr_err("reg %lu: client %s: get_pages failed (%d)\n", mr->id, c->name, ret);
		goto err_xa;
	}

	fake_v5_doing(mr, "registering: injected stall after get_pages");
	ret = fake_inject(FAKE_INJ_AFTER_GET_PAGES);
	if (ret)
		goto err_pages;	/* as a dma_map failure */

	/* The client's *nmap lands in the core's sgt.nents. */
	fake_v5_doing(mr, "registering: in client dma_map");
	ret = ops->dma_map(&mr->sgt, mr->client_ctx, mr->dma_dev, 0, &mr->sgt.nents);
	if (ret) {
		pr_err("reg %lu: client %s: dma_map failed (%d)\n", mr->id, c->name, ret);
		goto err_pages;
	}

	if (ops->get_page_size) {
		fake_v5_doing(mr, "registering: in client get_page_size");
		mr->page_size = ops->get_page_size(mr->client_ctx);
		check = fake_sg_check(mr, mr->sgt.nents);
	} else {
		fake_violation("reg %lu: client %s has no get_page_size; MLNX_OFED 5.x calls it unconditionally (a call to address 0)",
			       mr->id, c->name);
		mr->page_size = PAGE_SIZE;
		check = -EINVAL;
	}
	if (!check && mr->page_size != PAGE_SIZE)
		fake_sg_fix(mr);

	mr->state = FAKE_MAPPED;
	mr->nmap = mr->sgt.nents;
	if (!check)
		mr->nic_page_size = fake_sg_best_pgsz(mr);
	atomic64_add(mr->sgt.nents, &c->stats.num_reg_pages);
	atomic64_add(mr->len, &c->stats.num_reg_bytes);
	atomic64_inc(&c->stats.num_alloc_mrs);

	if (mr->xa_id == FAKE_NO_INVALIDATION_ID)
		fake_xlock_unlock(&mr->map_lock);

	/* Back in the NIC driver (mlx5 create_real_mr()) until activation. */
	fake_v5_doing(mr, "registering: in the NIC driver before activation (injected stall after dma_map)");
	inj = fake_inject(FAKE_INJ_AFTER_DMA_MAP);
	if (inj || check) {
		ret = inj ? inj : check;
		pr_err("reg %lu: the NIC driver fails the MR (%d): stop_invalidation_notifier + umem release\n",
		       mr->id, ret);
		fake_v5_stop_notifier(mr);
		fake_v5_release(mr);
		return ret;
	}

	/* ib_umem_activate_invalidation_notifier() */
	if (mr->xa_id != FAKE_NO_INVALIDATION_ID) {
		mr->notifier_active = true;
		fake_xlock_unlock(&mr->map_lock);
	}
	return 0;

err_pages:
	fake_v5_doing(mr, "registering: in client put_pages (error path)");
	ops->put_pages(&mr->sgt, mr->client_ctx);
err_xa:
	if (mr->xa_id != FAKE_NO_INVALIDATION_ID)
		xa_erase(&c->ctx_xa, mr->xa_id);
err_umem:
	fake_xlock_unlock(&mr->map_lock);
	fake_client_release_ctx(c, mr->client_ctx);
	return ret > 0 ? -EINVAL : ret;
}

/* mlx5 __mlx5_ib_dereg_mr(): revoke, stop the notifier, release the umem. */
void fake_v5_dereg(struct fake_mr *mr)
{
	fake_mr_revoke(mr, false);
	fake_v5_stop_notifier(mr);
	fake_v5_release(mr);
}

/* 24.07 ib_invalidate_peer_memory(); always returns 0. */
int fake_v5_invalidate(struct fake_client *c, u64 core_context)
{
	struct fake_mr *mr;
	char who[TASK_COMM_LEN + 96];

	xa_lock(&c->ctx_xa);
	atomic64_inc(&c->stats.num_free_callbacks);
	mr = xa_load(&c->ctx_xa, core_context);
	if (!mr) {
		xa_unlock(&c->ctx_xa);
		return 0;
	}
	fake_mr_get(mr);
	xa_unlock(&c->ctx_xa);

	if (fake_xlock_held_by_me(&mr->map_lock)) {
		fake_violation("reg %lu: client %s calls invalidate(core_context=%llu) from inside its own callback for that registration (self-deadlock in MLNX_OFED)",
			       mr->id, c->name, core_context);
		goto out;
	}
	if (!fake_xlock_lock_timed(&mr->map_lock, FAKE_DEADLOCK_SECS)) {
		fake_xlock_describe(&mr->map_lock, who, sizeof(who));
		atomic_inc(&fake_stat_deadlocks);
		fake_violation("deadlock: invalidate(core_context=%llu) waited %d s for the mapping lock held by %s",
			       core_context, FAKE_DEADLOCK_SECS, who);
		goto out;
	}
	fake_v5_doing(mr, "invalidating");

	/* The NIC driver's invalidation_func (mlx5_invalidate_umem) revokes. */
	if (mr->state == FAKE_MAPPED && mr->notifier_active) {
		fake_mr_revoke(mr, true);
		atomic_inc(&fake_stat_invalidations);
	}
	if (fake_client_unmaps_itself(c)) {
		fake_v5_unmap(mr, mr->state, FAKE_INVALIDATED);
	} else {
		if (mr->state == FAKE_MAPPED)
			atomic_inc(&fake_stat_unmaps_in_invalidate);
		fake_v5_unmap(mr, mr->state, FAKE_UNMAPPED);
	}
	fake_xlock_unlock(&mr->map_lock);
	pr_info("reg %lu: invalidate(core_context=%llu) by client %s done\n",
		mr->id, core_context, c->name);
out:
	fake_mr_put(mr);
	return 0;
}
