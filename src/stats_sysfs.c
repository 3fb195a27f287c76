// SPDX-License-Identifier: GPL-2.0
/*
 * The C half of the counters: /sys/module/nv_peer_mem/stats/<client>/<counter>, one read-only
 * file per counter (0444). Names and values come from stats.rs, which owns the counters.
 */
#include <linux/kobject.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sysfs.h>

#include "glue.h"

#define NVPM_CLIENTS 2

struct nvpm_stat_attr {
	struct kobj_attribute attr;
	int client;
	int index;
};

struct nvpm_stats_client {
	struct kobject *kobj;
	struct attribute_group group;
	struct attribute **attrs;
	struct nvpm_stat_attr *stat_attrs;
};

static struct kobject *nvpm_stats_kobj;
static struct nvpm_stats_client nvpm_stats_clients[NVPM_CLIENTS];

static ssize_t nvpm_stat_show(struct kobject *kobj, struct kobj_attribute *attr, char *buf)
{
	struct nvpm_stat_attr *sa = container_of(attr, struct nvpm_stat_attr, attr);

	return sysfs_emit(buf, "%llu\n", nvpm_stats_value(sa->client, sa->index));
}

int nvpm_sysfs_stats_create(void)
{
	nvpm_stats_kobj = kobject_create_and_add("stats", &THIS_MODULE->mkobj.kobj);
	if (!nvpm_stats_kobj) {
		pr_err("nv_peer_mem: cannot create /sys/module/nv_peer_mem/stats\n");
		return -ENOMEM;
	}
	return 0;
}

static void nvpm_stats_client_free(struct nvpm_stats_client *c)
{
	if (c->kobj) {
		sysfs_remove_group(c->kobj, &c->group);
		kobject_put(c->kobj);
	}
	kfree(c->attrs);
	kfree(c->stat_attrs);
	memset(c, 0, sizeof(*c));
}

int nvpm_sysfs_stats_add_client(int client, const char *name)
{
	struct nvpm_stats_client *c;
	int n = 0, i, ret;

	if (client < 0 || client >= NVPM_CLIENTS || !nvpm_stats_kobj)
		return -EINVAL;
	c = &nvpm_stats_clients[client];
	while (nvpm_stats_counter_name(n))
		n++;
	c->stat_attrs = kcalloc(n, sizeof(*c->stat_attrs), GFP_KERNEL);
	c->attrs = kcalloc(n + 1, sizeof(*c->attrs), GFP_KERNEL);
	if (!c->stat_attrs || !c->attrs) {
		ret = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < n; i++) {
		struct nvpm_stat_attr *sa = &c->stat_attrs[i];

		sysfs_attr_init(&sa->attr.attr);
		sa->attr.attr.name = nvpm_stats_counter_name(i);
		sa->attr.attr.mode = 0444;
		sa->attr.show = nvpm_stat_show;
		sa->client = client;
		sa->index = i;
		c->attrs[i] = &sa->attr.attr;
	}
	c->group.attrs = c->attrs;
	c->kobj = kobject_create_and_add(name, nvpm_stats_kobj);
	if (!c->kobj) {
		ret = -ENOMEM;
		goto fail;
	}
	ret = sysfs_create_group(c->kobj, &c->group);
	if (ret) {
		kobject_put(c->kobj);
		c->kobj = NULL;
		goto fail;
	}
	return 0;
fail:
	pr_err("nv_peer_mem: cannot create the counters of client %s: error %d\n", name, ret);
	kfree(c->attrs);
	kfree(c->stat_attrs);
	memset(c, 0, sizeof(*c));
	return ret;
}

void nvpm_sysfs_stats_destroy(void)
{
	int i;

	for (i = 0; i < NVPM_CLIENTS; i++)
		nvpm_stats_client_free(&nvpm_stats_clients[i]);
	kobject_put(nvpm_stats_kobj);
	nvpm_stats_kobj = NULL;
}
