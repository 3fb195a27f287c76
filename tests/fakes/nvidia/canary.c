// SPDX-License-Identifier: GPL-2.0
/*
 * Canaries: each plants one kind of kernel report on purpose, so that the test harness can
 * show that a report of that kind, wherever it happens, fails the run that met it
 * (tests/canaries/). Nothing of the real driver; no other command uses them.
 *
 *   canary warn | kasan | lockdep | ubsan | list | violation | hung <seconds> | rcu-stall |
 *          softlockup | bug-line
 *
 * (An IOMMU fault needs a device that does DMA: the fake ib_core's "canary dmar-fault".)
 */
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/nmi.h>
#include <linux/panic.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/slab.h>
#include <linux/spinlock.h>

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

/*
 * RCU reports a grace period that lasts longer than its stall timeout as "INFO: rcu_sched
 * detected stalls on CPUs/tasks" (or "self-detected stall on CPU"): rcu_cpu_stall_timeout
 * (21 s) plus 5 s with CONFIG_PROVE_RCU (RCU_STALL_DELAY_DELTA), counted in jiffies. The writing
 * task reads under rcu_read_lock() for 30 s of jiffies and asks for a grace period as it starts
 * (an idle machine may need none), which cannot end before it unlocks. Under a loaded TCG host
 * jiffies lose ticks, so that may take a minute or more. The test kernel's RCU is not
 * preemptible (PREEMPT_LAZY), so the reader holds its CPU: it touches the soft lockup
 * watchdog as it spins, so that only RCU complains.
 */
static void fnv_canary_rcu_stall(void)
{
	unsigned long end = jiffies + 30 * HZ;

	rcu_read_lock();
	start_poll_synchronize_rcu();
	while (time_before(jiffies, end)) {
		touch_softlockup_watchdog();
		cpu_relax();
	}
	rcu_read_unlock();
}

/*
 * A CPU that runs kernel code for 20 s without scheduling (twice watchdog_thresh, in
 * local_clock() time) is reported as "watchdog: BUG: soft lockup - CPU#N stuck for NNs!" and
 * taints the kernel L: the writing task spins with a spinlock held, as a free callback stuck
 * under its lock would, until the watchdog has reported it (the taint appears), at most 40 s.
 * If an earlier canary tainted the kernel already, it spins 30 s, past the watchdog's last
 * check (threshold plus its 4 s period).
 */
static DEFINE_SPINLOCK(fnv_canary_spin);

static void fnv_canary_softlockup(void)
{
	bool tainted = test_taint(TAINT_SOFTLOCKUP);
	u64 end = local_clock() + (tainted ? 30 : 40) * NSEC_PER_SEC;

	spin_lock(&fnv_canary_spin);
	while (local_clock() < end && (tainted || !test_taint(TAINT_SOFTLOCKUP)))
		cpu_relax();
	spin_unlock(&fnv_canary_spin);
}

/*
 * The module's own leak guards (the Drop of PageTable and DmaMapping, src/nv_p2p.rs) print
 * these lines when an internal invariant broke. No input makes the module break one, so the
 * canary prints the same text, as the kernel log shows it (the module's name, then the message;
 * this file has no pr_fmt); tests/canaries/canary-vm.sh checks that it covers every "bug:"
 * message in src/.
 */
static void fnv_canary_bug_line(void)
{
	pr_err("nv_peer_mem: bug: page table for va %#llx dropped without being released (pin leaked)\n",
	       0x6d0000000000ULL);
	pr_err("nv_peer_mem: bug: DMA mapping dropped without being released\n");
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
	} else if (argc == 2 && !strcmp(argv[1], "rcu-stall")) {
		fnv_canary_rcu_stall();
	} else if (argc == 2 && !strcmp(argv[1], "softlockup")) {
		fnv_canary_softlockup();
	} else if (argc == 2 && !strcmp(argv[1], "bug-line")) {
		fnv_canary_bug_line();
	} else {
		pr_err("ctl: usage: canary warn|kasan|lockdep|ubsan|list|violation|hung <seconds>|rcu-stall|softlockup|bug-line\n");
		return -EINVAL;
	}
	return 0;
}
