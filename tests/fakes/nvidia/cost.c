// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: what the P2P calls cost, and how long callers
 * spent inside them (fake-only, see ../INTERFACE.md "Cost model").
 *
 * A pin, unpin, DMA map or unmap costs a fixed part plus a part per 64 KiB
 * page. The defaults follow the public figures in ../../../Documentation/
 * performance.md: gdrcopy measured a 64 KiB pin at ~43 us and its unpin at
 * ~28 us on a T4; UCX models registration as 16 us + 0.06 ns/byte, i.e.
 * ~4 us per 64 KiB page. No public figure exists for the DMA map, so it is
 * priced like dma_map_resource() per page under an IOMMU. The cost is
 * slept (usleep_range with no slack; busy-waited below 10 us) while the
 * call holds the API lock, as the real driver does its work under the RM
 * API lock (rm_p2p_get_pages, rm_p2p_dma_map_pages in osapi.c): pins and
 * maps of all threads are serialized, unmaps (no API lock) are not.
 * cost_scale_pct=0 turns the model off.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/seq_file.h>

#include "fake_nvidia.h"

static unsigned int cost_pin_us = 39;
module_param(cost_pin_us, uint, 0644);
MODULE_PARM_DESC(cost_pin_us, "Fixed cost of a pin (get_pages), us (39)");
static unsigned int cost_pin_page_ns = 4000;
module_param(cost_pin_page_ns, uint, 0644);
MODULE_PARM_DESC(cost_pin_page_ns, "Cost of a pin per 64 KiB page, ns (4000)");
static unsigned int cost_unpin_us = 26;
module_param(cost_unpin_us, uint, 0644);
MODULE_PARM_DESC(cost_unpin_us, "Fixed cost of an unpin (put_pages), us (26)");
static unsigned int cost_unpin_page_ns = 2000;
module_param(cost_unpin_page_ns, uint, 0644);
MODULE_PARM_DESC(cost_unpin_page_ns, "Cost of an unpin per 64 KiB page, ns (2000)");
static unsigned int cost_map_us = 2;
module_param(cost_map_us, uint, 0644);
MODULE_PARM_DESC(cost_map_us, "Fixed cost of dma_map_pages, us (2)");
static unsigned int cost_map_page_ns = 200;
module_param(cost_map_page_ns, uint, 0644);
MODULE_PARM_DESC(cost_map_page_ns, "Cost of dma_map_pages per 64 KiB page, ns (200)");
static unsigned int cost_unmap_us = 1;
module_param(cost_unmap_us, uint, 0644);
MODULE_PARM_DESC(cost_unmap_us, "Fixed cost of dma_unmap_pages, us (1)");
static unsigned int cost_unmap_page_ns = 100;
module_param(cost_unmap_page_ns, uint, 0644);
MODULE_PARM_DESC(cost_unmap_page_ns, "Cost of dma_unmap_pages per 64 KiB page, ns (100)");
static unsigned int cost_scale_pct = 100;
module_param(cost_scale_pct, uint, 0644);
MODULE_PARM_DESC(cost_scale_pct, "Scale of every cost in percent; 0 = no cost model (100)");

static const char *const fnv_call_names[FNV_CALL_NR] = {
	[FNV_CALL_PIN] = "pin",
	[FNV_CALL_UNPIN] = "unpin",
	[FNV_CALL_MAP] = "dma_map",
	[FNV_CALL_UNMAP] = "dma_unmap",
	[FNV_CALL_FREE] = "free",
};

static atomic64_t fnv_calls[FNV_CALL_NR];
static atomic64_t fnv_call_ns[FNV_CALL_NR];

void fnv_cost_charge(enum fnv_call call, u64 pages)
{
	u64 ns;

	switch (call) {
	case FNV_CALL_PIN:
		ns = cost_pin_us * 1000ULL + pages * cost_pin_page_ns;
		break;
	case FNV_CALL_UNPIN:
		ns = cost_unpin_us * 1000ULL + pages * cost_unpin_page_ns;
		break;
	case FNV_CALL_MAP:
		ns = cost_map_us * 1000ULL + pages * cost_map_page_ns;
		break;
	case FNV_CALL_UNMAP:
		ns = cost_unmap_us * 1000ULL + pages * cost_unmap_page_ns;
		break;
	default:
		return;
	}
	ns = div_u64(ns * READ_ONCE(cost_scale_pct), 100);
	if (!ns)
		return;
	if (ns < 10 * NSEC_PER_USEC) {
		ndelay(ns);
	} else {
		unsigned long us = div_u64(ns, NSEC_PER_USEC);

		might_sleep();
		usleep_range(us, us);
	}
}

u64 fnv_call_begin(void)
{
	return ktime_get_ns();
}

void fnv_call_end(enum fnv_call call, u64 t0)
{
	atomic64_inc(&fnv_calls[call]);
	atomic64_add(ktime_get_ns() - t0, &fnv_call_ns[call]);
}

static atomic64_t fnv_callback_ns;

/* Time spent in clients' free callbacks: for a live registration, cudaFree to invalidated. */
void fnv_callback_timed(u64 ns)
{
	atomic64_add(ns, &fnv_callback_ns);
}

void fnv_call_stats_show(struct seq_file *s)
{
	u64 total = 0;
	int i;

	for (i = 0; i < FNV_CALL_NR; i++) {
		u64 ns = atomic64_read(&fnv_call_ns[i]);

		seq_printf(s, "%s_calls %lld\n", fnv_call_names[i],
			   (long long)atomic64_read(&fnv_calls[i]));
		seq_printf(s, "%s_ns %llu\n", fnv_call_names[i], ns);
		total += ns;
	}
	seq_printf(s, "api_ns %llu\n", total);
	seq_printf(s, "callback_ns %lld\n", (long long)atomic64_read(&fnv_callback_ns));
}
