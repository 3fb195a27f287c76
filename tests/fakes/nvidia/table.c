// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: page table and DMA mapping objects, and tombs of
 * freed page tables. Everything here runs with fnv_lock held.
 *
 * Who frees what follows NVIDIA/open-gpu-kernel-modules
 * kernel-open/nvidia/nv-p2p.c (515.43.04 to 595.45.04): the RM free path
 * calls nv_p2p_mem_info_free_callback(), which runs the client's callback
 * and, once it returns, nv_p2p_free_platform_data() -> nv_p2p_free_page_table():
 * every DMA mapping of the table is unmapped and freed (its dma_addresses
 * array too), then the pages, the pages array, the UUID and the table
 * itself. nvidia_p2p_free_page_table() and nvidia_p2p_free_dma_mapping()
 * are no-ops there. Before R515 (flavour r470) the client freed them from
 * inside its callback (Mellanox/nv_peer_memory nv_peer_mem.c calls both
 * there; 515's nv-p2p.c says the no-ops are "left in place (for now)" for
 * such callers).
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/build_bug.h>
#include <linux/dma-mapping.h>
#include <linux/hashtable.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/string.h>

#include "fake_nvidia.h"

/* The layout the client relies on (x86_64). */
static_assert(sizeof(struct nvidia_p2p_page) == 32);
static_assert(offsetof(struct nvidia_p2p_page_table, page_size) == 4);
static_assert(offsetof(struct nvidia_p2p_page_table, pages) == 8);
static_assert(offsetof(struct nvidia_p2p_page_table, entries) == 16);
static_assert(offsetof(struct nvidia_p2p_page_table, gpu_uuid) == 24);
#if FNV_GEN >= 580
static_assert(offsetof(struct nvidia_p2p_page_table, flags) == 32);
static_assert(sizeof(struct nvidia_p2p_page_table) == 40);
#else
static_assert(sizeof(struct nvidia_p2p_page_table) == 32);
#endif
static_assert(offsetof(struct nvidia_p2p_dma_mapping, page_size_type) == 4);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, entries) == 8);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, dma_addresses) == 16);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, private) == 24);
static_assert(offsetof(struct nvidia_p2p_dma_mapping, pci_dev) == 32);

/* Enough to remember every table a test run frees. */
#define FNV_MAX_TOMBS	4096

static LIST_HEAD(fnv_tombs);
/* By address: every table creation and lookup finds a tomb without walking them all. */
static DEFINE_HASHTABLE(fnv_tomb_hash, 10);
static unsigned int fnv_ntombs;
/*
 * The live tables and mappings by the address the client holds, so that a
 * call finds its object without walking all of them: with 10 000 live
 * registrations a walk made every call hundreds of microseconds slower and
 * cooled the caches for the client's code after it (make bench).
 */
static DEFINE_HASHTABLE(fnv_table_hash, 12);
static DEFINE_HASHTABLE(fnv_mapping_hash, 12);
static atomic64_t fnv_death_seq = ATOMIC64_INIT(0);
static u64 fnv_next_id;

/* Tables freed after this value was read died "during" the call. */
u64 fnv_seq_now(void)
{
	return atomic64_read(&fnv_death_seq);
}

static void fnv_tomb_del(struct fnv_tomb *tomb)
{
	list_del(&tomb->node);
	hash_del(&tomb->hnode);
	fnv_ntombs--;
	kfree(tomb);
}

/* A new table got the address of a dead one: the old tomb is moot. */
static void fnv_tomb_forget(const void *ptr)
{
	struct hlist_node *next;
	struct fnv_tomb *tomb;

	hash_for_each_possible_safe(fnv_tomb_hash, tomb, next, hnode,
				    (unsigned long)ptr)
		if (tomb->ptr == ptr)
			fnv_tomb_del(tomb);
}

static void fnv_tomb_add(const struct fnv_table *t, enum fnv_death how)
{
	u64 seq = atomic64_inc_return(&fnv_death_seq);
	struct fnv_tomb *tomb;

	/*
	 * The detector's own record, not the real driver's: never failed (the sweep's failslab
	 * skips __GFP_NOFAIL), so that no injected failure blinds it.
	 */
	tomb = kzalloc(sizeof(*tomb), GFP_KERNEL | __GFP_NOFAIL);
	tomb->ptr = &t->pt;
	tomb->va = t->va;
	tomb->len = t->len;
	tomb->seq = seq;
	tomb->how = how;
	tomb->ret_pid = t->ret_pid;
	tomb->ret_seq = t->ret_seq;
	list_add_tail(&tomb->node, &fnv_tombs);
	hash_add(fnv_tomb_hash, &tomb->hnode, (unsigned long)tomb->ptr);
	if (++fnv_ntombs > FNV_MAX_TOMBS)
		fnv_tomb_del(list_first_entry(&fnv_tombs, struct fnv_tomb,
					      node));
}

/*
 * A get_pages that fails after the real driver allocated its table (nv-p2p.c 515-595:
 * *page_table = &mem_info->page_table, then nv_p2p_free_page_table() on the failed path, the
 * caller's pointer left as it is) hands back freed memory: a table freed at once, with a tomb,
 * so that reading it is KASAN's use-after-free and passing it back a FAKE-VIOLATION.
 * fnv_lock held.
 */
void fnv_table_dangle(struct nvidia_p2p_page_table **page_table, u64 va, u64 len)
{
	struct fnv_table *t;

	lockdep_assert_held(&fnv_lock);
	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return;	/* *page_table stays NULL, as when the driver's own allocation fails */
	t->va = va;
	t->len = len;
	fnv_tomb_add(t, FNV_DIED_FAILED_GET);
	*page_table = &t->pt;
	kfree(t);
}

/* ---- DMA mappings ---- */

struct fnv_mapping *fnv_mapping_lookup(const struct nvidia_p2p_dma_mapping *m)
{
	struct fnv_mapping *fm;

	lockdep_assert_held(&fnv_lock);
	if (!m)
		return NULL;
	hash_for_each_possible(fnv_mapping_hash, fm, hnode, (unsigned long)m)
		if (&fm->m == m)
			return fm;
	return NULL;
}

/* A new mapping of @t, made by dma_map_pages. */
void fnv_mapping_add(struct fnv_mapping *fm, struct fnv_table *t)
{
	lockdep_assert_held(&fnv_lock);
	list_add_tail(&fm->node, &fnv_mappings);
	hash_add(fnv_mapping_hash, &fm->hnode, (unsigned long)&fm->m);
	list_add_tail(&fm->table_node, &t->mappings);
}

static void fnv_mapping_unmap(struct fnv_mapping *fm)
{
	unsigned long i;

	for (i = 0; i < fm->npages; i++)
		dma_unmap_resource(&fm->peer->dev, fm->dma[i], FNV_PAGE_SIZE,
				   DMA_BIDIRECTIONAL, 0);
}

/* r470: the table died under the mapping: unmap it, keep the object. */
static void fnv_mapping_kill(struct fnv_mapping *fm)
{
	if (!fm->mapped)
		return;
	fnv_mapping_unmap(fm);
	fm->mapped = false;
	fnv_stats.mappings--;
	fnv_stats.dead_mappings++;
}

/* Unmap if needed and free the object, including what the client sees. */
void fnv_mapping_destroy(struct fnv_mapping *fm)
{
	lockdep_assert_held(&fnv_lock);
	if (fm->mapped) {
		fnv_mapping_unmap(fm);
		fnv_stats.mappings--;
	} else {
		fnv_stats.dead_mappings--;
	}
	list_del(&fm->node);
	hash_del(&fm->hnode);
	list_del(&fm->table_node);
	pci_dev_put(fm->peer);
	kvfree(fm->dma);
	kfree(fm);
}

/* ---- page tables ---- */

struct fnv_table *fnv_table_create(struct fnv_buffer *buf, u64 va, u64 len)
{
	struct fnv_table *t;
	unsigned long i;

	lockdep_assert_held(&fnv_lock);
	/* __GFP_ACCOUNT: a registration's objects of the doubles sit in the
	 * kmalloc-cg-* caches, apart from the module's (make bench's measure of
	 * the bytes the module holds, tests/fakes/INTERFACE.md). */
	t = kzalloc(sizeof(*t), GFP_KERNEL_ACCOUNT);
	if (!t)
		return NULL;

	t->npages = len >> FNV_PAGE_SHIFT;
	t->page_structs = kvcalloc(t->npages, sizeof(*t->page_structs),
				   GFP_KERNEL_ACCOUNT);
	if (!t->page_structs)
		goto err_free_table;
	t->page_ptrs = kvcalloc(t->npages, sizeof(*t->page_ptrs),
				GFP_KERNEL_ACCOUNT);
	if (!t->page_ptrs)
		goto err_free_structs;

	fnv_tomb_forget(&t->pt);
	INIT_LIST_HEAD(&t->mappings);
	INIT_LIST_HEAD(&t->buf_node);
	t->id = ++fnv_next_id;
	t->va = va;
	t->len = len;
	t->first = (va - buf->va) >> FNV_PAGE_SHIFT;
	t->owner = current->tgid;
	memcpy(t->uuid, buf->gpu->uuid, FNV_UUID_LEN);

	for (i = 0; i < t->npages; i++) {
		t->page_structs[i].physical_address =
			fnv_gpu_page_phys(buf->gpu, buf->pages[t->first + i]);
		t->page_ptrs[i] = &t->page_structs[i];
	}

	t->pt.version = NVIDIA_P2P_PAGE_TABLE_VERSION;
	t->pt.page_size = NVIDIA_P2P_PAGE_SIZE_64KB;
	t->pt.pages = t->page_ptrs;
	t->pt.entries = t->npages;
	t->pt.gpu_uuid = t->uuid;
#if FNV_GEN >= 580
	/* BAR1 over PCIe is not CPU-cacheable (osapi.c: nv->coherent). */
	t->pt.flags = 0;
#endif
	list_add_tail(&t->node, &fnv_tables);
	hash_add(fnv_table_hash, &t->hnode, (unsigned long)&t->pt);
	return t;

err_free_structs:
	kvfree(t->page_structs);
err_free_table:
	kfree(t);
	return NULL;
}

void fnv_table_pin(struct fnv_table *t, struct fnv_buffer *buf)
{
	lockdep_assert_held(&fnv_lock);
	t->buf = buf;
	list_add_tail(&t->buf_node, &buf->tables);
	buf->pins++;
	fnv_stats.pins++;
	if (t->persistent) {
		buf->persistent_pins++;
		fnv_stats.persistent_pins++;
	}
}

/* Stop @t pinning its buffer; the caller releases the buffer if needed. */
void fnv_table_unpin(struct fnv_table *t)
{
	struct fnv_buffer *buf = t->buf;

	lockdep_assert_held(&fnv_lock);
	if (!buf)
		return;
	list_del_init(&t->buf_node);
	buf->pins--;
	fnv_stats.pins--;
	if (t->persistent) {
		buf->persistent_pins--;
		fnv_stats.persistent_pins--;
	}
	t->buf = NULL;
}

/*
 * Free an unpinned table and every mapping still on it: the memory the
 * client points at goes now, so KASAN reports any later use.
 */
void fnv_table_free(struct fnv_table *t, enum fnv_death how)
{
	struct fnv_mapping *fm, *next;

	lockdep_assert_held(&fnv_lock);
	WARN_ON(t->buf);
	list_for_each_entry_safe(fm, next, &t->mappings, table_node)
		fnv_mapping_destroy(fm);
	if (t->state == FNV_TABLE_DEAD)
		fnv_stats.dead_tables--;
	fnv_tomb_add(t, how);
	list_del(&t->node);
	hash_del(&t->hnode);
	kvfree(t->page_ptrs);
	kvfree(t->page_structs);
	kfree(t);
}

/*
 * What @pt refers to. Never dereferences it: it is only compared with the
 * tables we have and the ones we freed. @since is fnv_seq_now() at the
 * start of the call.
 */
enum fnv_pt_state fnv_table_resolve(const struct nvidia_p2p_page_table *pt,
				    u64 since, struct fnv_table **tp,
				    struct fnv_tomb **tombp)
{
	struct fnv_tomb *tomb;
	struct fnv_table *t;

	lockdep_assert_held(&fnv_lock);
	*tp = NULL;
	*tombp = NULL;
	if (!pt)
		return FNV_PT_UNKNOWN;
	hash_for_each_possible(fnv_table_hash, t, hnode, (unsigned long)pt) {
		if (&t->pt == pt) {
			*tp = t;
			return FNV_PT_TABLE;
		}
	}
	/* At most one tomb per address: a new table there forgets the old one. */
	hash_for_each_possible(fnv_tomb_hash, tomb, hnode, (unsigned long)pt) {
		if (tomb->ptr == pt) {
			*tombp = tomb;
			return tomb->seq > since ? FNV_PT_DIED_DURING :
						   FNV_PT_DIED_BEFORE;
		}
	}
	return FNV_PT_UNKNOWN;
}

/* The table-taking calls that wait for the API lock (osapi.c 595). */
static bool fnv_op_takes_api_lock(const char *op)
{
	return !strcmp(op, "put_pages") || !strcmp(op, "dma_map_pages");
}

static const char *const fnv_death_during[] = {
	[FNV_DIED_CALLBACK] = "freed by its free callback",
	[FNV_DIED_PUT] = "put by another thread",
	[FNV_DIED_CLIENT_FREE] = "freed with nvidia_p2p_free_page_table",
	[FNV_DIED_FAILED_GET] = "freed by the get_pages that failed",
};

static const char *const fnv_death_before[] = {
	[FNV_DIED_CALLBACK] = "its free callback returned",
	[FNV_DIED_PUT] = "it was put",
	[FNV_DIED_CLIENT_FREE] = "it was freed with nvidia_p2p_free_page_table",
	[FNV_DIED_FAILED_GET] = "the get_pages that returned it failed (and freed it)",
};

/*
 * The client could have known: a call on the table by this same thread returned after its
 * free callback had returned (the table died at tomb->seq, the return read the sequence at or
 * after it). Between that return and this call the client could look at what its callback
 * recorded, holding its own lock; a client that calls again without looking is not in the
 * driver's window but in one it can close (tests/fakes/INTERFACE.md, rule 5): a violation.
 * Another thread's return proves nothing about this one's last look, and is not tracked.
 */
static bool fnv_tomb_seen_dead(const char *op, const struct fnv_tomb *tomb)
{
	if (tomb->ret_pid != current->pid || tomb->ret_seq < tomb->seq)
		return false;
	fnv_violation("%s: page table of va=0x%llx used again by this thread after a call on it returned past its free callback (use after free in the real driver; the client could have looked)\n",
		      op, tomb->va);
	return true;
}

/*
 * A call on @pt is about to return to the client (the last thing before it does): note which
 * thread and when, on the table or, if it died meanwhile, on its tomb (fnv_tomb_seen_dead).
 * Takes fnv_lock.
 */
void fnv_table_returned(const struct nvidia_p2p_page_table *pt)
{
	struct fnv_tomb *tomb;
	struct fnv_table *t;

	if (!pt)
		return;
	mutex_lock(&fnv_lock);
	switch (fnv_table_resolve(pt, 0, &t, &tomb)) {
	case FNV_PT_TABLE:
		t->ret_pid = current->pid;
		t->ret_seq = fnv_seq_now();
		break;
	case FNV_PT_DIED_DURING:
	case FNV_PT_DIED_BEFORE:
		tomb->ret_pid = current->pid;
		tomb->ret_seq = fnv_seq_now();
		break;
	default:
		break;
	}
	mutex_unlock(&fnv_lock);
}

/*
 * Report a page table pointer that is not a live object and return
 * -EINVAL; 0 for FNV_PT_TABLE. A table its free callback freed while a call
 * that takes the API lock waited for it is what the real driver would use
 * after free whatever the client does: a hazard of the real driver. Any
 * other table that died during the call, or one that died before the call
 * started (but for the exception below), is a client bug.
 */
int fnv_table_report(const char *op, enum fnv_pt_state st,
		     struct fnv_tomb *tomb,
		     const struct nvidia_p2p_page_table *pt)
{
	const char *lock = strcmp(op, "dma_unmap_pages") ?
			   "the API lock" : "the table's mapping lock";

	switch (st) {
	case FNV_PT_TABLE:
		return 0;
	case FNV_PT_DIED_DURING:
		/*
		 * The driver's own window is only a table its free callback freed while a call
		 * that takes the API lock waited for it: the free path holds that lock across the
		 * callback, so the callback cannot wait for the call. Anything else a client can
		 * order: a table put or freed by another of its threads, or freed after its
		 * callback while dma_unmap_pages ran (that call takes no API lock, so the
		 * callback can wait for an unmap in flight).
		 */
		if (tomb->how == FNV_DIED_CALLBACK && fnv_op_takes_api_lock(op)) {
			if (fnv_tomb_seen_dead(op, tomb))
				return -EINVAL;
			fnv_stats.hazards++;
			pr_err("REAL-DRIVER-HAZARD: %s: page table of va=0x%llx was %s while this call waited for %s (use after free in the real driver)\n",
			       op, tomb->va, fnv_death_during[tomb->how], lock);
			return -EINVAL;
		}
		fnv_violation("%s: page table of va=0x%llx was %s while this call ran (use after free in the real driver; the client can order it)\n",
			      op, tomb->va, fnv_death_during[tomb->how]);
		return -EINVAL;
	case FNV_PT_DIED_BEFORE:
		/*
		 * put_pages and dma_map_pages take the API lock, so a client
		 * must call them holding no lock of its own that the free
		 * callback takes: a callback can complete between the client's
		 * last look and this entry, and no client can order that.
		 * Only a table the client itself put or freed before is its bug.
		 */
		if (tomb->how == FNV_DIED_CALLBACK && fnv_op_takes_api_lock(op)) {
			if (fnv_tomb_seen_dead(op, tomb))
				return -EINVAL;
			fnv_stats.hazards++;
			pr_err("REAL-DRIVER-HAZARD: %s: page table of va=0x%llx was freed by its free callback just before this call (use after free in the real driver)\n",
			       op, tomb->va);
			return -EINVAL;
		}
		fnv_violation("%s: page table of va=0x%llx used after %s (use after free in the real driver)\n",
			      op, tomb->va, fnv_death_before[tomb->how]);
		return -EINVAL;
	default:
		fnv_violation("%s: %p is not a page table of ours\n", op, pt);
		return -EINVAL;
	}
}

/*
 * What the real driver does first with a table pointer, in one step: look it up
 * (fnv_table_resolve) and report anything but a table of ours (fnv_table_report).
 * 0 with *tp set, or -EINVAL after the report. fnv_lock held.
 */
int fnv_table_check(const char *op, const struct nvidia_p2p_page_table *pt,
		    u64 since, struct fnv_table **tp)
{
	struct fnv_tomb *tomb;
	enum fnv_pt_state st = fnv_table_resolve(pt, since, tp, &tomb);

	return fnv_table_report(op, st, tomb, pt);
}

struct fnv_table *fnv_table_find_id(u64 id)
{
	struct fnv_table *t;

	lockdep_assert_held(&fnv_lock);
	list_for_each_entry(t, &fnv_tables, node)
		if (t->id == id)
			return t;
	return NULL;
}

/*
 * Start invalidating the next live table of @buf that has a free callback
 * (tables pinned persistently keep the memory). It stops pinning the buffer
 * and becomes INVALIDATING while the caller runs its callback.
 */
struct fnv_table *fnv_table_begin_invalidate(struct fnv_buffer *buf)
{
	struct fnv_table *t;

	lockdep_assert_held(&fnv_lock);
	list_for_each_entry(t, &buf->tables, buf_node) {
		if (t->persistent || !t->free_callback)
			continue;
		fnv_table_unpin(t);
		t->state = FNV_TABLE_INVALIDATING;
		fnv_stats.callbacks++;
		return t;
	}
	return NULL;
}

/* The callback of @t returned. */
void fnv_table_end_invalidate(struct fnv_table *t)
{
	struct fnv_mapping *fm;

	lockdep_assert_held(&fnv_lock);
	if (FNV_DRIVER_FREES) {
		fnv_table_free(t, FNV_DIED_CALLBACK);
		return;
	}
	/* r470: unmap what the client left, keep the objects for it to free. */
	list_for_each_entry(fm, &t->mappings, table_node)
		fnv_mapping_kill(fm);
	t->state = FNV_TABLE_DEAD;
	fnv_stats.dead_tables++;
}

/* put_pages / put_pages_persistent on a pinned table. */
void fnv_table_put_locked(struct fnv_table *t, const char *op)
{
	struct fnv_buffer *buf = t->buf;
	struct fnv_mapping *fm;

	lockdep_assert_held(&fnv_lock);
	/* nv-p2p.c nv_p2p_put_pages -> nv_p2p_free_page_table frees them. */
	list_for_each_entry(fm, &t->mappings, table_node)
		pr_info("%s: va=0x%llx is still DMA-mapped for %s: the driver unmaps and frees that mapping\n",
			op, t->va, pci_name(fm->peer));
	fnv_table_unpin(t);
	fnv_table_free(t, FNV_DIED_PUT);
	fnv_buffer_release_if_unused(buf);
}

/* Module exit: every object still around was leaked by a client. */
void fnv_p2p_teardown(void)
{
	struct fnv_mapping *fm, *fm_next;
	struct fnv_table *t, *t_next;
	struct fnv_tomb *tomb, *tomb_next;

	mutex_lock(&fnv_lock);
	list_for_each_entry_safe(fm, fm_next, &fnv_mappings, node) {
		fnv_violation("unload: DMA mapping of va=0x%llx for %s was never %s\n",
			      fm->table->va, pci_name(fm->peer),
			      fm->mapped ? "unmapped" : "freed");
		fnv_mapping_destroy(fm);
	}
	list_for_each_entry_safe(t, t_next, &fnv_tables, node) {
		if (t->state == FNV_TABLE_LIVE)
			fnv_violation("unload: %spin va=0x%llx len=0x%llx was never put\n",
				      t->persistent ? "persistent " : "",
				      t->va, t->len);
		else
			fnv_violation("unload: page table va=0x%llx len=0x%llx was never freed after its free callback\n",
				      t->va, t->len);
		fnv_table_unpin(t);
		fnv_table_free(t, FNV_DIED_PUT);
	}
	list_for_each_entry_safe(tomb, tomb_next, &fnv_tombs, node)
		fnv_tomb_del(tomb);
	mutex_unlock(&fnv_lock);
}
