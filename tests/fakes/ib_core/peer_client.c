// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: the peer-memory client registry and the invalidate
 * entry point handed to clients.  Follows wjz304/mlnx-ofed-kernel
 * drivers/infiniband/core/peer_mem.c at 24.07 (commit 2c0186b, with
 * backports/0019-BACKPORT-drivers-infiniband-core-peer_mem.c.patch for
 * memory_peers) and at 4.9 (commit 8ba4057).
 */
#include "fake_ib_core.h"

#include <linux/export.h>
#include <linux/hardirq.h>
#include <linux/irqflags.h>
#include <linux/preempt.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/string.h>

/* The real peer_memory_mutex / peer_memory_list. */
DEFINE_MUTEX(fake_clients_lock);
LIST_HEAD(fake_clients);

/*
 * Every client struct not yet freed (including unregistering ones): the
 * valid reg_handle values.  Fake-only: the real core trusts reg_handle.
 */
static DEFINE_SPINLOCK(fake_all_lock);
static LIST_HEAD(fake_all_clients);

static void fake_client_free(struct kref *ref)
{
	struct fake_client *c = container_of(ref, struct fake_client, ref);

	if (!xa_empty(&c->ctx_xa))
		pr_err("client %s freed with live core_context ids\n", c->name);
	xa_destroy(&c->ctx_xa);
	fake_xlock_destroy(&c->v4_lock);
	kfree(c);
}

void fake_client_put(struct fake_client *c)
{
	kref_put(&c->ref, fake_client_free);
}

/* ib_put_peer_client() (both): release() if the client has one, then the use count. */
void fake_client_release_ctx(struct fake_client *c, void *ctx)
{
	if (c->ops->release)
		c->ops->release(ctx);
	if (atomic_dec_and_test(&c->nr_mrs))
		wake_up(&c->wq);
}

/*
 * 24.07 ib_peer_unmap_on_invalidate(): any non-zero version[15] marks the
 * extended form; flags count only if ex_size covers them.
 */
bool fake_client_unmaps_itself(const struct fake_client *c)
{
	const struct peer_memory_client_ex *ex;

	if (fake_v4() || c->ops->version[IB_PEER_MEMORY_VER_MAX - 1] == 0)
		return false;
	ex = container_of(c->ops, const struct peer_memory_client_ex, client);
	if (ex->ex_size < offsetofend(struct peer_memory_client_ex, flags))
		return false;
	return ex->flags & PEER_MEM_INVALIDATE_UNMAPS;
}

/*
 * 4.9 reads two members past release(); a 5.x-only client may not have
 * them (its object may end there).  Read without KASAN so that the fake
 * itself does not report what the real core silently reads.
 */
static __no_sanitize_address void *fake_v4_private_data_fn(const struct peer_memory_client *ops)
{
	const struct fake_peer_memory_client_v4 *v4 =
		container_of(ops, const struct fake_peer_memory_client_v4, base);

	return (void *)READ_ONCE(v4->get_context_private_data);
}

/*
 * ib_get_peer_client(): under the global mutex, in registration order,
 * skip invalidating clients for buffers that cannot be invalidated (CQ/QP:
 * no IB_PEER_MEM_INVAL_SUPP); 4.9 also skips a client with a non-NULL
 * get_context_private_data when the ucontext has no peer private data
 * (always, in this model).  First acquire() > 0 wins.
 */
/*
 * Registrations that some client was asked about and none claimed (the core's EFAULT, as for
 * one that found no client at all): the stress tells a declining client from an absent one.
 */
atomic_long_t fake_stat_declined = ATOMIC_LONG_INIT(0);

struct fake_client *fake_client_acquire(unsigned long id, u64 addr, u64 len,
					bool cq, void **ctx)
{
	struct fake_client *c, *winner = NULL;
	bool asked = false;

	mutex_lock(&fake_clients_lock);
	list_for_each_entry(c, &fake_clients, node) {
		int ret;

		if (cq && c->invalidating)
			continue;
		if (fake_v4()) {
			void *fn = fake_v4_private_data_fn(c->ops);

			if (fn) {
				pr_info("reg %lu: 4.9 core skips client %s: get_context_private_data is %px (a 5.x client's ex_size?)\n",
					id, c->name, fn);
				continue;
			}
		}
		*ctx = NULL;
		asked = true;
		ret = c->ops->acquire(addr, len, NULL, NULL, ctx);
		if (ret > 0) {
			kref_get(&c->ref);
			atomic_inc(&c->nr_mrs);
			winner = c;
			break;
		}
	}
	if (!winner && asked)
		atomic_long_inc(&fake_stat_declined);
	mutex_unlock(&fake_clients_lock);
	if (!winner)
		pr_err("reg %lu: no peer client claims [0x%llx, 0x%llx)%s\n", id,
		       addr, addr + len, cq ? " as a CQ buffer" : "");
	return winner;
}

static struct fake_client *fake_client_lookup(void *handle)
{
	struct fake_client *c, *found = NULL;

	spin_lock(&fake_all_lock);
	list_for_each_entry(c, &fake_all_clients, all_node) {
		if (c == handle) {
			kref_get(&c->ref);
			found = c;
			break;
		}
	}
	spin_unlock(&fake_all_lock);
	return found;
}

static void fake_client_stats_read(struct fake_client *c, u64 *v)
{
	struct fake_client_stats *s = &c->stats;

	v[0] = atomic64_read(&s->num_alloc_mrs);
	v[1] = atomic64_read(&s->num_dealloc_mrs);
	v[2] = atomic64_read(&s->num_reg_pages);
	v[3] = atomic64_read(&s->num_dereg_pages);
	v[4] = atomic64_read(&s->num_reg_bytes);
	v[5] = atomic64_read(&s->num_dereg_bytes);
	v[6] = atomic64_read(&s->num_free_callbacks);
}

bool fake_client_stats_by_kobj(struct kobject *kobj, char *version,
			       u64 *vals, int nvals)
{
	struct fake_client *c;
	bool found = false;
	u64 v[7];

	spin_lock(&fake_all_lock);
	list_for_each_entry(c, &fake_all_clients, all_node) {
		if (c->kobj != kobj)
			continue;
		fake_client_stats_read(c, v);
		memcpy(vals, v, min_t(size_t, nvals, ARRAY_SIZE(v)) * sizeof(u64));
		strscpy(version, c->version, IB_PEER_MEMORY_VER_MAX);
		found = true;
		break;
	}
	spin_unlock(&fake_all_lock);
	return found;
}

void fake_client_set_kobj(struct fake_client *c, struct kobject *kobj)
{
	spin_lock(&fake_all_lock);
	c->kobj = kobj;
	spin_unlock(&fake_all_lock);
}

bool fake_client_name_has_sysfs(const char *name)
{
	struct fake_client *c;
	bool found = false;

	spin_lock(&fake_all_lock);
	list_for_each_entry(c, &fake_all_clients, all_node) {
		if (c->kobj && !strcmp(c->name, name)) {
			found = true;
			break;
		}
	}
	spin_unlock(&fake_all_lock);
	return found;
}

/* The function clients get through invalidate_callback (both flavours). */
static int fake_invalidate(void *reg_handle, u64 core_context)
{
	struct fake_client *c;
	int ret;

	/* Fake-only checks: the real one takes a mutex (sleeps). */
	if (in_atomic() || irqs_disabled()) {
		fake_violation("invalidate(core_context=%llu) called in atomic context (it sleeps)",
			       core_context);
		return 0;
	}
	c = fake_client_lookup(reg_handle);
	if (!c) {
		fake_violation("invalidate(core_context=%llu) with an unknown or unregistered reg_handle %p",
			       core_context, reg_handle);
		return 0;
	}
	ret = fake_v4() ? fake_v4_invalidate(c, core_context)
			: fake_v5_invalidate(c, core_context);
	fake_client_put(c);
	return ret;
}

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback)
{
	struct fake_client *c;
	bool first;
	int ret;

	if (!peer_client) {
		pr_err("register: NULL peer_memory_client\n");
		return NULL;
	}
	/* ib_memory_peer_check_mandatory(); 4.9 also requires get_page_size. */
	if (!peer_client->acquire || !peer_client->get_pages ||
	    !peer_client->put_pages || !peer_client->dma_map ||
	    !peer_client->dma_unmap ||
	    (fake_v4() && !peer_client->get_page_size)) {
		pr_err("Peer memory %.*s is missing a mandatory function, refused\n",
		       (int)strnlen(peer_client->name, IB_PEER_MEMORY_NAME_MAX),
		       peer_client->name);
		return NULL;
	}

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return NULL;
	kref_init(&c->ref);
	c->ops = peer_client;
	strscpy(c->name, peer_client->name, sizeof(c->name));
	strscpy(c->version, peer_client->version, sizeof(c->version));
	if (!fake_v4() && peer_client->version[IB_PEER_MEMORY_VER_MAX - 1]) {
		const struct peer_memory_client_ex *ex =
			container_of(peer_client, struct peer_memory_client_ex, client);

		c->ex = true;
		if (ex->ex_size >= offsetofend(struct peer_memory_client_ex, flags))
			c->flags = ex->flags;
	}
	c->invalidating = invalidate_callback != NULL;
	xa_init_flags(&c->ctx_xa, XA_FLAGS_ALLOC);
	c->last_ticket = 1;
	fake_xlock_init(&c->v4_lock);
	atomic_set(&c->nr_mrs, 0);
	init_waitqueue_head(&c->wq);

	if (invalidate_callback)
		*invalidate_callback = fake_invalidate;

	mutex_lock(&fake_clients_lock);
	first = list_empty(&fake_clients);
	ret = fake_sysfs_add_client(c, first);
	if (ret) {
		mutex_unlock(&fake_clients_lock);
		pr_err("register: client %s refused: memory_peers entry failed (%d)\n",
		       c->name, ret);
		fake_client_put(c);
		return NULL;
	}
	spin_lock(&fake_all_lock);
	list_add_tail(&c->all_node, &fake_all_clients);
	spin_unlock(&fake_all_lock);
	list_add_tail(&c->node, &fake_clients);
	mutex_unlock(&fake_clients_lock);

	pr_info("registered peer client %s version %s ex=%d flags=0x%x invalidate=%d (core_version=%d)\n",
		c->name, c->version, c->ex, c->flags, c->invalidating,
		fake_core_version);
	return c;
}
EXPORT_SYMBOL(ib_register_peer_memory_client);

void ib_unregister_peer_memory_client(void *reg_handle)
{
	struct fake_client *c, *found = NULL;
	int left;

	mutex_lock(&fake_clients_lock);
	list_for_each_entry(c, &fake_clients, node) {
		if (c == reg_handle) {
			found = c;
			break;
		}
	}
	if (found) {
		list_del(&found->node);
		/* 4.9 destroy_peer_sysfs(): the entry goes before the wait. */
		if (fake_v4())
			fake_sysfs_del_client(found);
		if (list_empty(&fake_clients))
			fake_sysfs_put_parent();
	}
	mutex_unlock(&fake_clients_lock);

	if (!found) {
		fake_violation("unregister with an unknown or already unregistered reg_handle %p",
			       reg_handle);
		return;
	}
	c = found;

	/* No forced invalidation: wait until every registration is released. */
	left = atomic_read(&c->nr_mrs);
	if (left)
		pr_info("unregister of client %s waits for %d registration(s) to be released\n",
			c->name, left);
	while (!wait_event_timeout(c->wq, atomic_read(&c->nr_mrs) == 0, 10 * HZ))
		pr_info("unregister of client %s still waits for %d registration(s)\n",
			c->name, atomic_read(&c->nr_mrs));

	/* 24.07: the client's kobject goes with the final kobject_put(). */
	if (!fake_v4()) {
		mutex_lock(&fake_clients_lock);
		fake_sysfs_del_client(c);
		mutex_unlock(&fake_clients_lock);
	}

	spin_lock(&fake_all_lock);
	list_del(&c->all_node);
	spin_unlock(&fake_all_lock);

	pr_info("unregistered peer client %s\n", c->name);
	fake_client_put(c);
}
EXPORT_SYMBOL(ib_unregister_peer_memory_client);

void fake_clients_show(struct seq_file *m)
{
	struct fake_client *c;
	u64 v[7];

	mutex_lock(&fake_clients_lock);
	list_for_each_entry(c, &fake_clients, node) {
		fake_client_stats_read(c, v);
		seq_printf(m, "name=%s version=%s ex=%d flags=0x%x invalidate=%d regs=%d num_alloc_mrs=%llu num_dealloc_mrs=%llu num_reg_pages=%llu num_dereg_pages=%llu num_reg_bytes=%llu num_dereg_bytes=%llu num_free_callbacks=%llu\n",
			   c->name, c->version, c->ex, c->flags, c->invalidating,
			   atomic_read(&c->nr_mrs), v[0], v[1], v[2], v[3], v[4],
			   v[5], v[6]);
	}
	mutex_unlock(&fake_clients_lock);
}

int fake_peer_init(void)
{
	return 0;
}

void fake_peer_exit(void)
{
	spin_lock(&fake_all_lock);
	if (!list_empty(&fake_all_clients))
		pr_err("unloading with registered peer clients\n");
	spin_unlock(&fake_all_lock);
}

/* The registered client of that name, with a reference; NULL if none. */
struct fake_client *fake_client_by_name(const char *name)
{
	struct fake_client *c, *found = NULL;

	mutex_lock(&fake_clients_lock);
	list_for_each_entry(c, &fake_clients, node) {
		if (!strcmp(c->name, name)) {
			kref_get(&c->ref);
			found = c;
			break;
		}
	}
	mutex_unlock(&fake_clients_lock);
	return found;
}

/*
 * Test hook for "a buggy core": hand @name's client a client_context it
 * never gave out.  A robust client refuses it instead of dereferencing it.
 */
int fake_client_poke_bogus(const char *name, u64 value)
{
	void *ctx = (void *)(uintptr_t)value;
	const struct peer_memory_client *ops;
	struct fake_client *c;
	int ret;

	c = fake_client_by_name(name);
	if (!c) {
		pr_err("bogus-context: no client named %s\n", name);
		return -ENOENT;
	}
	ops = c->ops;
	ret = ops->get_pages(0x10000, 0x10000, 1, 0, NULL, ctx, 0);
	pr_info("bogus-context: %s get_pages(%p) returned %d\n", name, ctx, ret);
	ret = ops->dma_unmap(NULL, ctx, NULL);
	pr_info("bogus-context: %s dma_unmap(%p) returned %d\n", name, ctx, ret);
	ops->put_pages(NULL, ctx);
	if (ops->release)
		ops->release(ctx);
	pr_info("bogus-context: %s survived put_pages and release of %p\n", name, ctx);
	fake_client_put(c);
	return 0;
}
