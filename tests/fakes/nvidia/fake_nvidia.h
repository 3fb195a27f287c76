/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal state of the nvidia.ko test double.
 *
 * Object model (everything below is protected by fnv_lock):
 *
 *  fnv_gpu     one per bound ivshmem device; BAR 2 in 64 KiB pages with a
 *              bitmap allocator. Lives until module exit, even after unbind,
 *              so buffers never point at freed GPUs.
 *  fnv_buffer  a "cudaMalloc" at a test-chosen GPU VA. Holds its pages until
 *              it is freed AND no table pins it any more.
 *  fnv_table   the wrapper of one nvidia_p2p_page_table handed to a client.
 *              LIVE tables sit on their buffer's list. A free of the buffer
 *              moves tables with a callback to INVALIDATING (callback running,
 *              lock dropped) and then DEAD; the wrapper is destroyed once the
 *              client freed it and no mapping object refers to it.
 *  fnv_mapping the wrapper of one nvidia_p2p_dma_mapping; @mapped is false
 *              once the fake unmapped it because its table died.
 */
#ifndef FAKE_NVIDIA_H
#define FAKE_NVIDIA_H

#include <linux/atomic.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/printk.h>
#include <linux/sizes.h>
#include <linux/types.h>

#include "nv_p2p_abi.h"

struct pci_dev;
struct pci_driver;

#define FNV_PAGE_SHIFT		16
#define FNV_PAGE_SIZE		SZ_64K
#define FNV_GPU_BAR		2
#define FNV_UUID_LEN		16

#if defined(FNV_HAVE_PERSISTENT_API)
#define FNV_FLAVOUR_NAME	"full"
#elif defined(FNV_HAVE_CAP_SYMBOL)
#define FNV_FLAVOUR_NAME	"caponly"
#else
#define FNV_FLAVOUR_NAME	"nopersist"
#endif

struct fnv_gpu {
	struct list_head node;		/* on fnv_gpus */
	struct pci_dev *pdev;		/* NULL once unbound */
	int index;
	phys_addr_t bar_phys;
	resource_size_t bar_len;
	unsigned long npages;
	unsigned long free_pages;
	unsigned long *bitmap;		/* bit set = page allocated */
	u8 uuid[FNV_UUID_LEN];
};

enum fnv_layout {
	FNV_LAYOUT_CONTIGUOUS,
	FNV_LAYOUT_FRAGMENTED,
	FNV_LAYOUT_SHUFFLED,
	FNV_LAYOUT_NR
};

struct fnv_buffer {
	struct list_head node;		/* on fnv_buffers */
	struct fnv_gpu *gpu;
	u64 va;
	u64 size;
	unsigned long npages;
	unsigned long *pages;		/* BAR page index of each buffer page */
	enum fnv_layout layout;
	struct list_head tables;	/* LIVE tables (fnv_table.buf_node) */
	unsigned int pins;		/* entries on @tables */
	unsigned int persistent_pins;	/* of which persistent */
	bool freed;			/* "cudaFree" done */
	bool freeing;			/* a free is running its callbacks */
};

enum fnv_table_state {
	FNV_TABLE_LIVE,
	FNV_TABLE_INVALIDATING,		/* free callback running */
	FNV_TABLE_DEAD,			/* free callback returned */
};

struct fnv_table {
	struct nvidia_p2p_page_table pt;	/* what the client sees */
	struct list_head node;		/* on fnv_tables */
	struct list_head buf_node;	/* on buf->tables while LIVE */
	struct list_head mappings;	/* fnv_mapping.table_node */
	struct fnv_buffer *buf;		/* NULL unless LIVE */
	u64 va;
	u64 len;
	unsigned long first;		/* index of the first buffer page */
	unsigned long npages;
	enum fnv_table_state state;
	bool persistent;
	bool client_freed;		/* nvidia_p2p_free_page_table() done */
	void (*free_callback)(void *data);
	void *data;
	struct nvidia_p2p_page *page_structs;
	struct nvidia_p2p_page **page_ptrs;
	u8 uuid[FNV_UUID_LEN];
};

struct fnv_mapping {
	struct nvidia_p2p_dma_mapping m;	/* what the client sees */
	struct list_head node;		/* on fnv_mappings */
	struct list_head table_node;	/* on table->mappings */
	struct fnv_table *table;
	struct pci_dev *peer;		/* holds a device reference */
	u64 *dma;			/* our copy of the addresses array */
	unsigned long npages;
	bool mapped;
};

struct fnv_stats {
	unsigned long pins;
	unsigned long persistent_pins;
	unsigned long mappings;
	unsigned long dead_tables;
	unsigned long dead_mappings;
	unsigned long callbacks;
};

/* main.c */
extern struct mutex fnv_lock;
extern struct list_head fnv_gpus;
extern struct list_head fnv_buffers;
extern struct list_head fnv_tables;
extern struct list_head fnv_mappings;
extern struct fnv_stats fnv_stats;
extern atomic_long_t fnv_violations;

/* A client broke the contract of the real driver: the harness fails on this. */
#define fnv_violation(fmt, ...)						\
	do {								\
		atomic_long_inc(&fnv_violations);			\
		pr_err("FAKE-VIOLATION: " fmt, ##__VA_ARGS__);		\
	} while (0)

/* gpu.c: PCI binding and the BAR page allocator */
extern struct pci_driver fnv_pci_driver;
struct fnv_gpu *fnv_gpu_find(int index);
void fnv_gpus_free_all(void);
int fnv_gpu_alloc_pages(struct fnv_gpu *gpu, enum fnv_layout layout,
			unsigned long n, unsigned long *pages);
void fnv_gpu_free_pages(struct fnv_gpu *gpu, const unsigned long *pages,
			unsigned long n);
static inline phys_addr_t fnv_gpu_page_phys(const struct fnv_gpu *gpu,
					    unsigned long page)
{
	return gpu->bar_phys + ((phys_addr_t)page << FNV_PAGE_SHIFT);
}

/* buffer.c: "cudaMalloc" / "cudaFree" */
extern const char *const fnv_layout_names[FNV_LAYOUT_NR];
int fnv_buffer_alloc(u64 va, u64 size, enum fnv_layout layout, int gpu_index);
int fnv_buffer_free(u64 va);
struct fnv_buffer *fnv_buffer_find_range(u64 va, u64 len);
void fnv_buffer_release_if_unused(struct fnv_buffer *buf);
void fnv_buffers_teardown(void);

struct fnv_fault_req;

/* p2p.c: page tables and DMA mappings */
int fnv_p2p_get_pages(const char *op, u64 va, u64 len,
		      struct nvidia_p2p_page_table **page_table,
		      bool persistent, void (*free_callback)(void *data),
		      void *data, const struct fnv_fault_req *fault);
struct fnv_table *fnv_table_lookup(struct nvidia_p2p_page_table *pt);
void fnv_table_put_locked(struct fnv_table *t, const char *op);
struct fnv_table *fnv_table_begin_invalidate(struct fnv_buffer *buf);
void fnv_table_end_invalidate(struct fnv_table *t);
void fnv_p2p_teardown(void);

/* inject.c: fault injection */
enum fnv_op {
	FNV_OP_GET_PAGES,
	FNV_OP_GET_PAGES_PERSISTENT,
	FNV_OP_PUT_PAGES,
	FNV_OP_PUT_PAGES_PERSISTENT,
	FNV_OP_DMA_MAP_PAGES,
	FNV_OP_DMA_UNMAP_PAGES,
	FNV_OP_FREE_PAGE_TABLE,
	FNV_OP_NR
};

enum fnv_fault {
	FNV_FAULT_NONE,
	FNV_FAULT_ERRNO,
	FNV_FAULT_PAGESIZE,
	FNV_FAULT_VERSION,
	FNV_FAULT_SLEEP,	/* stall the call, then carry it out normally */
};

struct fnv_fault_req {
	enum fnv_fault kind;
	int err;
	unsigned int sleep_ms;
};

int fnv_inject_command(int argc, char **argv);
void fnv_inject_take(enum fnv_op op, struct fnv_fault_req *req);
unsigned long fnv_inject_count(void);

/* debugfs.c */
void fnv_debugfs_init(void);
void fnv_debugfs_exit(void);

#endif /* FAKE_NVIDIA_H */
