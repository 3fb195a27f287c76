/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal declarations of the ib_core test double.
 *
 * "Real source" below means wjz304/mlnx-ofed-kernel: 24.07 = commit 2c0186b
 * (drivers/infiniband/core/peer_mem.c, ib_peer_mem.h, umem.c,
 * hw/mlx5/mr.c, backports/0019-BACKPORT-drivers-infiniband-core-peer_mem.c.patch),
 * 4.9 = commit 8ba4057 (drivers/infiniband/core/peer_mem.c, umem.c,
 * include/rdma/ib_peer_mem.h, hw/mlx5/mr.c).
 *
 * Lock order (outer to inner):
 *   fake_clients_lock (mutex = the real peer_memory_mutex; held across
 *                      acquire() and the memory_peers sysfs updates)
 *     -> fake_all_lock (spinlock, peer_client.c; leaf)
 *   client->v4_lock (4.9 only: the real ib_peer_client->lock; held by
 *                    invalidate across the whole unmap/put/release)
 *     -> mr->map_lock (5.x: the real per-umem mapping_lock; 4.9: unused)
 *       -> mr->dma_lock (the fake NIC's: revocation vs. in-flight DMA)
 *         -> nic->lock (one edu DMA program at a time)
 *   fake_dma_buf_lock (never held with any other lock of ours)
 */
#ifndef FAKE_IB_CORE_H
#define FAKE_IB_CORE_H

#ifndef pr_fmt
#define pr_fmt(fmt) "fake_ib_core: " fmt
#endif

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/kobject.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/scatterlist.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>
#include <linux/xarray.h>

#include "peer_mem_abi.h"

struct seq_file;

#define FAKE_DMA_BUF_SIZE 4096
/* How long a waiter for a core lock waits before calling it a deadlock. */
#define FAKE_DEADLOCK_SECS 30

extern int fake_core_version;	/* 4 or 5 */
static inline bool fake_v4(void)
{
	return fake_core_version == 4;
}
bool fake_memory_peers_enabled(void);

/* ---- violations ---- */
extern atomic_t fake_violations;
extern atomic_t fake_stat_deadlocks;
#define fake_violation(fmt, ...)                                           \
	do {                                                               \
		atomic_inc(&fake_violations);                              \
		pr_err("FAKE-VIOLATION: " fmt "\n", ##__VA_ARGS__);        \
	} while (0)

/* ---- a mutex whose holder and activity are known (xlock.c) ---- */
struct fake_xlock {
	struct mutex mutex;
	wait_queue_head_t wq;
	spinlock_t info_lock;	/* owner_* and doing */
	struct task_struct *owner;
	pid_t owner_pid;
	char owner_comm[TASK_COMM_LEN];
	const char *doing;
};

void fake_xlock_init(struct fake_xlock *l);
void fake_xlock_destroy(struct fake_xlock *l);
/* Wait up to @secs (0: forever); false on timeout (not locked). */
bool fake_xlock_lock_timed(struct fake_xlock *l, unsigned int secs);
void fake_xlock_unlock(struct fake_xlock *l);
bool fake_xlock_held_by_me(struct fake_xlock *l);
/* Describe what the holder does, if we are the holder. */
void fake_xlock_doing(struct fake_xlock *l, const char *what);
/* "comm/pid (doing)" of the current holder, for deadlock reports. */
void fake_xlock_describe(struct fake_xlock *l, char *buf, size_t size);
/* Lock that reports a deadlock after FAKE_DEADLOCK_SECS and keeps waiting. */
void fake_xlock_lock_reporting(struct fake_xlock *l, const char *waiter);

/* ---- fault/stall injection (inject.c) ---- */
enum fake_inject_point {
	FAKE_INJ_AFTER_ACQUIRE,
	FAKE_INJ_AFTER_GET_PAGES,
	FAKE_INJ_AFTER_DMA_MAP,
	FAKE_INJ_TEARDOWN_UNLOCKED,
	FAKE_INJ_BEFORE_RELEASE,
	FAKE_INJ_COUNT,
};
/* Runs a pending stall (logs) and returns a pending errno, or 0. */
int fake_inject(enum fake_inject_point p);
int fake_inject_set(const char *point, const char *what, unsigned int count);
void fake_inject_clear(void);

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
	bool ex;            /* 5.x: version[15] != 0 (display only) */
	u32 flags;          /* 5.x: flags if ex_size covers them (display) */
	bool invalidating;  /* got an invalidate function */
	/* 5.x: umem_xa (xa_id -> mr); 4.9: ticket list (ticket -> mr) */
	struct xarray ctx_xa;
	u32 next_ctx;       /* 5.x xa_cyclic_next */
	u64 last_ticket;    /* 4.9, starts at 1, under v4_lock */
	struct fake_xlock v4_lock;
	atomic_t nr_mrs;    /* acquired, not yet released (usecnt - 1) */
	wait_queue_head_t wq;
	struct kobject *kobj;   /* memory_peers/<name>, or NULL */
	struct fake_client_stats stats;
};

extern struct mutex fake_clients_lock;
extern struct list_head fake_clients;

void fake_client_put(struct fake_client *c);
/* The real ib_put_peer_client(): release() then drop the use count. */
void fake_client_release_ctx(struct fake_client *c, void *ctx);
/* 24.07 ib_peer_unmap_on_invalidate(). */
bool fake_client_unmaps_itself(const struct fake_client *c);
/* The real ib_get_peer_client(): acquire loop; NULL if nobody claims. */
extern atomic_long_t fake_stat_declined;
struct fake_client *fake_client_acquire(unsigned long id, u64 addr, u64 len,
					bool cq, void **ctx);
void fake_client_set_kobj(struct fake_client *c, struct kobject *kobj);
bool fake_client_name_has_sysfs(const char *name);
int fake_client_poke_bogus(const char *name, u64 value);
struct fake_client *fake_client_by_name(const char *name);

/* calls.c: "call", a misbehaving core */
int fake_calls(int argc, char **argv);
void fake_calls_show(struct seq_file *m);
void fake_clients_show(struct seq_file *m);
int fake_peer_init(void);
void fake_peer_exit(void);

/* ---- memory_peers sysfs (sysfs.c) ---- */
/* Called with fake_clients_lock held; @first: the client list is empty. */
int fake_sysfs_add_client(struct fake_client *c, bool first);
void fake_sysfs_del_client(struct fake_client *c);
void fake_sysfs_put_parent(void);
void fake_sysfs_exit(void);
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
int fake_nic_read(struct fake_nic *nic, const struct fake_seg *segs, int nsegs,
		  u64 voff, void *out, size_t len);
int fake_nic_write(struct fake_nic *nic, const struct fake_seg *segs, int nsegs,
		   u64 voff, const void *in, size_t len);
int fake_nic_selftest(const char *name);
int fake_nic_canary_dmar_fault(const char *name); /* tests/canaries/ */
int fake_nic_init(void);
void fake_nic_exit(void);

extern struct device *fake_none_dev;

/* ---- registrations ---- */
/* 24.07 ib_peer_mem.h enum ib_umem_mapped_state (same order). */
enum fake_map_state {
	FAKE_UNMAPPED,
	FAKE_MAPPED,
	FAKE_INVALIDATED,
};

struct fake_mr {
	struct kref ref;
	unsigned long id;
	struct fake_client *client;
	void *client_ctx;
	struct fake_nic *nic;        /* NULL for "none" */
	struct device *dma_dev;
	u64 addr;
	u64 len;
	bool ro;
	bool cq;
	u64 core_context;            /* as passed to get_pages */

	/* The core's sg_table (umem->sgt_append.sgt / umem->sg_head). */
	struct sg_table sgt;
	int nmap;                    /* 4.9 umem->nmap; 5.x: copy for "regs" */
	unsigned long page_size;
	unsigned long nic_page_size; /* ib_umem_find_best_pgsz() for mlx5 MRs */
	u64 sg_bytes;                /* what the client's entries cover, untrimmed */
	unsigned int page_shift;     /* 4.9 umem->page_shift */

	/* ---- 5.x (24.07 struct ib_umem_peer) ---- */
	struct fake_xlock map_lock;  /* mapping_lock */
	enum fake_map_state state;   /* mapped_state */
	bool notifier_active;        /* invalidation_func != NULL */
	u32 xa_id;
	struct scatterlist *first_sg;
	dma_addr_t first_dma_address;
	unsigned int first_dma_length;
	unsigned int first_length;
	struct scatterlist *last_sg;
	unsigned int last_dma_length;
	unsigned int last_length;

	/* ---- 4.9 (struct invalidation_ctx + mlx5_ib_mr bits) ---- */
	bool has_ticket;
	bool v4_func;                /* invalidation_ctx->func set */
	bool peer_invalidated;
	bool peer_callback;
	bool inflight_invalidation;
	struct completion inflight_comp;     /* invalidation_ctx->comp */
	atomic_t v4_invalidated;             /* mlx5_ib_mr->invalidated */
	struct completion invalidation_comp; /* mlx5_ib_mr->invalidation_comp */

	/* ---- the fake NIC ---- */
	struct mutex dma_lock;       /* revoked vs. DMA in flight */
	bool revoked;                /* NIC access gone (dma_lock) */
	bool invalidated;            /* revoked by an invalidation ("regs") */
};

extern atomic_t fake_stat_regs;
extern atomic_t fake_stat_invalidations;
extern atomic_t fake_stat_unmaps_in_invalidate;

/* mr.c: common parts */
int fake_mr_reg(unsigned long id, const char *dev, u64 addr, u64 len, bool ro,
		bool cq);
int fake_mr_dereg(unsigned long id, bool worker);
bool fake_mr_exists(unsigned long id);
int fake_mr_read(unsigned long id, u64 off, u64 len);
int fake_mr_write(unsigned long id, u64 off, u64 len);
void fake_mr_get(struct fake_mr *mr);
void fake_mr_put(struct fake_mr *mr);
/* The NIC stops using the registration; waits for DMA in flight. */
void fake_mr_revoke(struct fake_mr *mr, bool by_invalidation);
void fake_regs_show(struct seq_file *m);
void fake_mr_exit(void);

/* sg.c: checks of the client's sg list, 5.x first/last entry trimming */
int fake_sg_check(struct fake_mr *mr, int nents);
void fake_sg_fix(struct fake_mr *mr);        /* 24.07 fix_peer_sgls() */
void fake_sg_restore(struct fake_mr *mr);    /* restore part of ib_unmap_peer_client() */
unsigned long fake_sg_best_pgsz(struct fake_mr *mr);
/* NIC view from the live sg list; caller frees *segs. */
int fake_sg_segs(struct fake_mr *mr, struct fake_seg **segs, u64 *base);

/* results.c: the lines bench and stress keep for their debugfs files (fake-only) */
struct fake_results {
	struct mutex lock;
	char *buf;
	size_t len;
};
#define FAKE_RESULTS_INIT(name) { .lock = __MUTEX_INITIALIZER(name.lock) }
int fake_results_add(struct fake_results *r, const char *line, size_t n);
void fake_results_clear(struct fake_results *r);
void fake_results_show(struct fake_results *r, struct seq_file *m);
void fake_results_free(struct fake_results *r);

/* bench.c (fake-only, make bench) */
int fake_bench(const char *tag, const char *devname, u64 addr, u64 len,
	       unsigned long iters);
void fake_bench_clear(void);
void fake_bench_show(struct seq_file *m);
void fake_bench_exit(void);

/* stress.c: races in the kernel (fake-only) */
int fake_stress(const char *race, unsigned long iters, unsigned int jitter_us,
		const char *dev);
void fake_stress_clear(void);
void fake_stress_show(struct seq_file *m);
void fake_stress_exit(void);

/* core_v5.c */
int fake_v5_reg(struct fake_mr *mr);
void fake_v5_dereg(struct fake_mr *mr);
int fake_v5_invalidate(struct fake_client *c, u64 core_context);

/* core_v4.c */
int fake_v4_reg(struct fake_mr *mr);
void fake_v4_dereg(struct fake_mr *mr);
int fake_v4_invalidate(struct fake_client *c, u64 core_context);

/* ---- debugfs (debugfs.c) ---- */
int fake_debugfs_init(void);
void fake_debugfs_exit(void);
void fake_dma_buf_store(const void *data, size_t len);
void fake_dma_buf_load(void *data, size_t len);

#endif /* FAKE_IB_CORE_H */
