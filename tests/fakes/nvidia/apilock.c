// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: the driver's API lock.
 *
 * Follows NVIDIA/open-gpu-kernel-modules (515.43.04 to 595.45.04):
 *  - src/nvidia/arch/nvalloc/unix/src/osapi.c: rm_p2p_get_pages,
 *    rm_p2p_register_callback, rm_p2p_get_gpu_info,
 *    rm_p2p_get_pages_persistent, rm_p2p_put_pages,
 *    rm_p2p_put_pages_persistent and rm_p2p_dma_map_pages all run under
 *    rmapiLockAcquire(); nv-p2p.c's dma_unmap_pages never enters RM.
 *  - src/nvidia/src/kernel/rmapi/rmapi.c: rmapiLockAcquire() starts with
 *    an owner assert (NV_ASSERT_OR_RETURN(!rmapiLockIsOwner(),
 *    NV_ERR_INVALID_LOCK_STATE)); kernel-open/nvidia/nv-p2p.c maps that
 *    status, absent from its table, to -EIO. So a P2P call made from
 *    inside a free callback (whose thread holds the lock) fails with -EIO.
 *
 * The lock is a hand-made owner + wait queue, so lockdep never sees it:
 * lockdep would otherwise report, on every registration, the class-level
 * inversion between this lock and ib_core's per-buffer mapping lock (the
 * free callback takes the latter under this one). Real deadlocks are found
 * instead by timing every wait: past fnv_deadlock_timeout seconds the call
 * fails with -EDEADLK and logs who holds the lock and what it is doing.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/jiffies.h>
#include <linux/minmax.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "fake_nvidia.h"

#define FNV_DOING_LEN	128

static DEFINE_SPINLOCK(fnv_api_spin);
static DECLARE_WAIT_QUEUE_HEAD(fnv_api_wq);
static struct task_struct *fnv_api_owner;
static pid_t fnv_api_owner_pid;
static char fnv_api_owner_comm[TASK_COMM_LEN];
static char fnv_api_owner_doing[FNV_DOING_LEN];

static bool fnv_api_trylock(void)
{
	bool taken = false;

	spin_lock(&fnv_api_spin);
	if (!fnv_api_owner) {
		fnv_api_owner = current;
		fnv_api_owner_pid = task_pid_nr(current);
		strscpy(fnv_api_owner_comm, current->comm,
			sizeof(fnv_api_owner_comm));
		fnv_api_owner_doing[0] = '\0';
		taken = true;
	}
	spin_unlock(&fnv_api_spin);
	return taken;
}

static void fnv_api_vdoing(const char *fmt, va_list ap)
{
	spin_lock(&fnv_api_spin);
	if (fnv_api_owner == current)
		vsnprintf(fnv_api_owner_doing, sizeof(fnv_api_owner_doing),
			  fmt, ap);
	spin_unlock(&fnv_api_spin);
}

/* The holder says what it is doing now (shown to timed-out waiters). */
void fnv_api_doing(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fnv_api_vdoing(fmt, ap);
	va_end(ap);
}

/*
 * Take the API lock for @op; @fmt describes what the caller will do.
 * Returns 0, -EIO (this thread already holds it: a call from inside a free
 * callback) or -EDEADLK (waited fnv_deadlock_timeout seconds).
 */
int fnv_api_lock(const char *op, const char *fmt, ...)
{
	unsigned int secs = max(READ_ONCE(fnv_deadlock_timeout), 1u);
	char comm[TASK_COMM_LEN], doing[FNV_DOING_LEN];
	va_list ap;
	pid_t pid;
	long left;

	might_sleep();
	if (READ_ONCE(fnv_api_owner) == current) {
		mutex_lock(&fnv_lock);
		fnv_stats.reentry_refused++;
		mutex_unlock(&fnv_lock);
		/*
		 * RM refuses the recursion; nv_p2p_put_pages() then WARNs on any status but OK
		 * and OBJECT_NOT_FOUND (nv-p2p.c 515-595: WARN_ON(status != NV_OK)), which
		 * panics a machine booted with panic_on_warn. The other calls just fail.
		 */
		if (!strcmp(op, "put_pages") || !strcmp(op, "put_pages_persistent"))
			fnv_violation("%s: called from inside a free callback: the real driver WARNs (and returns an error)\n",
				      op);
		else
			pr_warn("%s: refused with -EIO: this thread holds the API lock (called from inside a free callback)\n",
				op);
		return -EIO;
	}

	left = wait_event_timeout(fnv_api_wq, fnv_api_trylock(),
				  (long)secs * HZ);
	if (!left) {
		spin_lock(&fnv_api_spin);
		pid = fnv_api_owner_pid;
		strscpy(comm, fnv_api_owner_comm, sizeof(comm));
		strscpy(doing, fnv_api_owner_doing, sizeof(doing));
		if (!fnv_api_owner) {
			comm[0] = '\0';
			strscpy(doing, "released just now", sizeof(doing));
		}
		spin_unlock(&fnv_api_spin);
		fnv_violation("deadlock: %s waited %u s for the API lock held by %s/%d (%s)\n",
			      op, secs, comm, pid, doing);
		return -EDEADLK;
	}

	va_start(ap, fmt);
	fnv_api_vdoing(fmt, ap);
	va_end(ap);
	return 0;
}

void fnv_api_unlock(void)
{
	spin_lock(&fnv_api_spin);
	WARN_ON_ONCE(fnv_api_owner != current);
	fnv_api_owner = NULL;
	fnv_api_owner_doing[0] = '\0';
	spin_unlock(&fnv_api_spin);
	wake_up_all(&fnv_api_wq);
}
