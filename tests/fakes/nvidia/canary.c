// SPDX-License-Identifier: GPL-2.0
/*
 * Canaries: each plants one kind of kernel report on purpose, so that the test harness can
 * show that a report of that kind, wherever it happens, fails the run that met it
 * (tests/scenarios/31-canaries.sh). Nothing of the real driver; no other command uses them.
 *
 *   canary warn | kasan | lockdep | ubsan | list | violation | hung <seconds>
 */
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "fake_nvidia.h"

static DEFINE_MUTEX(fnv_canary_a);
static DEFINE_MUTEX(fnv_canary_b);
/* Read at run time, so that no compiler sees the index coming. */
static volatile int fnv_canary_index = 4;

/* A read after kfree: KASAN's use-after-free report. */
static void fnv_canary_kasan(void)
{
	char *p = kmalloc(32, GFP_KERNEL);

	if (!p)
		return;
	kfree(p);
	pr_info("fake_nvidia: canary: read after free: %d\n", READ_ONCE(p[8]));
}

/* A then B, later B then A, in one thread: lockdep's circular dependency (no real deadlock). */
static void fnv_canary_lockdep(void)
{
	mutex_lock(&fnv_canary_a);
	mutex_lock(&fnv_canary_b);
	mutex_unlock(&fnv_canary_b);
	mutex_unlock(&fnv_canary_a);
	mutex_lock(&fnv_canary_b);
	mutex_lock(&fnv_canary_a);
	mutex_unlock(&fnv_canary_a);
	mutex_unlock(&fnv_canary_b);
}

/* An index past the end of an array: UBSAN's array-index-out-of-bounds. */
static noinline int fnv_canary_ubsan(int i)
{
	int a[4] = { 1, 2, 3, 4 };

	return a[i];
}

/* A list_add whose neighbour does not point back: DEBUG_LIST's list_add corruption. */
static void fnv_canary_list(void)
{
	struct list_head head, other, entry;

	INIT_LIST_HEAD(&head);
	INIT_LIST_HEAD(&other);
	head.next = &other; /* other.prev is not &head */
	list_add(&entry, &head);
}

int fnv_canary_command(int argc, char **argv)
{
	unsigned int secs;

	if (argc == 2 && !strcmp(argv[1], "warn")) {
		WARN(1, "fake_nvidia: canary: a planted WARN\n");
	} else if (argc == 2 && !strcmp(argv[1], "kasan")) {
		fnv_canary_kasan();
	} else if (argc == 2 && !strcmp(argv[1], "lockdep")) {
		fnv_canary_lockdep();
	} else if (argc == 2 && !strcmp(argv[1], "ubsan")) {
		pr_info("fake_nvidia: canary: a[4] = %d\n", fnv_canary_ubsan(fnv_canary_index));
	} else if (argc == 2 && !strcmp(argv[1], "list")) {
		fnv_canary_list();
	} else if (argc == 2 && !strcmp(argv[1], "violation")) {
		fnv_violation("canary: a planted violation\n");
	} else if (argc == 3 && !strcmp(argv[1], "hung") && !kstrtouint(argv[2], 0, &secs)) {
		/* The writing task sleeps uninterruptibly (D state): khungtaskd reports it. */
		schedule_timeout_uninterruptible(secs * HZ);
	} else {
		pr_err("ctl: usage: canary warn|kasan|lockdep|ubsan|list|violation|hung <seconds>\n");
		return -EINVAL;
	}
	return 0;
}
