// SPDX-License-Identifier: GPL-2.0
/*
 * Misbehaving clients: each command is one client bug, written as a client would write it,
 * through the exported API only (the "cudaMalloc"/"cudaFree" of the GPU application aside). The
 * double must report each one as the real driver's failure would show: a KASAN use-after-free
 * or a FAKE-VIOLATION. Each stands for a place where the double was once more lenient than the
 * real driver (tests/fakes/INTERFACE.md, "Misbehaving clients"); tests/canaries/ runs them and
 * passes only when each failed the scenario that ran it. No other command uses them.
 *
 *   misuse read-failed-table     reads the table a failed get_pages left behind
 *   misuse put-in-callback       calls put_pages from inside its own free callback
 *   misuse unmap-after-callback  lets its free callback return while its own dma_unmap_pages
 *                                is still in flight in another thread
 *   misuse put-twice             puts one table from two threads at once
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/pci.h>

#include "fake_nvidia.h"

/* The bad client's "cudaMalloc": two pages far from the scenarios' own addresses. */
#define MISUSE_VA	0x6d0000000000ULL
#define MISUSE_LEN	(2 * FNV_PAGE_SIZE)

struct misuse_pin {
	struct nvidia_p2p_page_table *pt;
	struct nvidia_p2p_dma_mapping *mapping;
	struct pci_dev *peer;
	struct completion done;	/* the second thread's call returned */
	int ret;
	bool put_in_callback;
};

static void misuse_noop_callback(void *data)
{
}

/*
 * The free callback of put-in-callback and unmap-after-callback. r470 leaves the freeing to
 * the client (Mellanox/nv_peer_memory frees the mapping and the table in its callback).
 */
static void misuse_callback(void *data)
{
	struct misuse_pin *p = data;
	int ret;

	if (p->put_in_callback) {
		ret = nvidia_p2p_put_pages(0, 0, MISUSE_VA, p->pt);
		pr_info("misuse: put_pages from inside the free callback returned %d\n", ret);
	}
#if !FNV_DRIVER_FREES
	if (p->mapping)
		nvidia_p2p_free_dma_mapping(p->mapping);
	nvidia_p2p_free_page_table(p->pt);
#endif
}

/* Wait until @n threads sit in an injected stall (30 s at most). */
static int misuse_wait_stalls(int n)
{
	int i;

	for (i = 0; i < 3000; i++) {
		if (fnv_inject_stalling() >= n)
			return 0;
		msleep(10);
	}
	pr_err("misuse: the second thread never reached its injected stall\n");
	return -ETIMEDOUT;
}

static int misuse_inject(const char *op, const char *what)
{
	char *argv[] = { "inject", (char *)op, (char *)what };

	return fnv_inject_command(ARRAY_SIZE(argv), argv);
}

static void misuse_wake(void)
{
	char *argv[] = { "inject", "wake" };

	fnv_inject_command(ARRAY_SIZE(argv), argv);
}

/* A failed get_pages may leave *page_table at freed memory (nv-p2p.c 515-595); this reads it. */
static noinline int fnv_misuse_read_failed_table(void)
{
	struct nvidia_p2p_page_table *pt = NULL;
	static int data;
	int ret;

	/* Nothing is allocated at MISUSE_VA: the lookup fails. */
	ret = nvidia_p2p_get_pages(0, 0, MISUSE_VA, FNV_PAGE_SIZE, &pt, misuse_noop_callback, &data);
	if (!ret) {
		pr_err("misuse: get_pages of unallocated memory succeeded\n");
		nvidia_p2p_put_pages(0, 0, MISUSE_VA, pt);
		return -EINVAL;
	}
	if (!pt) {
		pr_err("misuse: get_pages failed (%d) and left the pointer NULL\n", ret);
		return -EINVAL;
	}
	pr_info("misuse: get_pages failed (%d); the client reads its table anyway: %u entries\n",
		ret, READ_ONCE(pt->entries));
	return 0;
}

static int misuse_unmap_thread(void *data)
{
	struct misuse_pin *p = data;

	p->ret = nvidia_p2p_dma_unmap_pages(p->peer, p->pt, p->mapping);
	complete(&p->done);
	return 0;
}

/* The second put: waits until the first one sits in its stall, holding the API lock. */
static int misuse_late_put_thread(void *data)
{
	struct misuse_pin *p = data;

	misuse_wait_stalls(1);
	p->ret = nvidia_p2p_put_pages(0, 0, MISUSE_VA, p->pt);
	complete(&p->done);
	return 0;
}

/*
 * Pin MISUSE_VA with misuse_callback and, if @map, map it for GPU 0's own device. On success
 * the caller ends with misuse_unpin().
 */
static int misuse_pin(struct misuse_pin *p, bool map)
{
	struct fnv_gpu *gpu;
	int ret;

	init_completion(&p->done);
	mutex_lock(&fnv_lock);
	gpu = fnv_gpu_find(0);
	p->peer = gpu ? pci_dev_get(gpu->pdev) : NULL;
	mutex_unlock(&fnv_lock);
	if (!p->peer)
		return -ENODEV;
	ret = fnv_buffer_alloc(MISUSE_VA, MISUSE_LEN, FNV_LAYOUT_CONTIGUOUS, 0);
	if (ret)
		goto err_put_dev;
	ret = nvidia_p2p_get_pages(0, 0, MISUSE_VA, MISUSE_LEN, &p->pt, misuse_callback, p);
	if (!ret && map)
		ret = nvidia_p2p_dma_map_pages(p->peer, p->pt, &p->mapping);
	if (!ret)
		return 0;
	pr_err("misuse: cannot pin and map its buffer (%d)\n", ret);
	fnv_buffer_free(MISUSE_VA);
err_put_dev:
	pci_dev_put(p->peer);
	return ret;
}

/* cudaFree: the callback runs if the pin is still there. */
static int misuse_unpin(struct misuse_pin *p)
{
	int ret = fnv_buffer_free(MISUSE_VA);

	pci_dev_put(p->peer);
	return ret;
}

/*
 * Start @fn in a thread and wait until it sits in the stall armed for it. False when no thread
 * started (the caller must not wait for it).
 */
static bool misuse_second_thread(struct misuse_pin *p, int (*fn)(void *))
{
	struct task_struct *task = kthread_run(fn, p, "fnv-misuse");

	if (IS_ERR(task)) {
		pr_err("misuse: cannot start its second thread (%ld)\n", PTR_ERR(task));
		return false;
	}
	misuse_wait_stalls(1);
	return true;
}

static int misuse_unmap_after_callback(void)
{
	struct misuse_pin p = {};
	int ret = misuse_pin(&p, true);
	bool started;

	if (ret)
		return ret;
	/* The unmap stalls after its entry until woken; its table dies meanwhile. */
	ret = misuse_inject("dma_unmap_pages", "sleep:60000");
	started = !ret && misuse_second_thread(&p, misuse_unmap_thread);
	/* cudaFree: the callback returns at once instead of waiting for the unmap in flight. */
	fnv_buffer_free(MISUSE_VA);
	misuse_wake();
	if (started) {
		wait_for_completion(&p.done);
		pr_info("misuse: dma_unmap_pages returned %d after the callback\n", p.ret);
	}
	pci_dev_put(p.peer);
	return started ? 0 : ret ?: -ECHILD;
}

static int misuse_put_in_callback(void)
{
	struct misuse_pin p = { .put_in_callback = true };
	int ret = misuse_pin(&p, false);

	if (ret)
		return ret;
	return misuse_unpin(&p);
}

static int misuse_put_twice(void)
{
	struct misuse_pin p = {};
	struct task_struct *task;
	int ret = misuse_pin(&p, false), mine;

	if (ret)
		return ret;
	/*
	 * This thread's put holds the API lock for 3 s; the second thread's enters meanwhile.
	 * Only the owning process's put finds the pin, so the first is this thread's.
	 */
	ret = misuse_inject("put_pages", "sleep_locked:3000");
	task = ret ? ERR_PTR(ret) : kthread_run(misuse_late_put_thread, &p, "fnv-misuse");
	mine = nvidia_p2p_put_pages(0, 0, MISUSE_VA, p.pt);
	if (IS_ERR(task)) {
		pr_err("misuse: no second put (%ld)\n", PTR_ERR(task));
		ret = PTR_ERR(task);
	} else {
		wait_for_completion(&p.done);
		pr_info("misuse: the two put_pages returned %d and %d\n", mine, p.ret);
	}
	misuse_unpin(&p);
	return ret;
}

int fnv_misuse_command(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "read-failed-table"))
		return fnv_misuse_read_failed_table();
	if (argc == 2 && !strcmp(argv[1], "put-in-callback"))
		return misuse_put_in_callback();
	if (argc == 2 && !strcmp(argv[1], "unmap-after-callback"))
		return misuse_unmap_after_callback();
	if (argc == 2 && !strcmp(argv[1], "put-twice"))
		return misuse_put_twice();
	pr_err("ctl: usage: misuse read-failed-table|put-in-callback|unmap-after-callback|put-twice\n");
	return -EINVAL;
}
