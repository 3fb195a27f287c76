// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: "bench", a timed loop of one registration's client
 * calls in MLNX_OFED 5.x's order (fake-only, for make bench): acquire (the
 * core's peer client lookup), get_pages, dma_map and get_page_size,
 * dma_unmap, put_pages, release. No MR, no checks of the fake's own: only
 * the client is timed.
 *
 *   ctl: bench <tag> <dev> <addr> <len> <iterations>
 *   bench: one line per run since "bench clear", key=value, nanoseconds
 *          per iteration as means; start_ns/end_ns for runs in parallel.
 * Runs in the writing process, which must own the GPU memory.
 */
#include "fake_ib_core.h"

#include <linux/ktime.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

enum { FB_ACQUIRE, FB_GET_PAGES, FB_DMA_MAP, FB_DMA_UNMAP, FB_PUT_PAGES,
	FB_RELEASE, FB_NR };
static const char *const fake_bench_names[FB_NR] = {
	"acquire", "get_pages", "dma_map", "dma_unmap", "put_pages", "release",
};

static struct fake_results fake_bench_results = FAKE_RESULTS_INIT(fake_bench_results);

static int fake_bench_one(struct fake_client **cp, void **ctx, u64 addr,
			  u64 len, struct device *dma_dev, u64 *t,
			  unsigned int *nents)
{
	struct sg_table sgt = {};
	struct fake_client *c;
	int ret, n = 0;

	t[0] = ktime_get_ns();
	c = fake_client_acquire(0, addr, len, false, ctx);
	if (!c)
		return -EFAULT;
	*cp = c;
	t[1] = ktime_get_ns();
	ret = c->ops->get_pages(addr, len, 1, 0, NULL, *ctx, 0);
	if (ret)
		goto release;
	t[2] = ktime_get_ns();
	ret = c->ops->dma_map(&sgt, *ctx, dma_dev, 0, &n);
	if (ret)
		goto put;
	if (c->ops->get_page_size)
		c->ops->get_page_size(*ctx);
	*nents = n;
	t[3] = ktime_get_ns();
	c->ops->dma_unmap(&sgt, *ctx, dma_dev);
	t[4] = ktime_get_ns();
put:
	c->ops->put_pages(&sgt, *ctx);
	t[5] = ktime_get_ns();
release:
	fake_client_release_ctx(c, *ctx);
	fake_client_put(c);
	t[6] = ktime_get_ns();
	return ret;
}

int fake_bench(const char *tag, const char *devname, u64 addr, u64 len,
	       unsigned long iters)
{
	u64 sum[FB_NR] = {}, t[FB_NR + 1], start, end;
	unsigned int nents = 0;
	struct fake_nic *nic;
	unsigned long it;
	int i, ret = 0;
	char *line;
	size_t n;

	nic = fake_nic_get(devname);
	if (!nic) {
		pr_err("bench: no NIC named %s\n", devname);
		return -ENODEV;
	}
	start = ktime_get_ns();
	for (it = 0; it < iters; it++) {
		struct fake_client *c = NULL;
		void *ctx = NULL;

		ret = fake_bench_one(&c, &ctx, addr, len, fake_nic_device(nic),
				     t, &nents);
		if (ret)
			break;
		for (i = 0; i < FB_NR; i++)
			sum[i] += t[i + 1] - t[i];
		cond_resched();
	}
	end = ktime_get_ns();
	fake_nic_put(nic);
	if (ret) {
		pr_err("bench %s: iteration %lu failed: %d\n", tag, it, ret);
		return ret;
	}

	line = kmalloc(512, GFP_KERNEL);
	if (!line)
		return -ENOMEM;
	n = scnprintf(line, 512, "bench tag=%s tid=%d len=0x%llx iters=%lu nents=%u start_ns=%llu end_ns=%llu",
		      tag, current->pid, len, iters, nents, start, end);
	for (i = 0; i < FB_NR; i++)
		n += scnprintf(line + n, 512 - n, " %s_ns=%llu",
			       fake_bench_names[i], div_u64(sum[i], iters));
	n += scnprintf(line + n, 512 - n, "\n");
	ret = fake_results_add(&fake_bench_results, line, n);
	kfree(line);
	return ret;
}

void fake_bench_clear(void)
{
	fake_results_clear(&fake_bench_results);
}

void fake_bench_show(struct seq_file *m)
{
	fake_results_show(&fake_bench_results, m);
}

void fake_bench_exit(void)
{
	fake_results_free(&fake_bench_results);
}
