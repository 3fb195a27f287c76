// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: fault injection, armed through the ctl file and
 * consumed by the next calls of an API function, whatever their outcome.
 * Callers hold no lock when they take a fault: a "sleep" fault stalls the
 * calling thread right here, before the API lock. A "sleep_locked" fault
 * stalls it in fnv_inject_stall_locked(), called right after the API lock
 * was taken. The "callback" op is taken by the free path holding the API
 * lock just before it calls a client's free callback.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/wait.h>

#include "fake_nvidia.h"

struct fnv_inject {
	struct fnv_fault_req req;
	unsigned int skip;	/* calls to let through before the faults */
	unsigned int count;
};

const char *const fnv_op_names[FNV_OP_NR] = {
	[FNV_OP_GET_PAGES] = "get_pages",
	[FNV_OP_GET_PAGES_PERSISTENT] = "get_pages_persistent",
	[FNV_OP_PUT_PAGES] = "put_pages",
	[FNV_OP_PUT_PAGES_PERSISTENT] = "put_pages_persistent",
	[FNV_OP_DMA_MAP_PAGES] = "dma_map_pages",
	[FNV_OP_DMA_UNMAP_PAGES] = "dma_unmap_pages",
	[FNV_OP_FREE_PAGE_TABLE] = "free_page_table",
	[FNV_OP_CALLBACK] = "callback",
};

/*
 * inject_stack=1 (the fault-injection sweep, tests/sweep/): an injected errno also dumps the
 * stack, whose first nv_peer_mem frame names the call site that received it.
 */
static bool fnv_inject_stack;
module_param_named(inject_stack, fnv_inject_stack, bool, 0644);

static DEFINE_SPINLOCK(fnv_inject_lock);
static struct fnv_inject fnv_injects[FNV_OP_NR];
static unsigned long fnv_injected;

/*
 * "inject wake" ends every stall in progress: a test that needs a stall to last until it has
 * checked something arms a long one and ends it itself, instead of hoping a short one outlasts
 * its checks on a loaded machine.
 */
static DECLARE_WAIT_QUEUE_HEAD(fnv_stall_wq);
static atomic_t fnv_wake_gen = ATOMIC_INIT(0);
/* Threads inside an injected stall right now (misuse.c waits for its second thread). */
static atomic_t fnv_stalling = ATOMIC_INIT(0);

int fnv_inject_stalling(void)
{
	return atomic_read(&fnv_stalling);
}

static void fnv_stall(enum fnv_op op, unsigned int ms, const char *how)
{
	int gen = atomic_read(&fnv_wake_gen);
	long left;

	pr_info("%s: injected stall of %u ms%s\n", fnv_op_names[op], ms, how);
	atomic_inc(&fnv_stalling);
	left = wait_event_timeout(fnv_stall_wq, atomic_read(&fnv_wake_gen) != gen,
				  msecs_to_jiffies(ms));
	atomic_dec(&fnv_stalling);
	pr_info("%s: stall over%s\n", fnv_op_names[op], left ? " (woken)" : "");
}

void fnv_inject_take(enum fnv_op op, struct fnv_fault_req *req)
{
	struct fnv_inject *inj = &fnv_injects[op];

	req->kind = FNV_FAULT_NONE;
	req->err = 0;
	req->sleep_ms = 0;
	req->page_size = 0;

	spin_lock(&fnv_inject_lock);
	if (inj->count && inj->skip) {
		inj->skip--;
	} else if (inj->count) {
		*req = inj->req;
		if (!--inj->count)
			inj->req.kind = FNV_FAULT_NONE;
		fnv_injected++;
	}
	spin_unlock(&fnv_inject_lock);

	switch (req->kind) {
	case FNV_FAULT_ERRNO:
		pr_info("%s: injected failure %d\n", fnv_op_names[op], req->err);
		if (fnv_inject_stack)
			dump_stack();
		break;
	case FNV_FAULT_PAGESIZE:
		pr_info("%s: injected page size type %u\n", fnv_op_names[op],
			req->page_size);
		break;
	case FNV_FAULT_ENTRIES:
		pr_info("%s: injected entry count one short\n",
			fnv_op_names[op]);
		break;
	case FNV_FAULT_VERSION:
		pr_info("%s: injected bad version\n", fnv_op_names[op]);
		break;
	case FNV_FAULT_SLEEP:
		fnv_stall(op, req->sleep_ms, "");
		break;
	default:
		break;
	}
}

/* Called with the API lock held, by the ops that take it. */
void fnv_inject_stall_locked(enum fnv_op op, const struct fnv_fault_req *req)
{
	if (req->kind != FNV_FAULT_SLEEP_LOCKED)
		return;
	fnv_stall(op, req->sleep_ms, " holding the API lock");
}

unsigned long fnv_inject_count(void)
{
	unsigned long n;

	spin_lock(&fnv_inject_lock);
	n = fnv_injected;
	spin_unlock(&fnv_inject_lock);
	return n;
}

static bool fnv_op_exists(enum fnv_op op)
{
#if FNV_GEN < 535
	if (op == FNV_OP_GET_PAGES_PERSISTENT ||
	    op == FNV_OP_PUT_PAGES_PERSISTENT)
		return false;
#endif
	return true;
}

/* The ops that take the API lock (see apilock.c). */
static bool fnv_op_takes_api_lock(enum fnv_op op)
{
	return op == FNV_OP_GET_PAGES || op == FNV_OP_GET_PAGES_PERSISTENT ||
	       op == FNV_OP_PUT_PAGES || op == FNV_OP_PUT_PAGES_PERSISTENT ||
	       op == FNV_OP_DMA_MAP_PAGES;
}

/*
 * "pagesize" and "version" only make sense where a structure is returned;
 * free_page_table and callback can only be stalled.
 */
static bool fnv_fault_applies(enum fnv_op op, enum fnv_fault kind)
{
	switch (kind) {
	case FNV_FAULT_SLEEP:
		return true;
	case FNV_FAULT_SLEEP_LOCKED:
		return fnv_op_takes_api_lock(op);
	case FNV_FAULT_ERRNO:
		return op != FNV_OP_FREE_PAGE_TABLE && op != FNV_OP_CALLBACK;
	case FNV_FAULT_PAGESIZE:
		return op == FNV_OP_GET_PAGES ||
		       op == FNV_OP_GET_PAGES_PERSISTENT;
	case FNV_FAULT_VERSION:
	case FNV_FAULT_ENTRIES:
		return op == FNV_OP_GET_PAGES ||
		       op == FNV_OP_GET_PAGES_PERSISTENT ||
		       op == FNV_OP_DMA_MAP_PAGES;
	default:
		return false;
	}
}

static int fnv_parse_fault(const char *s, struct fnv_fault_req *req)
{
	int err;

	req->err = 0;
	req->sleep_ms = 0;
	req->page_size = 0;
	if (str_has_prefix(s, "sleep_locked:")) {
		req->kind = FNV_FAULT_SLEEP_LOCKED;
		if (kstrtouint(s + 13, 0, &req->sleep_ms) || !req->sleep_ms ||
		    req->sleep_ms > 60000)
			return -EINVAL;
		return 0;
	}
	if (str_has_prefix(s, "sleep:")) {
		req->kind = FNV_FAULT_SLEEP;
		if (kstrtouint(s + 6, 0, &req->sleep_ms) || !req->sleep_ms ||
		    req->sleep_ms > 60000)
			return -EINVAL;
		return 0;
	}
	if (!strcmp(s, "pagesize")) {
		req->kind = FNV_FAULT_PAGESIZE;
		req->page_size = NVIDIA_P2P_PAGE_SIZE_128KB;
		return 0;
	}
	if (str_has_prefix(s, "pagesize:")) {
		req->kind = FNV_FAULT_PAGESIZE;
		if (kstrtouint(s + 9, 0, &req->page_size) ||
		    req->page_size >= NVIDIA_P2P_PAGE_SIZE_COUNT)
			return -EINVAL;
		return 0;
	}
	if (!strcmp(s, "entries")) {
		req->kind = FNV_FAULT_ENTRIES;
		return 0;
	}
	if (!strcmp(s, "version")) {
		req->kind = FNV_FAULT_VERSION;
		return 0;
	}
	if (kstrtoint(s, 0, &err) || err >= 0 || err < -MAX_ERRNO)
		return -EINVAL;
	req->kind = FNV_FAULT_ERRNO;
	req->err = err;
	return 0;
}

/* ctl: "inject clear", "inject wake" or "inject <op> <what> [count [skip]]" (argv[0] is "inject") */
int fnv_inject_command(int argc, char **argv)
{
	struct fnv_fault_req req;
	unsigned int count = 1, skip = 0;
	int op;

	if (argc == 2 && !strcmp(argv[1], "clear")) {
		spin_lock(&fnv_inject_lock);
		memset(fnv_injects, 0, sizeof(fnv_injects));
		spin_unlock(&fnv_inject_lock);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "wake")) {
		atomic_inc(&fnv_wake_gen);
		wake_up_all(&fnv_stall_wq);
		return 0;
	}

	if (argc < 3 || argc > 5) {
		pr_err("ctl: usage: inject <op> <errno|pagesize[:TYPE]|version|entries|sleep:MS|sleep_locked:MS> [count [skip]] | inject clear | inject wake\n");
		return -EINVAL;
	}

	op = match_string(fnv_op_names, FNV_OP_NR, argv[1]);
	if (op < 0) {
		pr_err("ctl: inject: unknown op '%s'\n", argv[1]);
		return -EINVAL;
	}
	if (!fnv_op_exists(op)) {
		pr_err("ctl: inject: %s does not exist in flavour %s\n",
		       argv[1], FNV_FLAVOUR_NAME);
		return -EOPNOTSUPP;
	}
	if (fnv_parse_fault(argv[2], &req)) {
		pr_err("ctl: inject: '%s' is neither a negative errno, pagesize[:0..2], version, entries, sleep:MS nor sleep_locked:MS (1..60000)\n",
		       argv[2]);
		return -EINVAL;
	}
	if (!fnv_fault_applies(op, req.kind)) {
		pr_err("ctl: inject: %s cannot fail as '%s'\n", argv[1],
		       argv[2]);
		return -EINVAL;
	}
	if (argc >= 4 && (kstrtouint(argv[3], 0, &count) || !count)) {
		pr_err("ctl: inject: bad count '%s'\n", argv[3]);
		return -EINVAL;
	}
	if (argc == 5 && kstrtouint(argv[4], 0, &skip)) {
		pr_err("ctl: inject: bad skip '%s'\n", argv[4]);
		return -EINVAL;
	}

	spin_lock(&fnv_inject_lock);
	fnv_injects[op].req = req;
	fnv_injects[op].count = count;
	fnv_injects[op].skip = skip;
	spin_unlock(&fnv_inject_lock);
	return 0;
}
