// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: the peer-memory client registry and the invalidate
 * entry point handed to clients.
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

/* Clients that can back new registrations, in registration order. */
DEFINE_MUTEX(fake_clients_lock);
LIST_HEAD(fake_clients);

/*
 * Every client struct that has not been unregistered completely (including
 * clients whose unregister is waiting for their registrations): valid
 * reg_handle values for the invalidate callback.
 */
static DEFINE_SPINLOCK(fake_all_lock);
static LIST_HEAD(fake_all_clients);

static void fake_client_free(struct kref *ref)
{
	struct fake_client *c = container_of(ref, struct fake_client, ref);

	if (!xa_empty(&c->ctx_xa))
		pr_err("client %s freed with live core_context ids\n", c->name);
	xa_destroy(&c->ctx_xa);
	kfree(c);
}

void fake_client_put(struct fake_client *c)
{
	kref_put(&c->ref, fake_client_free);
}

/* A registration backed by c has been released (or failed). */
void fake_client_mr_gone(struct fake_client *c)
{
	if (atomic_dec_and_test(&c->nr_mrs))
		wake_up(&c->wq);
}

bool fake_client_unmaps_itself(const struct fake_client *c)
{
	return c->flags & PEER_MEM_INVALIDATE_UNMAPS;
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

bool fake_client_stats_by_kobj(struct kobject *kobj, char *version,
			       u64 *vals, int nvals)
{
	struct fake_client *c;
	bool found = false;

	spin_lock(&fake_all_lock);
	list_for_each_entry(c, &fake_all_clients, all_node) {
		struct fake_client_stats *s = &c->stats;

		if (c->kobj != kobj)
			continue;
		{
			u64 v[] = {
				atomic64_read(&s->num_alloc_mrs),
				atomic64_read(&s->num_dealloc_mrs),
				atomic64_read(&s->num_reg_pages),
				atomic64_read(&s->num_dereg_pages),
				atomic64_read(&s->num_reg_bytes),
				atomic64_read(&s->num_dereg_bytes),
				atomic64_read(&s->num_free_callbacks),
			};

			memcpy(vals, v, min_t(size_t, nvals, ARRAY_SIZE(v)) * sizeof(u64));
		}
		strscpy(version, c->version, IB_PEER_MEMORY_VER_MAX);
		found = true;
		break;
	}
	spin_unlock(&fake_all_lock);
	return found;
}

/* Set or clear c->kobj so that sysfs show() lookups see it consistently. */
void fake_client_set_kobj(struct fake_client *c, struct kobject *kobj)
{
	spin_lock(&fake_all_lock);
	c->kobj = kobj;
	spin_unlock(&fake_all_lock);
}

/* Is a client struct with this name still around (possibly unregistering)? */
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

/*
 * The function clients get through invalidate_callback.  Mirrors MLNX_OFED
 * 5.x: unknown ids are ignored, the per-registration mapping mutex is taken
 * (so the caller must be able to sleep), the NIC loses access, and the core
 * unmaps/unpins inside the call unless the client unmaps itself.
 */
static int fake_invalidate(void *reg_handle, u64 core_context)
{
	struct fake_client *c;
	struct fake_mr *mr = NULL;

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

	atomic64_inc(&c->stats.num_free_callbacks);
	if (!c->invalidating) {
		fake_violation("client %s registered without an invalidate callback calls invalidate",
			       c->name);
		goto out;
	}

	if (core_context < U32_MAX) {
		xa_lock(&c->ctx_xa);
		mr = xa_load(&c->ctx_xa, core_context);
		if (mr)
			kref_get(&mr->ref);
		xa_unlock(&c->ctx_xa);
	}
	if (mr) {
		fake_mr_invalidate(mr);
		fake_mr_put(mr);
	}
out:
	fake_client_put(c);
	return 0;
}

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback)
{
	struct fake_client *c;
	int ret;

	if (!peer_client) {
		pr_err("register: NULL peer_memory_client\n");
		return NULL;
	}
	if (!peer_client->acquire || !peer_client->get_pages ||
	    !peer_client->put_pages || !peer_client->dma_map ||
	    !peer_client->dma_unmap) {
		pr_err("register: client %.*s lacks a mandatory callback, refused\n",
		       (int)strnlen(peer_client->name, IB_PEER_MEMORY_NAME_MAX),
		       peer_client->name);
		return NULL;
	}

	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c) {
		pr_err("register: out of memory\n");
		return NULL;
	}
	kref_init(&c->ref);
	c->ops = peer_client;
	if (strscpy(c->name, peer_client->name, sizeof(c->name)) < 0)
		pr_err("register: client name is not NUL-terminated within %d bytes, truncated\n",
		       IB_PEER_MEMORY_NAME_MAX);
	strscpy(c->version, peer_client->version, sizeof(c->version));
	if (fake_core_version >= 5 &&
	    peer_client->version[IB_PEER_MEMORY_VER_MAX - 1] == FAKE_PEER_EX_MARKER) {
		const struct peer_memory_client_ex *ex =
			container_of(peer_client, struct peer_memory_client_ex, client);

		c->ex = true;
		if (ex->ex_size >= offsetofend(struct peer_memory_client_ex, flags))
			c->flags = ex->flags;
		else
			pr_info("register: client %s: ex_size %zu too small for flags, using 0\n",
				c->name, ex->ex_size);
	}
	c->invalidating = invalidate_callback != NULL;
	xa_init_flags(&c->ctx_xa, XA_FLAGS_ALLOC);
	atomic_set(&c->nr_mrs, 0);
	init_waitqueue_head(&c->wq);

	mutex_lock(&fake_clients_lock);
	ret = fake_sysfs_add_client(c);
	if (ret)
		pr_err("register: client %s: no memory_peers sysfs entry (%d)\n",
		       c->name, ret);
	spin_lock(&fake_all_lock);
	list_add_tail(&c->all_node, &fake_all_clients);
	spin_unlock(&fake_all_lock);
	list_add_tail(&c->node, &fake_clients);
	mutex_unlock(&fake_clients_lock);

	if (invalidate_callback)
		*invalidate_callback = fake_invalidate;

	pr_info("registered peer client %s version %s ex=%d flags=0x%x invalidate=%d\n",
		c->name, c->version, c->ex, c->flags, c->invalidating);
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
	if (found)
		list_del(&found->node);
	mutex_unlock(&fake_clients_lock);

	if (!found) {
		fake_violation("unregister with an unknown or already unregistered reg_handle %p",
			       reg_handle);
		return;
	}
	c = found;

	/* Like MLNX_OFED: no forced invalidation, just wait for the users. */
	left = atomic_read(&c->nr_mrs);
	if (left)
		pr_info("unregister of client %s waits for %d registration(s) to be released\n",
			c->name, left);
	while (!wait_event_timeout(c->wq, atomic_read(&c->nr_mrs) == 0, 10 * HZ))
		pr_info("unregister of client %s still waits for %d registration(s)\n",
			c->name, atomic_read(&c->nr_mrs));

	mutex_lock(&fake_clients_lock);
	fake_sysfs_del_client(c);
	mutex_unlock(&fake_clients_lock);

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

	mutex_lock(&fake_clients_lock);
	list_for_each_entry(c, &fake_clients, node)
		seq_printf(m, "name=%s version=%s ex=%d flags=0x%x invalidate=%d regs=%d\n",
			   c->name, c->version, c->ex, c->flags, c->invalidating,
			   atomic_read(&c->nr_mrs));
	mutex_unlock(&fake_clients_lock);
}

int fake_peer_init(void)
{
	return 0;
}

void fake_peer_exit(void)
{
	/* Client modules use our symbols, so they are all gone by now. */
	spin_lock(&fake_all_lock);
	if (!list_empty(&fake_all_clients))
		pr_err("unloading with registered peer clients\n");
	spin_unlock(&fake_all_lock);
}

/*
 * Test hook for "a buggy core": hand @name's client a client_context it never gave out
 * (@value: a stale or foreign pointer). A robust client refuses it instead of dereferencing it.
 */
int fake_client_poke_bogus(const char *name, u64 value)
{
	void *ctx = (void *)(uintptr_t)value;
	const struct peer_memory_client *ops = NULL;
	struct fake_client *c;
	int ret;

	mutex_lock(&fake_clients_lock);
	list_for_each_entry(c, &fake_clients, node) {
		if (!strcmp(c->name, name)) {
			kref_get(&c->ref);
			ops = c->ops;
			break;
		}
	}
	mutex_unlock(&fake_clients_lock);
	if (!ops) {
		pr_err("bogus-context: no client named %s\n", name);
		return -ENOENT;
	}
	ret = ops->get_pages(0x10000, 0x10000, 1, 0, NULL, ctx, 0);
	pr_info("bogus-context: %s get_pages(%p) returned %d\n", name, ctx, ret);
	ret = ops->dma_unmap(NULL, ctx, NULL);
	pr_info("bogus-context: %s dma_unmap(%p) returned %d\n", name, ctx, ret);
	ops->put_pages(NULL, ctx);
	ops->release(ctx);
	pr_info("bogus-context: %s survived put_pages and release of %p\n", name, ctx);
	fake_client_put(c);
	return 0;
}
