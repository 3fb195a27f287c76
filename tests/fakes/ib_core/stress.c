// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: "stress", races run in the kernel for many
 * iterations (fake-only, for the stress scenarios). Two kernel threads meet
 * at a barrier each iteration and then do one side of the race each; the
 * second side starts after a random delay of up to <jitter> microseconds,
 * so the race lands in every phase of the first side. GPU memory comes from
 * the fake nvidia.ko's own alloc/free (looked up with symbol_get, so this
 * module does not depend on it): the registering thread allocates, so the
 * memory is its process's, as cudaMalloc's is.
 *
 *   ctl:    stress <race> <iterations> <jitter_us> [dev]
 *   stress: one line per run since "stress clear": the race, iterations
 *           and outcomes by kind
 *
 * Races (the side that registers is thread A, cudaFree is thread B):
 *   reg-free      registration (acquire, get_pages, dma_map) vs cudaFree
 *   dereg-free    deregistration vs cudaFree
 *   worker-free   deregistration on a kernel worker vs cudaFree
 *   overlap-free  two registrations of overlapping ranges of one buffer,
 *                 deregistered by A while B frees the buffer
 *   many          A and B each register and deregister their own buffer on
 *                 edu0 and edu1 at once (no free race: concurrency only)
 * Every iteration ends with nothing registered and the buffers freed; the
 * scenario checks the invariants (pins, mappings, contexts, references).
 */
#include "fake_ib_core.h"

#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/delay.h>

/* The fake nvidia.ko's "cudaMalloc" (contiguous layout = 0, GPU 0) and "cudaFree". */
int fnv_buffer_alloc(u64 va, u64 size, int layout, int gpu_index);
int fnv_buffer_free(u64 va);

#define STRESS_VA	0x7e0000000000ULL	/* away from the scenarios' buffers */
#define STRESS_LEN	0x40000ULL		/* 4 GPU pages */
#define STRESS_ID	1000000UL		/* MR ids: away from the scenarios' */

enum stress_race { SR_REG_FREE, SR_DEREG_FREE, SR_WORKER_FREE, SR_OVERLAP_FREE,
	SR_MANY, SR_NR };
static const char *const stress_names[SR_NR] = {
	"reg-free", "dereg-free", "worker-free", "overlap-free", "many",
};

/*
 * Outcome kinds, counted per run. reg_declined: registrations (of the EFAULTs) that a
 * registered client was asked about and declined, the rest found no client at all.
 */
enum { SO_REG_OK, SO_REG_EFAULT, SO_REG_DECLINED, SO_REG_EINVAL, SO_SETUP_FAILED,
	SO_FREE_OK, SO_DEREG_OK, SO_DEREG_GONE, SO_UNEXPECTED, SO_NR };
static const char *const stress_outcomes[SO_NR] = {
	"reg_ok", "reg_efault", "reg_declined", "reg_einval", "setup_reg_failed",
	"free_ok", "dereg_ok", "dereg_already_gone", "unexpected",
};

struct stress_run {
	enum stress_race race;
	unsigned long iters;
	unsigned int jitter_us;
	const char *dev;
	int (*alloc)(u64 va, u64 size, int layout, int gpu_index);
	int (*free)(u64 va);
	wait_queue_head_t wq;
	unsigned long ready[2];		/* iteration each side set up */
	unsigned long done[2];		/* iteration each side finished */
	bool stop;
	atomic_long_t outcome[SO_NR];
	int first_err;			/* first unexpected error, for the log */
};

struct stress_side {
	struct stress_run *r;
	int side;			/* 0 = A, 1 = B */
	bool registered[2];		/* A: MRs made before the barrier */
	struct completion exited;
};

static DEFINE_MUTEX(stress_lock);	/* one run at a time */
static struct fake_results stress_results = FAKE_RESULTS_INIT(stress_results);

static void stress_unexpected(struct stress_run *r, const char *what, int ret)
{
	atomic_long_inc(&r->outcome[SO_UNEXPECTED]);
	if (!cmpxchg(&r->first_err, 0, ret))
		pr_err("stress %s: %s returned %d\n", stress_names[r->race], what, ret);
}

/*
 * What a registration racing cudaFree (or rmmod) may return: 0; -EFAULT, the
 * client's answer for memory that is no longer NVIDIA's (freed before acquire,
 * or during the registration) and the core's when no client is loaded; and on
 * 4.9 only, -EINVAL, the core's own refusal of pages invalidated before
 * activation (core_v4.c, as ib_umem_activate_invalidation_notifier()). Any
 * other errno is unexpected.
 */
static void stress_reg_outcome(struct stress_run *r, int ret)
{
	if (!ret)
		atomic_long_inc(&r->outcome[SO_REG_OK]);
	else if (ret == -EFAULT)
		atomic_long_inc(&r->outcome[SO_REG_EFAULT]);
	else if (ret == -EINVAL && fake_v4())
		atomic_long_inc(&r->outcome[SO_REG_EINVAL]);
	else
		stress_unexpected(r, "reg", ret);
}

static void stress_free(struct stress_run *r, u64 va)
{
	int ret = r->free(va);

	if (ret)
		stress_unexpected(r, "cudaFree", ret);
	else
		atomic_long_inc(&r->outcome[SO_FREE_OK]);
}

/* -ENOENT: MLNX_OFED 4.9 tore the MR down inside the invalidation already. */
static void stress_dereg(struct stress_run *r, unsigned long id, bool worker)
{
	int ret = fake_mr_dereg(id, worker);

	if (!ret)
		atomic_long_inc(&r->outcome[SO_DEREG_OK]);
	else if (ret == -ENOENT)
		atomic_long_inc(&r->outcome[SO_DEREG_GONE]);
	else
		stress_unexpected(r, "dereg", ret);
}

static void stress_reg_dereg(struct stress_run *r, unsigned long id,
			     const char *dev, u64 va, u64 len)
{
	int ret = fake_mr_reg(id, dev, va, len, false, false);

	stress_reg_outcome(r, ret);
	if (!ret)
		stress_dereg(r, id, false);
}

static u64 stress_va(int side)
{
	return STRESS_VA + side * 2 * STRESS_LEN;
}

static unsigned long stress_id(unsigned long i, int n)
{
	return STRESS_ID + 4 * (i % 1000) + n;
}

/* Before the barrier: cudaMalloc (and the registrations a race starts from). */
static int stress_setup(struct stress_side *s, unsigned long i)
{
	struct stress_run *r = s->r;
	u64 va = stress_va(s->side);
	int ret;

	s->registered[0] = s->registered[1] = false;
	if (s->side == 1 && r->race != SR_MANY)
		return 0;
	ret = r->alloc(va, STRESS_LEN, 0, 0);
	if (ret) {
		stress_unexpected(r, "cudaMalloc", ret);
		return ret;
	}
	switch (r->race) {
	case SR_DEREG_FREE:
	case SR_WORKER_FREE:
	case SR_OVERLAP_FREE:
		s->registered[0] = !fake_mr_reg(stress_id(i, 0), r->dev, va,
						STRESS_LEN, false, false);
		if (r->race == SR_OVERLAP_FREE)
			s->registered[1] = !fake_mr_reg(stress_id(i, 1), r->dev,
							va + 0x18000, 0x20000,
							false, false);
		if (!s->registered[0] ||
		    (r->race == SR_OVERLAP_FREE && !s->registered[1]))
			atomic_long_inc(&r->outcome[SO_SETUP_FAILED]);
		break;
	default:
		break;
	}
	return 0;
}

/* After the barrier: this side of the race. */
static void stress_race(struct stress_side *s, unsigned long i)
{
	struct stress_run *r = s->r;
	u64 va = stress_va(s->side);

	if (r->race == SR_MANY) {
		stress_reg_dereg(r, stress_id(i, s->side), s->side ? "edu1" : "edu0",
				 va, STRESS_LEN);
		stress_free(r, va);
		return;
	}
	if (s->side == 1) {
		if (r->jitter_us)
			udelay(get_random_u32_below(r->jitter_us + 1));
		stress_free(r, stress_va(0));
		return;
	}
	switch (r->race) {
	case SR_REG_FREE:
		/* Unaligned ends: first and last page trimmed. */
		stress_reg_dereg(r, stress_id(i, 0), r->dev, va + 0x1000,
				 STRESS_LEN - 0x2000);
		break;
	default:
		if (s->registered[0])
			stress_dereg(r, stress_id(i, 0), r->race == SR_WORKER_FREE);
		if (s->registered[1])
			stress_dereg(r, stress_id(i, 1), false);
		break;
	}
}

/* Both sides reach @count[side] >= i, or the run stops. */
static bool stress_meet(struct stress_side *s, unsigned long *count,
			unsigned long i)
{
	struct stress_run *r = s->r;

	WRITE_ONCE(count[s->side], i);
	wake_up_all(&r->wq);
	wait_event(r->wq, READ_ONCE(count[!s->side]) >= i || READ_ONCE(r->stop));
	return !READ_ONCE(r->stop);
}

static int stress_threadfn(void *data)
{
	struct stress_side *s = data;
	struct stress_run *r = s->r;
	unsigned long i;

	for (i = 1; i <= r->iters; i++) {
		if (stress_setup(s, i)) {
			WRITE_ONCE(r->stop, true);
			break;
		}
		if (!stress_meet(s, r->ready, i))
			break;
		stress_race(s, i);
		if (!stress_meet(s, r->done, i))
			break;
		if (!(i % 64))
			cond_resched();
	}
	WRITE_ONCE(r->stop, true);
	wake_up_all(&r->wq);
	complete(&s->exited);
	return 0;
}

/* Whatever a stopped run left: MRs of its ids, its buffers. */
static void stress_sweep(struct stress_run *r)
{
	unsigned long id;
	int side;

	for (id = STRESS_ID; id < STRESS_ID + 4000; id++)
		if (fake_mr_exists(id) && !fake_mr_dereg(id, false))
			pr_info("stress: swept MR %lu\n", id);
	for (side = 0; side < 2; side++)
		if (r->free(stress_va(side)) == 0)
			pr_info("stress: swept the buffer at 0x%llx\n", stress_va(side));
}

static void stress_record(struct stress_run *r, unsigned long iters, s64 ms)
{
	char *line;
	size_t n;
	int k;

	line = kmalloc(512, GFP_KERNEL);
	if (!line)
		return;
	n = scnprintf(line, 512, "stress race=%s iterations=%lu jitter_us=%u ms=%lld",
		      stress_names[r->race], iters, r->jitter_us, ms);
	for (k = 0; k < SO_NR; k++)
		n += scnprintf(line + n, 512 - n, " %s=%ld", stress_outcomes[k],
			       atomic_long_read(&r->outcome[k]));
	n += scnprintf(line + n, 512 - n, "\n");
	pr_info("%s", line);
	if (fake_results_add(&stress_results, line, n))
		pr_warn("stress: no room to keep the line above; read stress and clear it\n");
	kfree(line);
}

int fake_stress(const char *race, unsigned long iters, unsigned int jitter_us,
		const char *dev)
{
	struct stress_side sides[2] = {};
	struct stress_run *r;
	unsigned long finished;
	long declined0;
	ktime_t t0;
	int ret, i;

	ret = match_string(stress_names, SR_NR, race);
	if (ret < 0) {
		pr_err("stress: unknown race '%s'\n", race);
		return -EINVAL;
	}
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return -ENOMEM;
	r->race = ret;
	r->iters = iters;
	r->jitter_us = jitter_us;
	r->dev = dev;
	init_waitqueue_head(&r->wq);
	r->alloc = symbol_get(fnv_buffer_alloc);
	r->free = symbol_get(fnv_buffer_free);
	if (!r->alloc || !r->free) {
		pr_err("stress: needs the fake nvidia.ko (fnv_buffer_alloc/free)\n");
		ret = -ENOENT;
		goto put;
	}

	mutex_lock(&stress_lock);
	/* Only the run's own registrations are made meanwhile (the scenario waits for it). */
	declined0 = atomic_long_read(&fake_stat_declined);
	t0 = ktime_get();
	for (i = 0; i < 2; i++) {
		struct task_struct *t;

		sides[i].r = r;
		sides[i].side = i;
		init_completion(&sides[i].exited);
		t = kthread_run(stress_threadfn, &sides[i], "stress-%c", 'a' + i);
		if (IS_ERR(t)) {
			ret = PTR_ERR(t);
			WRITE_ONCE(r->stop, true);
			wake_up_all(&r->wq);
			while (i--)
				wait_for_completion(&sides[i].exited);
			mutex_unlock(&stress_lock);
			goto put;
		}
	}
	for (i = 0; i < 2; i++)
		wait_for_completion(&sides[i].exited);
	atomic_long_set(&r->outcome[SO_REG_DECLINED],
			atomic_long_read(&fake_stat_declined) - declined0);
	finished = min(READ_ONCE(r->done[0]), READ_ONCE(r->done[1]));
	if (finished < iters)
		stress_sweep(r);
	stress_record(r, finished, ktime_ms_delta(ktime_get(), t0));
	mutex_unlock(&stress_lock);
	ret = r->first_err;
put:
	if (r->alloc)
		symbol_put(fnv_buffer_alloc);
	if (r->free)
		symbol_put(fnv_buffer_free);
	kfree(r);
	return ret;
}

void fake_stress_clear(void)
{
	fake_results_clear(&stress_results);
}

void fake_stress_show(struct seq_file *m)
{
	fake_results_show(&stress_results, m);
}

void fake_stress_exit(void)
{
	fake_results_free(&stress_results);
}
