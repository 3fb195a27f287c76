// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: /sys/kernel/mm/memory_peers/<client>/ counters.
 *
 * Whether it exists at all: module parameter memory_peers (main.c).
 * mm_kobj is not exported to modules since 6.6, so the /sys/kernel/mm
 * kobject is found through its sysfs node.  Attribute values are printed
 * as the real show functions do ("%llu\n", version "%s\n").
 */
#include "fake_ib_core.h"

#include <linux/kernfs.h>
#include <linux/kobject.h>
#include <linux/string.h>
#include <linux/sysfs.h>

enum {
	FAKE_ST_ALLOC_MRS,
	FAKE_ST_DEALLOC_MRS,
	FAKE_ST_REG_PAGES,
	FAKE_ST_DEREG_PAGES,
	FAKE_ST_REG_BYTES,
	FAKE_ST_DEREG_BYTES,
	FAKE_ST_FREE_CALLBACKS,
	FAKE_ST_COUNT,
	FAKE_ST_VERSION = -1,
};

struct fake_peer_attr {
	struct kobj_attribute attr;
	int idx;
};

/* Under fake_clients_lock. */
static struct kobject *fake_mm_kobj;
static struct kobject *fake_peers_kobj;

static ssize_t fake_peer_attr_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	const struct fake_peer_attr *a = container_of(attr, struct fake_peer_attr, attr);
	char version[IB_PEER_MEMORY_VER_MAX];
	u64 vals[FAKE_ST_COUNT];

	if (!fake_client_stats_by_kobj(kobj, version, vals, FAKE_ST_COUNT))
		return -ENODEV;
	if (a->idx == FAKE_ST_VERSION)
		return sysfs_emit(buf, "%s\n", version);
	return sysfs_emit(buf, "%llu\n", vals[a->idx]);
}

#define FAKE_PEER_ATTR(_name, _idx)                                         \
	static struct fake_peer_attr fake_attr_##_name = {                 \
		.attr = __ATTR(_name, 0444, fake_peer_attr_show, NULL),    \
		.idx = _idx,                                               \
	}

FAKE_PEER_ATTR(version, FAKE_ST_VERSION);
FAKE_PEER_ATTR(num_alloc_mrs, FAKE_ST_ALLOC_MRS);
FAKE_PEER_ATTR(num_dealloc_mrs, FAKE_ST_DEALLOC_MRS);
FAKE_PEER_ATTR(num_reg_pages, FAKE_ST_REG_PAGES);
FAKE_PEER_ATTR(num_dereg_pages, FAKE_ST_DEREG_PAGES);
FAKE_PEER_ATTR(num_reg_bytes, FAKE_ST_REG_BYTES);
FAKE_PEER_ATTR(num_dereg_bytes, FAKE_ST_DEREG_BYTES);
FAKE_PEER_ATTR(num_free_callbacks, FAKE_ST_FREE_CALLBACKS);

static struct attribute *fake_peer_attrs[] = {
	&fake_attr_version.attr.attr,
	&fake_attr_num_alloc_mrs.attr.attr,
	&fake_attr_num_dealloc_mrs.attr.attr,
	&fake_attr_num_reg_pages.attr.attr,
	&fake_attr_num_dereg_pages.attr.attr,
	&fake_attr_num_reg_bytes.attr.attr,
	&fake_attr_num_dereg_bytes.attr.attr,
	&fake_attr_num_free_callbacks.attr.attr,
	NULL,
};

static const struct attribute_group fake_peer_group = {
	.attrs = fake_peer_attrs,
};

static struct kobject *fake_find_mm_kobj(void)
{
	struct kernfs_node *kn;
	struct kobject *kobj = NULL;

	if (!kernel_kobj || !kernel_kobj->sd)
		return NULL;
	kn = kernfs_find_and_get(kernel_kobj->sd, "mm");
	if (!kn)
		return NULL;
	/* A kobject's sysfs directory node points back at the kobject. */
	if (kernfs_type(kn) == KERNFS_DIR && kn->priv)
		kobj = kobject_get(kn->priv);
	kernfs_put(kn);
	return kobj;
}

/* Does /sys/kernel/mm/<name> exist (e.g. an old memory_peers kept by a child)? */
static bool fake_mm_has(const char *name)
{
	struct kernfs_node *kn;

	if (!fake_mm_kobj || !fake_mm_kobj->sd)
		return false;
	kn = kernfs_find_and_get(fake_mm_kobj->sd, name);
	if (!kn)
		return false;
	kernfs_put(kn);
	return true;
}

/*
 * 24.07 (backport 0019, under HAVE_MM_KOBJ_EXPORTED): at client
 * registration, create memory_peers if the core holds none, then
 * memory_peers/<name>; any failure refuses the client.  4.9
 * create_peer_sysfs(): memory_peers is created when the client list is
 * empty.  Duplicates are refused up front (the real kobject_add() would
 * also print a stack dump).
 */
int fake_sysfs_add_client(struct fake_client *c, bool first)
{
	struct kobject *kobj;
	int ret;

	lockdep_assert_held(&fake_clients_lock);
	if (!fake_memory_peers_enabled())
		return 0;

	if (fake_v4() ? first : !fake_peers_kobj) {
		if (!fake_mm_kobj)
			fake_mm_kobj = fake_find_mm_kobj();
		if (!fake_mm_kobj)
			return -ENOENT;
		if (fake_mm_has("memory_peers")) {
			pr_err("/sys/kernel/mm/memory_peers still exists (kept by an unregistering client); the real core fails here too\n");
			return -EEXIST;
		}
		fake_peers_kobj = kobject_create_and_add("memory_peers", fake_mm_kobj);
		if (!fake_peers_kobj)
			return -ENOMEM;
	}

	if (!c->name[0] || fake_client_name_has_sysfs(c->name)) {
		pr_err("memory_peers: a client named '%s' already has an entry (or the name is empty)\n",
		       c->name);
		ret = -EEXIST;
		goto err_parent;
	}
	kobj = kobject_create_and_add(c->name, fake_peers_kobj);
	if (!kobj) {
		ret = -ENOMEM;
		goto err_parent;
	}
	ret = sysfs_create_group(kobj, &fake_peer_group);
	if (ret) {
		kobject_put(kobj);
		goto err_parent;
	}
	fake_client_set_kobj(c, kobj);
	return 0;

err_parent:
	if (first)
		fake_sysfs_put_parent();
	return ret;
}

void fake_sysfs_del_client(struct fake_client *c)
{
	struct kobject *kobj = c->kobj;

	if (!kobj)
		return;
	fake_client_set_kobj(c, NULL);
	sysfs_remove_group(kobj, &fake_peer_group);
	kobject_put(kobj);
}

/* The core drops memory_peers when its client list becomes empty. */
void fake_sysfs_put_parent(void)
{
	lockdep_assert_held(&fake_clients_lock);
	if (fake_peers_kobj) {
		kobject_put(fake_peers_kobj);
		fake_peers_kobj = NULL;
	}
}

void fake_sysfs_exit(void)
{
	mutex_lock(&fake_clients_lock);
	fake_sysfs_put_parent();
	if (fake_mm_kobj) {
		kobject_put(fake_mm_kobj);
		fake_mm_kobj = NULL;
	}
	mutex_unlock(&fake_clients_lock);
}
