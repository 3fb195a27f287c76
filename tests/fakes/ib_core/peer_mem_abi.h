/* SPDX-License-Identifier: GPL-2.0 */
/*
 * PeerDirect ABI as seen by a peer-memory client, declared for the ib_core
 * test double.  Written from the layout description in shared/REFERENCE.md
 * section 3; field order and types must match what the real MLNX_OFED
 * ib_core exposes, since clients are built against the real header.
 */
#ifndef FAKE_IB_CORE_PEER_MEM_ABI_H
#define FAKE_IB_CORE_PEER_MEM_ABI_H

#include <linux/types.h>

struct device;
struct sg_table;

#define IB_PEER_MEMORY_NAME_MAX 64
#define IB_PEER_MEMORY_VER_MAX 16

/* Set in peer_memory_client_ex.flags: the core must not unmap/unpin an
 * invalidated registration; the client does it itself. */
#define PEER_MEM_INVALIDATE_UNMAPS 1u

/* The extended form is marked by this byte value at version[VER_MAX - 1]. */
#define FAKE_PEER_EX_MARKER 1

struct peer_memory_client {
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	/* 1: the range belongs to this client, 0: it does not. */
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

struct peer_memory_client_ex {
	struct peer_memory_client client;
	size_t ex_size;
	u32 flags;
};

typedef int (*invalidate_peer_memory)(void *reg_handle, u64 core_context);

void *ib_register_peer_memory_client(const struct peer_memory_client *peer_client,
				     invalidate_peer_memory *invalidate_callback);
void ib_unregister_peer_memory_client(void *reg_handle);

#endif /* FAKE_IB_CORE_PEER_MEM_ABI_H */
