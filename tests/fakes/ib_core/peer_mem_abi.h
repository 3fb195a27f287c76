/* SPDX-License-Identifier: GPL-2.0 */
/*
 * PeerDirect ABI as seen by a peer-memory client, declared for the ib_core
 * test double (own declarations; layout facts from shared/REFERENCE.md
 * section 3, checked against wjz304/mlnx-ofed-kernel include/rdma/peer_mem.h
 * at 24.07 (commit 2c0186b) and at 4.9 (commit 8ba4057)).
 */
#ifndef FAKE_IB_CORE_PEER_MEM_ABI_H
#define FAKE_IB_CORE_PEER_MEM_ABI_H

#include <linux/types.h>

struct device;
struct sg_table;

#define IB_PEER_MEMORY_NAME_MAX 64
#define IB_PEER_MEMORY_VER_MAX 16

/* 5.x/24.x peer_mem.h: flags bit of peer_memory_client_ex. */
#define PEER_MEM_INVALIDATE_UNMAPS 1u

/* The core's "no invalidation" core_context (24.07 peer_mem.c). */
#define FAKE_NO_INVALIDATION_ID U32_MAX

struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	int (*acquire)(unsigned long addr, size_t size, void *peer_mem_private_data,
		       char *peer_mem_name, void **client_context);
	int (*get_pages)(unsigned long addr, size_t size, int write, int force,
			 struct sg_table *sg_head, void *client_context,
			 u64 core_context);
	int (*dma_map)(struct sg_table *sg_head, void *client_context,
		       struct device *dma_device, int dmasync, int *nmap);
	int (*dma_unmap)(struct sg_table *sg_head, void *client_context,
			 struct device *dma_device);
	void (*put_pages)(struct sg_table *sg_head, void *client_context);
	unsigned long (*get_page_size)(void *client_context);
	void (*release)(void *client_context);
};

/* 5.x/24.x only. */
struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

/*
 * MLNX_OFED 4.9's struct peer_memory_client: the same members plus two
 * after release (4.9 include/rdma/peer_mem.h).  The 4.9 core reads a 5.x
 * client's ex_size and flags (plus padding) through these two members.
 */
struct fake_peer_memory_client_v4 {
	struct peer_memory_client base;
	void *(*get_context_private_data)(u64 peer_id);
	void (*put_context_private_data)(void *context);
};

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* FAKE_IB_CORE_PEER_MEM_ABI_H */
