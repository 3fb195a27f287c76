// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: "GPUs" are QEMU ivshmem-plain devices, BAR 2 is
 * their memory, handed out in 64 KiB pages by a bitmap allocator.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/bitmap.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/random.h>
#include <linux/slab.h>

#include "fake_nvidia.h"

#define FNV_IVSHMEM_VENDOR	0x1af4
#define FNV_IVSHMEM_DEVICE	0x1110

static int fnv_next_gpu_index;

/* Deterministic per-GPU identity: "FNVG", index, PCI location. */
static void fnv_gpu_make_uuid(struct fnv_gpu *gpu, struct pci_dev *pdev)
{
	u8 *u = gpu->uuid;

	memcpy(u, "FNVG", 4);
	u[4] = gpu->index >> 24;
	u[5] = gpu->index >> 16;
	u[6] = gpu->index >> 8;
	u[7] = gpu->index;
	u[8] = pci_domain_nr(pdev->bus) >> 8;
	u[9] = pci_domain_nr(pdev->bus);
	u[10] = pdev->bus->number;
	u[11] = pdev->devfn;
	memset(&u[12], 0xa5, 4);
}

static int fnv_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	resource_size_t start = pci_resource_start(pdev, FNV_GPU_BAR);
	resource_size_t len = pci_resource_len(pdev, FNV_GPU_BAR);
	struct fnv_gpu *gpu;
	int ret;

	if (!(pci_resource_flags(pdev, FNV_GPU_BAR) & IORESOURCE_MEM) ||
	    !start || len < FNV_PAGE_SIZE || !IS_ALIGNED(start, FNV_PAGE_SIZE)) {
		pr_err("%s: BAR %d is not usable as GPU memory (start %pa len %pa)\n",
		       pci_name(pdev), FNV_GPU_BAR, &start, &len);
		return -ENODEV;
	}

	gpu = kzalloc(sizeof(*gpu), GFP_KERNEL);
	if (!gpu)
		return -ENOMEM;

	gpu->bar_phys = start;
	gpu->bar_len = len;
	gpu->npages = len >> FNV_PAGE_SHIFT;
	gpu->free_pages = gpu->npages;
	gpu->bitmap = bitmap_zalloc(gpu->npages, GFP_KERNEL);
	if (!gpu->bitmap) {
		ret = -ENOMEM;
		goto err_free_gpu;
	}

	/* Memory decoding must be on for peers to reach the BAR. */
	ret = pci_enable_device_mem(pdev);
	if (ret) {
		pr_err("%s: cannot enable the device: %d\n", pci_name(pdev), ret);
		goto err_free_bitmap;
	}

	ret = pci_request_region(pdev, FNV_GPU_BAR, "fake_nvidia");
	if (ret) {
		pr_err("%s: cannot claim BAR %d: %d\n", pci_name(pdev),
		       FNV_GPU_BAR, ret);
		goto err_disable;
	}

	mutex_lock(&fnv_lock);
	gpu->index = fnv_next_gpu_index++;
	gpu->pdev = pdev;
	fnv_gpu_make_uuid(gpu, pdev);
	list_add_tail(&gpu->node, &fnv_gpus);
	mutex_unlock(&fnv_lock);

	pci_set_drvdata(pdev, gpu);
	pr_info("GPU%d: %s, memory %pa + %pa, %lu pages of 64 KiB\n",
		gpu->index, pci_name(pdev), &start, &len, gpu->npages);
	return 0;

err_disable:
	pci_disable_device(pdev);
err_free_bitmap:
	bitmap_free(gpu->bitmap);
err_free_gpu:
	kfree(gpu);
	return ret;
}

/*
 * The GPU object stays until module exit: buffers still allocated on it
 * (and pinned by clients) keep working, but no new buffer goes there.
 */
static void fnv_remove(struct pci_dev *pdev)
{
	struct fnv_gpu *gpu = pci_get_drvdata(pdev);
	struct fnv_buffer *buf;
	unsigned int busy = 0;

	mutex_lock(&fnv_lock);
	gpu->pdev = NULL;
	list_for_each_entry(buf, &fnv_buffers, node)
		if (buf->gpu == gpu)
			busy++;
	mutex_unlock(&fnv_lock);

	if (busy)
		pr_info("GPU%d: unbound with %u buffers still allocated\n",
			gpu->index, busy);

	pci_release_region(pdev, FNV_GPU_BAR);
	pci_disable_device(pdev);
}

static const struct pci_device_id fnv_pci_ids[] = {
	{ PCI_DEVICE(FNV_IVSHMEM_VENDOR, FNV_IVSHMEM_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, fnv_pci_ids);

struct pci_driver fnv_pci_driver = {
	.name = "nvidia", /* the real driver's PCI driver name: /sys/bus/pci/drivers/nvidia */
	.id_table = fnv_pci_ids,
	.probe = fnv_probe,
	.remove = fnv_remove,
};

/* Caller holds fnv_lock. Only bound GPUs take new buffers. */
struct fnv_gpu *fnv_gpu_find(int index)
{
	struct fnv_gpu *gpu;

	lockdep_assert_held(&fnv_lock);
	list_for_each_entry(gpu, &fnv_gpus, node)
		if (gpu->index == index && gpu->pdev)
			return gpu;
	return NULL;
}

/* After the PCI driver is gone: nothing refers to the GPUs any more. */
void fnv_gpus_free_all(void)
{
	struct fnv_gpu *gpu, *next;

	mutex_lock(&fnv_lock);
	list_for_each_entry_safe(gpu, next, &fnv_gpus, node) {
		list_del(&gpu->node);
		bitmap_free(gpu->bitmap);
		kfree(gpu);
	}
	mutex_unlock(&fnv_lock);
}

/* Pick @n random free pages in a random order. */
static int fnv_gpu_pick_shuffled(struct fnv_gpu *gpu, unsigned long n,
				 unsigned long *pages)
{
	unsigned long *pool, bit, i, nfree = 0;

	pool = kvmalloc_array(gpu->free_pages, sizeof(*pool), GFP_KERNEL);
	if (!pool)
		return -ENOMEM;

	for_each_clear_bit(bit, gpu->bitmap, gpu->npages)
		pool[nfree++] = bit;

	/* Partial Fisher-Yates: the first n slots become the permutation. */
	for (i = 0; i < n; i++) {
		unsigned long j = i + get_random_u32_below(nfree - i);

		swap(pool[i], pool[j]);
		pages[i] = pool[i];
	}
	kvfree(pool);

	/* Never hand out something that looks contiguous. */
	if (n >= 2) {
		for (i = 1; i < n; i++)
			if (pages[i] != pages[i - 1] + 1)
				break;
		if (i == n)
			swap(pages[0], pages[1]);
	}
	return 0;
}

/*
 * Allocate @n pages with the given layout into @pages (BAR page indices).
 * Caller holds fnv_lock.
 */
int fnv_gpu_alloc_pages(struct fnv_gpu *gpu, enum fnv_layout layout,
			unsigned long n, unsigned long *pages)
{
	unsigned long start, span, i;
	int ret;

	lockdep_assert_held(&fnv_lock);
	if (!n || n > gpu->free_pages)
		return -ENOMEM;

	switch (layout) {
	case FNV_LAYOUT_CONTIGUOUS:
	case FNV_LAYOUT_FRAGMENTED:
		/* fragmented: every other page of a free run, the gaps stay free */
		span = layout == FNV_LAYOUT_CONTIGUOUS ? n : 2 * n - 1;
		if (span > gpu->npages)
			return -ENOMEM;
		start = bitmap_find_next_zero_area(gpu->bitmap, gpu->npages,
						   0, span, 0);
		if (start + span > gpu->npages)
			return -ENOMEM;
		for (i = 0; i < n; i++)
			pages[i] = layout == FNV_LAYOUT_CONTIGUOUS ?
				   start + i : start + 2 * i;
		break;
	case FNV_LAYOUT_SHUFFLED:
		ret = fnv_gpu_pick_shuffled(gpu, n, pages);
		if (ret)
			return ret;
		break;
	default:
		return -EINVAL;
	}

	for (i = 0; i < n; i++)
		__set_bit(pages[i], gpu->bitmap);
	gpu->free_pages -= n;
	return 0;
}

/* Caller holds fnv_lock. */
void fnv_gpu_free_pages(struct fnv_gpu *gpu, const unsigned long *pages,
			unsigned long n)
{
	unsigned long i;

	lockdep_assert_held(&fnv_lock);
	for (i = 0; i < n; i++) {
		WARN_ON(!test_bit(pages[i], gpu->bitmap));
		__clear_bit(pages[i], gpu->bitmap);
	}
	gpu->free_pages += n;
}
