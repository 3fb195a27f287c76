// SPDX-License-Identifier: GPL-2.0
/*
 * Test double of nvidia_peermem.ko, the peer client module that NVIDIA's driver ships
 * (kernel-open/nvidia-peermem in open-gpu-kernel-modules). Like the real one it registers a
 * PeerDirect client named "nv_mem" with ib_core when it loads and unregisters it when it goes;
 * unlike the real one it claims no memory: its acquire declines every address, so nothing here
 * ever reaches its other callbacks. It exists so that the tests can load the module that
 * nv_peer_mem must not run beside (tests/fakes/INTERFACE.md).
 */
#define pr_fmt(fmt) "nvidia_peermem double: " fmt

#include <linux/errno.h>
#include <linux/module.h>

#include "peer_mem_abi.h"

static int fpm_acquire(unsigned long addr, size_t size, void *peer_mem_private_data,
		       char *peer_mem_name, void **client_context)
{
	return 0; /* not ours: ib_core asks the next client */
}

static int fpm_get_pages(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context, u64 core_context)
{
	return -EINVAL;
}

static int fpm_dma_map(struct sg_table *sg_head, void *client_context, struct device *dma_device,
		       int dmasync, int *nmap)
{
	return -EINVAL;
}

static int fpm_dma_unmap(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device)
{
	return -EINVAL;
}

static void fpm_put_pages(struct sg_table *sg_head, void *client_context)
{
}

static unsigned long fpm_get_page_size(void *client_context)
{
	return 0x10000;
}

static void fpm_release(void *client_context)
{
}

static const struct peer_memory_client fpm_client = {
	.name = "nv_mem",
	.version = "580.00",
	.acquire = fpm_acquire,
	.get_pages = fpm_get_pages,
	.dma_map = fpm_dma_map,
	.dma_unmap = fpm_dma_unmap,
	.put_pages = fpm_put_pages,
	.get_page_size = fpm_get_page_size,
	.release = fpm_release,
};

static void *fpm_handle;
static invalidate_peer_memory fpm_invalidate;

/*
 * Like the real one's init: no look for nv_peer_mem (it loads beside it whenever ib_core takes
 * the client), and when ib_core refuses the client (a core with memory_peers, where nv_peer_mem
 * holds the name already), one error line and EINVAL.
 */
static int __init fpm_init(void)
{
	fpm_handle = ib_register_peer_memory_client(&fpm_client, &fpm_invalidate);
	if (!fpm_handle) {
		pr_err("ib_core refused its nv_mem client: not loading (EINVAL)\n");
		return -EINVAL;
	}
	return 0;
}

static void __exit fpm_exit(void)
{
	ib_unregister_peer_memory_client(fpm_handle);
}

module_init(fpm_init);
module_exit(fpm_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test double of NVIDIA's nvidia_peermem (registers an nv_mem client that claims nothing)");
