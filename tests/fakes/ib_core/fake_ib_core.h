/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal declarations of the ib_core test double.
 *
 * Lock order (outer to inner):
 *   fake_clients_lock (mutex; held across acquire() but no other client
 *                      call; also guards the memory_peers sysfs entries)
 *     -> fake_all_lock (spinlock, peer_client.c; leaf)
 *   mr->map_lock (mutex, per registration; held across get_pages, dma_map,
 *                 get_page_size, dma_unmap, put_pages and NIC DMA)
 *     -> nic->lock (mutex, one edu DMA program at a time)
 *     -> xarray locks (leaf)
 *   fake_dma_buf_lock (mutex, never held with any other lock of ours)
 * release() is called with none of our locks held, except by the 4.x core
 * inside invalidate (map_lock held), as that core did.
 */
#ifndef FAKE_IB_CORE_H
#define FAKE_IB_CORE_H

#ifndef pr_fmt
#define pr_fmt(fmt) "fake_ib_core: " fmt
#endif

#include <linux/atomic.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/scatterlist.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "peer_mem_abi.h"

struct seq_file;
struct task_struct;

#define FAKE_DMA_BUF_SIZE 4096

extern int fake_core_version;

/* ---- violations ---- */
extern atomic_t fake_violations;
#define fake_violation(fmt, ...)                                           \
	do {                                                               \
		atomic_inc(&fake_violations);                              \
		pr_err("FAKE-VIOLATION: " fmt "\n", ##__VA_ARGS__);        \
	} while (0)

/* ---- peer clients (peer_client.c) ---- */
struct fake_client_stats {
	atomic64_t num_alloc_mrs;
	atomic64_t num_dealloc_mrs;
	atomic64_t num_reg_pages;
	atomic64_t num_dereg_pages;
	atomic64_t num_reg_bytes;
	atomic64_t num_dereg_bytes;
	atomic64_t num_free_callbacks;
};

struct fake_client {
	struct kref ref;
	struct list_head node;     /* fake_clients, under fake_clients_lock */
	struct list_head all_node; /* fake_all_clients, under its spinlock */
	const struct peer_memory_client *ops;
	char name[IB_PEER_MEMORY_NAME_MAX];
	char version[IB_PEER_MEMORY_VER_MAX];
	bool ex;            /* extended form recognised */
	u32 flags;          /* PEER_MEM_* (0 unless ex) */
	bool invalidating;  /* got an invalidate function */
	struct xarray ctx_xa;   /* core_context -> struct fake_mr */
	u32 next_ctx;
	atomic_t nr_mrs;        /* registrations not yet released */
	wait_queue_head_t wq;
	struct kobject *kobj;   /* memory_peers/<name>, or NULL */
	struct fake_client_stats stats;
};

extern struct mutex fake_clients_lock;
extern struct list_head fake_clients;

void fake_client_put(struct fake_client *c);
void fake_client_mr_gone(struct fake_client *c);
bool fake_client_unmaps_itself(const struct fake_client *c);
void fake_client_set_kobj(struct fake_client *c, struct kobject *kobj);
bool fake_client_name_has_sysfs(const char *name);
int fake_client_poke_bogus(const char *name, u64 value);
void fake_clients_show(struct seq_file *m);
int fake_peer_init(void);
void fake_peer_exit(void);

/* ---- memory_peers sysfs (sysfs.c) ---- */
int fake_sysfs_add_client(struct fake_client *c);   /* fake_clients_lock held */
void fake_sysfs_del_client(struct fake_client *c);  /* fake_clients_lock held */
void fake_sysfs_exit(void);
/* For sysfs show(): copy a client's counters by kobject. */
bool fake_client_stats_by_kobj(struct kobject *kobj, char *version,
			       u64 *vals, int nvals);

/* ---- NICs (nic_edu.c) ---- */
struct fake_nic;

/* One contiguous DMA range of a registration, as the client mapped it. */
struct fake_seg {
	dma_addr_t dma;
	u64 len;
};

struct fake_nic *fake_nic_get(const char *name); /* takes a device ref */
void fake_nic_put(struct fake_nic *nic);
struct device *fake_nic_device(struct fake_nic *nic);
const char *fake_nic_name(struct fake_nic *nic);
/* Copy bytes [voff, voff+len) of the DMA space described by segs. */
int fake_nic_read(struct fake_nic *nic, const struct fake_seg *segs, int nsegs,
		  u64 voff, void *out, size_t len);
int fake_nic_write(struct fake_nic *nic, const struct fake_seg *segs, int nsegs,
		   u64 voff, const void *in, size_t len);
int fake_nic_selftest(const char *name);
int fake_nic_init(void);
void fake_nic_exit(void);

/* The non-PCI "none" device. */
extern struct device *fake_none_dev;

/* ---- registrations (mr.c) ---- */
enum fake_mr_state {
	FAKE_MR_REGISTERING,
	FAKE_MR_MAPPED,
	FAKE_MR_INVALIDATED,         /* core did not unmap (UNMAPS client) */
	FAKE_MR_INVALIDATED_UNMAPPED, /* core unmapped inside invalidate */
	FAKE_MR_RELEASED,            /* 4.x core: released inside invalidate */
	FAKE_MR_DEAD,                /* torn down or failed */
};

struct fake_mr {
	struct kref ref;
	unsigned long id;
	struct fake_client *client;
	void *client_ctx;
	u64 core_context;
	bool has_ctx_id;
	struct fake_nic *nic;        /* NULL for "none" */
	struct device *dma_dev;
	u64 addr;
	u64 len;
	bool ro;
	bool cq;

	struct mutex map_lock;
	struct task_struct *lock_owner; /* holder of map_lock, for re-entry checks */
	enum fake_mr_state state;    /* under map_lock */
	bool invalidated;            /* also read locklessly for "regs" */

	struct sg_table *sgt;        /* owned by the core, filled by the client */
	int nmap;
	unsigned long page_size;
	/* untrimmed DMA view for the NIC */
	struct fake_seg *segs;
	int nsegs;
	/* first/last entry trimming (page_size != PAGE_SIZE) */
	bool trimmed;
	struct scatterlist *first_sg, *last_sg;
	dma_addr_t first_dma;
	unsigned int first_dma_len, first_len;
	dma_addr_t last_dma;
	unsigned int last_dma_len, last_len;
};

extern atomic_t fake_stat_regs;
extern atomic_t fake_stat_invalidations;
extern atomic_t fake_stat_unmaps_in_invalidate;

int fake_mr_reg(unsigned long id, const char *dev, u64 addr, u64 len, bool ro,
		bool cq);
int fake_mr_dereg(unsigned long id);
int fake_mr_read(unsigned long id, u64 off, u64 len);
int fake_mr_write(unsigned long id, u64 off, u64 len);
/* Called by peer_client.c's invalidate with a ref held on mr. */
void fake_mr_invalidate(struct fake_mr *mr);
void fake_mr_put(struct fake_mr *mr);
void fake_regs_show(struct seq_file *m);
void fake_mr_exit(void);

/* ---- debugfs (debugfs.c) ---- */
int fake_debugfs_init(void);
void fake_debugfs_exit(void);
/* The 4 KiB dma_buf debugfs file contents. */
void fake_dma_buf_store(const void *data, size_t len);
void fake_dma_buf_load(void *data, size_t len);

#endif /* FAKE_IB_CORE_H */
