// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: a mutex that knows its holder and what the holder is
 * doing, with a timed wait.  The real core's locks (24.07 umem_p->mapping_lock,
 * 4.9 ib_peer_client->lock) are plain mutexes and a deadlocked waiter hangs;
 * the fake reports the deadlock instead (fake-only behaviour).
 */
#include "fake_ib_core.h"

#include <linux/jiffies.h>
#include <linux/string.h>

void fake_xlock_init(struct fake_xlock *l)
{
	mutex_init(&l->mutex);
	init_waitqueue_head(&l->wq);
	spin_lock_init(&l->info_lock);
	l->owner = NULL;
	l->doing = NULL;
}

void fake_xlock_destroy(struct fake_xlock *l)
{
	mutex_destroy(&l->mutex);
}

static void fake_xlock_set_owner(struct fake_xlock *l)
{
	spin_lock(&l->info_lock);
	l->owner = current;
	l->owner_pid = task_pid_nr(current);
	get_task_comm(l->owner_comm, current);
	l->doing = NULL;
	spin_unlock(&l->info_lock);
}

bool fake_xlock_lock_timed(struct fake_xlock *l, unsigned int secs)
{
	if (!secs)
		wait_event(l->wq, mutex_trylock(&l->mutex));
	else if (!wait_event_timeout(l->wq, mutex_trylock(&l->mutex), secs * HZ))
		return false;
	fake_xlock_set_owner(l);
	return true;
}

void fake_xlock_unlock(struct fake_xlock *l)
{
	spin_lock(&l->info_lock);
	l->owner = NULL;
	l->doing = NULL;
	spin_unlock(&l->info_lock);
	mutex_unlock(&l->mutex);
	wake_up(&l->wq);
}

bool fake_xlock_held_by_me(struct fake_xlock *l)
{
	return READ_ONCE(l->owner) == current;
}

void fake_xlock_doing(struct fake_xlock *l, const char *what)
{
	spin_lock(&l->info_lock);
	if (l->owner == current)
		l->doing = what;
	spin_unlock(&l->info_lock);
}

void fake_xlock_describe(struct fake_xlock *l, char *buf, size_t size)
{
	spin_lock(&l->info_lock);
	if (l->owner)
		snprintf(buf, size, "%s/%d (%s)", l->owner_comm, l->owner_pid,
			 l->doing ? l->doing : "between client calls");
	else
		snprintf(buf, size, "nobody (it was just released)");
	spin_unlock(&l->info_lock);
}

void fake_xlock_lock_reporting(struct fake_xlock *l, const char *waiter)
{
	char who[TASK_COMM_LEN + 96];

	if (fake_xlock_lock_timed(l, FAKE_DEADLOCK_SECS))
		return;
	fake_xlock_describe(l, who, sizeof(who));
	atomic_inc(&fake_stat_deadlocks);
	fake_violation("deadlock: %s waited %d s for the lock held by %s; still waiting",
		       waiter, FAKE_DEADLOCK_SECS, who);
	fake_xlock_lock_timed(l, 0);
}
