/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal state of the nvidia.ko test double.
 *
 * Two locks, like the real driver (NVIDIA/open-gpu-kernel-modules):
 *
 *  API lock    apilock.c; stands in for RM's API lock (rmapiLockAcquire in
 *              src/nvidia/src/kernel/rmapi/rmapi.c, taken through
 *              src/nvidia/arch/nvalloc/unix/src/osapi.c). Taken by
 *              get_pages, put_pages, dma_map_pages, the persistent calls
 *              and "free" (held across the client's free callbacks).
 *              Invisible to lockdep; every wait is timed instead.
 *  fnv_lock    a mutex protecting the object lists below and fnv_stats;
 *              never held while a client callback runs. dma_unmap_pages
 *              takes only this one (the real driver takes only the table's
 *              mapping semaphore there).
 *
 *  fnv_gpu     one per bound ivshmem device; BAR 2 in 64 KiB pages with a
 *              bitmap allocator. Lives until module exit.
 *  fnv_buffer  a "cudaMalloc" at a test-chosen GPU VA, owned by the process
 *              that wrote "alloc". Holds its pages until it is freed AND no
 *              table pins it any more.
 *  fnv_table   the wrapper of one nvidia_p2p_page_table handed to a client
 *              (embedded, so freeing the wrapper frees what the client
 *              points at). When it goes away, a tomb remembers the pointer.
 *  fnv_mapping the wrapper of one nvidia_p2p_dma_mapping.
 *  fnv_tomb    a freed page table pointer, with when and why it died, so
 *              later calls with it are diagnosed without dereferencing it.
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

#define FNV_STR2(x)		#x
#define FNV_STR(x)		FNV_STR2(x)
#define FNV_FLAVOUR_NAME	"r" FNV_STR(FNV_GEN)

/* r515 and later free tables and mappings themselves after the callback. */
#define FNV_DRIVER_FREES	(FNV_GEN >= 515)

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
	pid_t owner;			/* tgid that wrote "alloc" */
	struct list_head tables;	/* LIVE tables (fnv_table.buf_node) */
	unsigned int pins;		/* entries on @tables */
	unsigned int persistent_pins;	/* of which persistent */
	bool freed;			/* "cudaFree" done */
	bool freeing;			/* a free is running its callbacks */
};

enum fnv_table_state {
	FNV_TABLE_LIVE,
	FNV_TABLE_INVALIDATING,		/* free callback running */
	FNV_TABLE_DEAD,			/* r470: callback returned, not freed */
};

struct fnv_table {
	struct nvidia_p2p_page_table pt;	/* what the client sees */
	struct list_head node;		/* on fnv_tables */
	struct hlist_node hnode;	/* in the tables' hash, by &pt */
	struct list_head buf_node;	/* on buf->tables while LIVE */
	struct list_head mappings;	/* fnv_mapping.table_node */
	struct fnv_buffer *buf;		/* NULL unless LIVE */
	u64 id;				/* unique, never reused */
	u64 va;
	u64 len;
	unsigned long first;		/* index of the first buffer page */
	unsigned long npages;
	pid_t owner;			/* tgid that pinned it */
	/* The last call on it to return to the client: its thread, fnv_death_seq then. */
	pid_t ret_pid;
	u64 ret_seq;
	enum fnv_table_state state;
	bool persistent;
	bool client_freed;		/* r470: nvidia_p2p_free_page_table() */
	void (*free_callback)(void *data);
	void *data;
	struct nvidia_p2p_page *page_structs;
	struct nvidia_p2p_page **page_ptrs;
	u8 uuid[FNV_UUID_LEN];
};

struct fnv_mapping {
	struct nvidia_p2p_dma_mapping m;	/* what the client sees */
	struct list_head node;		/* on fnv_mappings */
	struct hlist_node hnode;	/* in the mappings' hash, by &m */
	struct list_head table_node;	/* on table->mappings */
	struct fnv_table *table;
	struct pci_dev *peer;		/* holds a device reference */
	u64 *dma;			/* the client's dma_addresses array */
	unsigned long npages;
	bool mapped;			/* false: r470 table died under it */
};

/* Why a page table pointer stopped being valid. */
enum fnv_death {
	FNV_DIED_CALLBACK,		/* driver freed it after the callback */
	FNV_DIED_PUT,			/* put_pages / put_pages_persistent */
	FNV_DIED_CLIENT_FREE,		/* r470: nvidia_p2p_free_page_table */
	FNV_DIED_FAILED_GET,		/* freed by the get_pages that failed */
};

struct fnv_tomb {
	struct list_head node;		/* on fnv_tombs, newest last */
	struct hlist_node hnode;	/* in fnv_tomb_hash, by @ptr */
	const void *ptr;
	u64 va;
	u64 len;
	u64 seq;			/* value of fnv_death_seq it set */
	enum fnv_death how;
	/* The table's ret_pid and ret_seq, then any call on it that returned since. */
	pid_t ret_pid;
	u64 ret_seq;
};

/* What a page table pointer handed in by a client refers to. */
enum fnv_pt_state {
	FNV_PT_TABLE,			/* one of ours, see its state */
	FNV_PT_DIED_DURING,		/* freed after this call started */
	FNV_PT_DIED_BEFORE,		/* freed before this call started */
	FNV_PT_UNKNOWN,
};

struct fnv_stats {
	unsigned long pins;
	unsigned long persistent_pins;
	unsigned long mappings;
	unsigned long dead_tables;
	unsigned long dead_mappings;
	unsigned long callbacks;
	unsigned long hazards;
	unsigned long reentry_refused;
};

/* cost.c: the cost model and the time spent inside exported calls */
enum fnv_call {
	FNV_CALL_PIN,		/* get_pages, get_pages_persistent */
	FNV_CALL_UNPIN,		/* put_pages, put_pages_persistent */
	FNV_CALL_MAP,		/* dma_map_pages */
	FNV_CALL_UNMAP,		/* dma_unmap_pages */
	FNV_CALL_FREE,		/* free_page_table, free_dma_mapping */
	FNV_CALL_NR,
};

struct seq_file;
void fnv_cost_charge(enum fnv_call call, u64 pages);
u64 fnv_call_begin(void);
void fnv_call_end(enum fnv_call call, u64 t0);
void fnv_call_stats_show(struct seq_file *s);
void fnv_callback_timed(u64 ns);

/* floor.c: make bench's floor, the P2P calls made directly */
int fnv_floor_command(int argc, char **argv);
void fnv_floor_show(struct seq_file *s);

/* main.c */
extern struct mutex fnv_lock;
extern struct list_head fnv_gpus;
extern struct list_head fnv_buffers;
extern struct list_head fnv_tables;
extern struct list_head fnv_mappings;
extern struct fnv_stats fnv_stats;
extern atomic_long_t fnv_violations;
extern int fnv_mig;
extern unsigned int fnv_deadlock_timeout;

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

/* apilock.c: the driver's API lock */
int fnv_api_lock(const char *op, const char *fmt, ...) __printf(2, 3);
void fnv_api_doing(const char *fmt, ...) __printf(1, 2);
void fnv_api_unlock(void);

/* table.c: page tables, mappings and tombs (callers hold fnv_lock) */
u64 fnv_seq_now(void);
struct fnv_table *fnv_table_create(struct fnv_buffer *buf, u64 va, u64 len);
void fnv_table_pin(struct fnv_table *t, struct fnv_buffer *buf);
void fnv_table_unpin(struct fnv_table *t);
void fnv_table_free(struct fnv_table *t, enum fnv_death how);
void fnv_table_dangle(struct nvidia_p2p_page_table **page_table, u64 va, u64 len);
enum fnv_pt_state fnv_table_resolve(const struct nvidia_p2p_page_table *pt,
				    u64 since, struct fnv_table **t,
				    struct fnv_tomb **tomb);
int fnv_table_report(const char *op, enum fnv_pt_state st,
		     struct fnv_tomb *tomb,
		     const struct nvidia_p2p_page_table *pt);
int fnv_table_check(const char *op, const struct nvidia_p2p_page_table *pt,
		    u64 since, struct fnv_table **tp);
void fnv_table_returned(const struct nvidia_p2p_page_table *pt);
struct fnv_table *fnv_table_find_id(u64 id);
struct fnv_table *fnv_table_begin_invalidate(struct fnv_buffer *buf);
void fnv_table_end_invalidate(struct fnv_table *t);
void fnv_table_put_locked(struct fnv_table *t, const char *op);
struct fnv_mapping *fnv_mapping_lookup(const struct nvidia_p2p_dma_mapping *m);
void fnv_mapping_add(struct fnv_mapping *fm, struct fnv_table *t);
void fnv_mapping_destroy(struct fnv_mapping *fm);
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
	FNV_OP_CALLBACK,
	FNV_OP_NR
};

enum fnv_fault {
	FNV_FAULT_NONE,
	FNV_FAULT_ERRNO,
	FNV_FAULT_PAGESIZE,
	FNV_FAULT_VERSION,
	FNV_FAULT_SLEEP,	/* stall before the API lock, then go on */
	FNV_FAULT_SLEEP_LOCKED,	/* stall holding the API lock, then go on */
	FNV_FAULT_ENTRIES,	/* a table or mapping one entry short */
};

struct fnv_fault_req {
	enum fnv_fault kind;
	int err;
	unsigned int sleep_ms;
	unsigned int page_size;	/* FNV_FAULT_PAGESIZE: the page_size type */
};

extern const char *const fnv_op_names[FNV_OP_NR];
int fnv_inject_command(int argc, char **argv);
int fnv_inject_stalling(void);

/* canary.c: planted kernel reports, for the harness's own test */
int fnv_canary_command(int argc, char **argv);

/* misuse.c: misbehaving clients, each a bug the double must report */
int fnv_misuse_command(int argc, char **argv);

/* p2p.c: an injected get_pages error, with the table it leaves dangling */
int fnv_get_pages_injected(struct nvidia_p2p_page_table **page_table, u64 va, u64 len, int err);
void fnv_inject_take(enum fnv_op op, struct fnv_fault_req *req);
void fnv_inject_stall_locked(enum fnv_op op, const struct fnv_fault_req *req);
unsigned long fnv_inject_count(void);

/* p2p.c: get/put pages shared by the persistent entry points */
int fnv_p2p_get_pages(enum fnv_op op, u64 va, u64 len,
		      struct nvidia_p2p_page_table **page_table,
		      bool persistent, void (*free_callback)(void *data),
		      void *data, const struct fnv_fault_req *fault);

/* debugfs.c */
void fnv_debugfs_init(void);
void fnv_debugfs_exit(void);

#endif /* FAKE_NVIDIA_H */
