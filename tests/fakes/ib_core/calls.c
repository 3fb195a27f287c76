// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: "call", a misbehaving core (fake-only, for the
 * bad-input table). It calls one client's operations in the order the
 * command gives, with the arguments a core passes, including ones no real
 * core passes (a zero or wrapping length, another range to get_pages, a
 * second dma_map, release without get_pages), and records what each call
 * returned:
 *
 *   ctl:   call <client> <dev|none> <addr> <len> <op>...
 *          op: acquire, acquire-null (NULL client_context),
 *              get_pages[:<addr>:<len>], dma_map, dma_unmap, put_pages,
 *              release
 *   calls: the outcome of the last call command, "acquire=1 get_pages=-22
 *          release=0" (operation names without their range; void operations
 *          show 0)
 *
 * The context the last acquire returned goes to the later operations, and
 * one zeroed sg_table is kept across them, as a core keeps its umem's.
 * "none" is a DMA device that is not PCI. Runs in the writing process,
 * which must own the GPU memory. No MR is made and no invalidation can
 * reach it (core_context 0).
 */
#include "fake_ib_core.h"

#include <linux/seq_file.h>

#define FAKE_CALLS_OUT	256

static DEFINE_MUTEX(fake_calls_lock);
static char fake_calls_out[FAKE_CALLS_OUT];

/* "get_pages" or "get_pages:<addr>:<len>" */
static int fake_calls_range(const char *op, u64 *addr, u64 *len)
{
	char buf[64], *cur = buf, *a, *l;

	if (!op[9])
		return 0;
	if (op[9] != ':' || strscpy(buf, op + 10, sizeof(buf)) < 0)
		return -EINVAL;
	a = strsep(&cur, ":");
	l = cur;
	if (!l || kstrtou64(a, 0, addr) || kstrtou64(l, 0, len))
		return -EINVAL;
	return 0;
}

static int fake_calls_one(struct fake_client *c, const char *op, u64 addr,
			  u64 len, struct device *dev, struct sg_table *sgt,
			  void **ctx, int *ret)
{
	const struct peer_memory_client *ops = c->ops;
	int nmap = 0;

	if (!strcmp(op, "acquire")) {
		*ctx = NULL;
		*ret = ops->acquire(addr, len, NULL, NULL, ctx);
	} else if (!strcmp(op, "acquire-null")) {
		*ret = ops->acquire(addr, len, NULL, NULL, NULL);
	} else if (str_has_prefix(op, "get_pages")) {
		if (fake_calls_range(op, &addr, &len))
			return -EINVAL;
		*ret = ops->get_pages(addr, len, 1, 0, NULL, *ctx, 0);
	} else if (!strcmp(op, "dma_map")) {
		*ret = ops->dma_map(sgt, *ctx, dev, 0, &nmap);
	} else if (!strcmp(op, "dma_unmap")) {
		*ret = ops->dma_unmap(sgt, *ctx, dev);
	} else if (!strcmp(op, "put_pages")) {
		ops->put_pages(sgt, *ctx);
		*ret = 0;
	} else if (!strcmp(op, "release")) {
		ops->release(*ctx);
		*ret = 0;
	} else {
		return -EINVAL;
	}
	return 0;
}

int fake_calls(int argc, char **argv)
{
	struct sg_table sgt = {};
	struct fake_nic *nic = NULL;
	struct fake_client *c;
	struct device *dev;
	void *ctx = NULL;
	u64 addr, len;
	char *out;
	size_t n = 0;
	int i, ret = 0;

	if (argc < 6) {
		pr_err("ctl: usage: call <client> <dev|none> <addr> <len> <op>...\n");
		return -EINVAL;
	}
	if (kstrtou64(argv[3], 0, &addr) || kstrtou64(argv[4], 0, &len)) {
		pr_err("ctl: call: bad address or length\n");
		return -EINVAL;
	}
	c = fake_client_by_name(argv[1]);
	if (!c) {
		pr_err("call: no client named %s\n", argv[1]);
		return -ENOENT;
	}
	if (!strcmp(argv[2], "none")) {
		dev = fake_none_dev;
	} else {
		nic = fake_nic_get(argv[2]);
		if (!nic) {
			pr_err("call: no NIC named %s\n", argv[2]);
			fake_client_put(c);
			return -ENODEV;
		}
		dev = fake_nic_device(nic);
	}
	out = kzalloc(FAKE_CALLS_OUT, GFP_KERNEL);
	if (!out) {
		ret = -ENOMEM;
		goto put;
	}
	for (i = 5; i < argc; i++) {
		int r;

		if (fake_calls_one(c, argv[i], addr, len, dev, &sgt, &ctx, &r)) {
			pr_err("call: unknown operation '%s'\n", argv[i]);
			ret = -EINVAL;
			break;
		}
		/* The operation's name only: "get_pages", not its range. */
		n += scnprintf(out + n, FAKE_CALLS_OUT - n, "%s%.*s=%d",
			       n ? " " : "", (int)strcspn(argv[i], ":"),
			       argv[i], r);
	}
	pr_info("call %s: %s\n", c->name, out);
	mutex_lock(&fake_calls_lock);
	strscpy(fake_calls_out, out, sizeof(fake_calls_out));
	mutex_unlock(&fake_calls_lock);
	kfree(out);
put:
	if (nic)
		fake_nic_put(nic);
	fake_client_put(c);
	return ret;
}

void fake_calls_show(struct seq_file *m)
{
	mutex_lock(&fake_calls_lock);
	seq_printf(m, "%s\n", fake_calls_out);
	mutex_unlock(&fake_calls_lock);
}
