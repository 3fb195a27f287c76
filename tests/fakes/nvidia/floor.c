// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: make bench's floor (fake-only). The registration
 * sequence with nothing but the P2P calls and the cheapest sg list: pin
 * with a callback that does nothing, DMA-map for the NIC, one sg entry per
 * run of contiguous DMA addresses, then unmap and unpin; timed with ktime.
 *
 *   ctl: floor <va> <len> <iterations> [nic index]
 *        floor clear
 *   floor: one line of key=value per run since "floor clear" (nanoseconds
 *          per iteration, as means; start_ns and end_ns on ktime's clock)
 * Runs in the writing process, which must own the buffer at <va>. Runs of
 * several threads proceed at once, as the module's registrations do (make
 * bench's control for the module's scaling with threads).
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/ktime.h>
#include <linux/pci.h>
#include <linux/scatterlist.h>
#include <linux/seq_file.h>
#include <linux/slab.h>

#include "fake_nvidia.h"

#define FNV_EDU_VENDOR	0x1234
#define FNV_EDU_DEVICE	0x11e8

enum { FL_PIN, FL_MAP, FL_FILL, FL_UNMAP, FL_UNPIN, FL_NR };
static const char *const fnv_floor_names[FL_NR] = {
	"pin", "dma_map", "sg_fill", "dma_unmap", "unpin",
};

#define FNV_FLOOR_LINE	384

static DEFINE_MUTEX(fnv_floor_lock);	/* the results below */
/*
 * With "core-lock", the pin is made under this one mutex, as ib_core calls
 * every client's acquire under its global peer_memory_mutex (MLNX_OFED's
 * drivers/infiniband/core/peer_mem.c; ../ib_core/peer_client.c): the bound
 * that lock sets on a client that pins in acquire, for make bench's threads
 * control.
 */
static DEFINE_MUTEX(fnv_floor_core_lock);
static char fnv_floor_result[4 * FNV_FLOOR_LINE];
static size_t fnv_floor_len;

static void fnv_floor_cb(void *data)
{
}

/* The cheapest sg list: count the runs, allocate once, fill. */
static int fnv_floor_fill(const struct nvidia_p2p_dma_mapping *m,
			  struct sg_table *sgt)
{
	struct scatterlist *sg = NULL;
	unsigned int runs = 1, i;
	int ret;

	for (i = 1; i < m->entries; i++)
		if (m->dma_addresses[i] != m->dma_addresses[i - 1] + FNV_PAGE_SIZE)
			runs++;
	ret = sg_alloc_table(sgt, runs, GFP_KERNEL);
	if (ret)
		return ret;
	for (i = 0; i < m->entries; i++) {
		if (sg && m->dma_addresses[i] == sg_dma_address(sg) + sg_dma_len(sg)) {
			sg_dma_len(sg) += FNV_PAGE_SIZE;
			continue;
		}
		sg = sg ? sg_next(sg) : sgt->sgl;
		sg_dma_address(sg) = m->dma_addresses[i];
		sg_dma_len(sg) = FNV_PAGE_SIZE;
	}
	return 0;
}

static int fnv_floor_run(struct pci_dev *peer, u64 va, u64 len,
			 unsigned long iters, bool core_lock)
{
	u64 sum[FL_NR] = {}, t[FL_NR + 1], start = ktime_get_ns(), end;
	unsigned int nents = 0;
	unsigned long it;
	int i, ret = 0, n = 0;
	char *line;

	for (it = 0; it < iters; it++) {
		struct nvidia_p2p_page_table *pt;
		struct nvidia_p2p_dma_mapping *m;
		struct sg_table sgt;

		t[0] = ktime_get_ns();
		if (core_lock)
			mutex_lock(&fnv_floor_core_lock);
		ret = nvidia_p2p_get_pages(0, 0, va, len, &pt, fnv_floor_cb, &sgt);
		if (core_lock)
			mutex_unlock(&fnv_floor_core_lock);
		if (ret)
			break;
		t[1] = ktime_get_ns();
		ret = nvidia_p2p_dma_map_pages(peer, pt, &m);
		if (ret) {
			nvidia_p2p_put_pages(0, 0, va, pt);
			break;
		}
		t[2] = ktime_get_ns();
		ret = fnv_floor_fill(m, &sgt);
		if (!ret) {
			nents = sgt.orig_nents;
			sg_free_table(&sgt);
		}
		t[3] = ktime_get_ns();
		nvidia_p2p_dma_unmap_pages(peer, pt, m);
		t[4] = ktime_get_ns();
		nvidia_p2p_put_pages(0, 0, va, pt);
		t[5] = ktime_get_ns();
		if (ret)
			break;
		for (i = 0; i < FL_NR; i++)
			sum[i] += t[i + 1] - t[i];
		cond_resched();
	}
	if (ret) {
		pr_err("floor: iteration %lu failed: %d\n", it, ret);
		return ret;
	}
	end = ktime_get_ns();
	line = kmalloc(FNV_FLOOR_LINE, GFP_KERNEL);
	if (!line)
		return -ENOMEM;
	n = scnprintf(line, FNV_FLOOR_LINE,
		      "floor va=0x%llx len=0x%llx iters=%lu nents=%u core_lock=%d start_ns=%llu end_ns=%llu elapsed_ns=%llu",
		      va, len, iters, nents, core_lock, start, end, end - start);
	for (i = 0; i < FL_NR; i++)
		n += scnprintf(line + n, FNV_FLOOR_LINE - n, " %s_ns=%llu",
			       fnv_floor_names[i], div_u64(sum[i], iters));
	n += scnprintf(line + n, FNV_FLOOR_LINE - n, "\n");
	mutex_lock(&fnv_floor_lock);
	if (fnv_floor_len + n < sizeof(fnv_floor_result)) {
		memcpy(fnv_floor_result + fnv_floor_len, line, n);
		fnv_floor_len += n;
	} else {
		ret = -ENOSPC;
	}
	mutex_unlock(&fnv_floor_lock);
	kfree(line);
	if (ret)
		pr_err("floor: results full, write \"floor clear\"\n");
	return ret;
}

int fnv_floor_command(int argc, char **argv)
{
	unsigned long iters, nic = 0, i;
	struct pci_dev *peer = NULL;
	u64 va, len;
	int ret;

	if (argc == 2 && !strcmp(argv[1], "clear")) {
		mutex_lock(&fnv_floor_lock);
		fnv_floor_len = 0;
		mutex_unlock(&fnv_floor_lock);
		return 0;
	}
	if (argc < 4 || argc > 6 || kstrtou64(argv[1], 0, &va) ||
	    kstrtou64(argv[2], 0, &len) || kstrtoul(argv[3], 0, &iters) ||
	    !iters || (argc >= 5 && kstrtoul(argv[4], 0, &nic)) ||
	    (argc == 6 && strcmp(argv[5], "core-lock"))) {
		pr_err("ctl: usage: floor <va> <len> <iterations> [nic index [core-lock]] | floor clear\n");
		return -EINVAL;
	}
	for (i = 0; i <= nic; i++) {
		peer = pci_get_device(FNV_EDU_VENDOR, FNV_EDU_DEVICE, peer);
		if (!peer) {
			pr_err("floor: no NIC number %lu\n", nic);
			return -ENODEV;
		}
	}
	ret = fnv_floor_run(peer, va, len, iters, argc == 6);
	pci_dev_put(peer);
	return ret;
}

void fnv_floor_show(struct seq_file *s)
{
	mutex_lock(&fnv_floor_lock);
	seq_write(s, fnv_floor_result, fnv_floor_len);
	mutex_unlock(&fnv_floor_lock);
}
