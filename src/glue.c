// SPDX-License-Identifier: GPL-2.0
/*
 * The C half of nv_peer_mem: module parameters (visible and, for enable_dbg, writable under
 * /sys/module/nv_peer_mem/parameters/, on every kernel line) and the kernel helpers the Rust
 * crate cannot reach through bindings (inline functions and macros). Prototypes: glue.h; Rust
 * calls them through src/glue.rs.
 */
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/namei.h>
#include <linux/pci.h>
#include <linux/sched.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/xarray.h>

#include "glue.h"

/*
 * Shown by modinfo and in /sys/module/nv_peer_mem/version (the service's status reads it); the
 * packaging tests check that it matches VERSION in clients.rs and dkms.conf.
 */
MODULE_VERSION("1.4.0");

/*
 * Sets an int parameter to @val if it is an integer from @lo to 1; anything else fails the load
 * (or the write) with -EINVAL and a log line naming the values allowed.
 */
static int nvpm_param_set_upto_1(const char *val, const struct kernel_param *kp, int lo,
				 const char *allowed)
{
	int v, ret = kstrtoint(val, 0, &v);

	if (ret || v < lo || v > 1) {
		pr_err("nv_peer_mem: %s must be %s, got '%s'\n", kp->name, allowed, val);
		return -EINVAL;
	}
	WRITE_ONCE(*(int *)kp->arg, v);
	return 0;
}

/* Accepts only 0 or 1. */
static int nvpm_param_set_switch(const char *val, const struct kernel_param *kp)
{
	return nvpm_param_set_upto_1(val, kp, 0, "0 or 1");
}

static const struct kernel_param_ops nvpm_switch_ops = {
	.set = nvpm_param_set_switch,
	.get = param_get_int,
};

static int enable_dbg;
module_param_cb(enable_dbg, &nvpm_switch_ops, &enable_dbg, 0644);
MODULE_PARM_DESC(enable_dbg, "Log every registration step (0 = off, default; 1 = on)");

static int peerdirect_support;
module_param_cb(peerdirect_support, &nvpm_switch_ops, &peerdirect_support, 0444);
MODULE_PARM_DESC(peerdirect_support,
		 "0 = extended registration with PEER_MEM_INVALIDATE_UNMAPS (MLNX_OFED 5.1+, default); 1 = legacy registration for MLNX_OFED 4.9 LTS");

static int persistent_api_support;
module_param_cb(persistent_api_support, &nvpm_switch_ops, &persistent_api_support, 0444);
MODULE_PARM_DESC(persistent_api_support,
		 "0 = invalidating client nv_mem plus persistent client nv_mem_nc (default); 1 = a single persistent client named nv_mem");

static int probe_then_pin;
module_param_cb(probe_then_pin, &nvpm_switch_ops, &probe_then_pin, 0644);
MODULE_PARM_DESC(probe_then_pin,
		 "0 = acquire pins once and get_pages keeps that pin (default); 1 = acquire pins and unpins to probe, get_pages pins again, as the C modules do");

/* -1 (auto: on, except in legacy mode), 0 or 1. */
static int nvpm_param_set_tristate(const char *val, const struct kernel_param *kp)
{
	return nvpm_param_set_upto_1(val, kp, -1, "-1, 0 or 1");
}

static const struct kernel_param_ops nvpm_tristate_ops = {
	.set = nvpm_param_set_tristate,
	.get = param_get_int,
};

static int coalesce_sg = -1;
module_param_cb(coalesce_sg, &nvpm_tristate_ops, &coalesce_sg, 0644);
MODULE_PARM_DESC(coalesce_sg,
		 "Merge DMA-contiguous GPU pages into one sg entry: -1 = auto (on, off with peerdirect_support=1; default), 0 = one entry per 64 KiB page, 1 = on");

int nvpm_param_probe_then_pin(void)
{
	return READ_ONCE(probe_then_pin);
}

int nvpm_param_coalesce_sg(void)
{
	return READ_ONCE(coalesce_sg);
}

int nvpm_param_enable_dbg(void)
{
	return READ_ONCE(enable_dbg);
}

int nvpm_param_peerdirect_support(void)
{
	return peerdirect_support;
}

int nvpm_param_persistent_api_support(void)
{
	return persistent_api_support;
}

/* The PCI device behind @dev, or NULL when @dev is not a PCI device. */
struct pci_dev *nvpm_dev_to_pci(struct device *dev)
{
	return dev && dev_is_pci(dev) ? to_pci_dev(dev) : NULL;
}

/* Domain, bus and devfn packed as DDDDBBFF (PCI domains on these systems fit 16 bits). */
u32 nvpm_pci_bdf(struct pci_dev *pdev)
{
	return (u32)(pci_domain_nr(pdev->bus) & 0xffff) << 16 | (u32)pdev->bus->number << 8 |
	       pdev->devfn;
}

/* Monotonic nanoseconds (a registration's age in the debugfs view). */
u64 nvpm_now_ns(void)
{
	return ktime_get_ns();
}

/*
 * A module reference per registration context, so that rmmod fails with EBUSY while ib_core or a
 * free callback can still call in.
 */
void nvpm_module_get(void)
{
	__module_get(THIS_MODULE);
}

void nvpm_module_put(void)
{
	module_put(THIS_MODULE);
}

/*
 * Whether the module NAME is loaded: /sys/module/<name> exists (modules cannot look each other
 * up by name since find_module() stopped being exported, Linux 5.12; sysfs is at /sys wherever
 * modprobe runs).
 */
bool nvpm_module_loaded(const char *name)
{
	char dir[64];
	struct path path;

	if (snprintf(dir, sizeof(dir), "/sys/module/%s", name) >= sizeof(dir))
		return false;
	if (kern_path(dir, LOOKUP_FOLLOW, &path))
		return false;
	path_put(&path);
	return true;
}

/*
 * Optional entry points of nvidia.ko. Weak references resolve to NULL when the loaded driver
 * does not export them (symbol_get() cannot be used: it refuses symbols that are not exported
 * GPL-only, and NVIDIA's are plain EXPORT_SYMBOL).
 */
extern int nvidia_p2p_get_pages_persistent(u64 va, u64 len, void **page_table, u32 flags) __weak;
extern int nvidia_p2p_put_pages_persistent(u64 va, void *page_table, u32 flags) __weak;
extern const int nvidia_p2p_cap_persistent_pages __weak;

bool nvpm_nvidia_has_persistent_api(void)
{
	return nvidia_p2p_get_pages_persistent && nvidia_p2p_put_pages_persistent;
}

/*
 * Direct calls (not through pointers handed to Rust), so that every call into nvidia.ko is a
 * call instruction the fault-injection sweep finds in the module (tests/sweep/). Only called
 * when nvpm_nvidia_has_persistent_api() said yes.
 */
int nvpm_nvidia_get_pages_persistent(u64 va, u64 len, void **page_table)
{
	return nvidia_p2p_get_pages_persistent(va, len, page_table, 0);
}

int nvpm_nvidia_put_pages_persistent(u64 va, void *page_table)
{
	return nvidia_p2p_put_pages_persistent(va, page_table, 0);
}

bool nvpm_nvidia_has_cap_persistent_pages(void)
{
	return &nvidia_p2p_cap_persistent_pages != NULL;
}

/*
 * The sg list handed to ib_core lives in a struct sg_table of our own: ib_core gets a copy of
 * the header, and MLNX_OFED 5.x zeroes its copy after an unmap or an invalidation, so the list
 * can only be freed through ours. GPU memory has no struct page: entries carry DMA addresses
 * and lengths only, one entry per run. The caller fills the @n entries in order with
 * nvpm_sg_set(), from nvpm_sg_first(), then hands the header over with nvpm_sg_publish().
 */
struct sg_table *nvpm_sg_alloc(unsigned int n)
{
	struct sg_table *own;

	own = kzalloc(sizeof(*own), GFP_KERNEL);
	if (!own)
		return NULL;
	if (sg_alloc_table(own, n, GFP_KERNEL)) {
		kfree(own);
		return NULL;
	}
	return own;
}

struct scatterlist *nvpm_sg_first(struct sg_table *own)
{
	return own->sgl;
}

/* Fills @sg with one run; returns the next entry (NULL after the last). */
struct scatterlist *nvpm_sg_set(struct scatterlist *sg, u64 dma, unsigned int len)
{
	sg->length = len;
	sg_dma_address(sg) = dma;
	sg_dma_len(sg) = len;
	return sg_next(sg);
}

void nvpm_sg_publish(struct sg_table *core_sgt, const struct sg_table *own)
{
	*core_sgt = *own;
}

/* Bytes the allocator gives for a kmalloc() of @size: its size class. */
size_t nvpm_alloc_bytes(size_t size)
{
	return kmalloc_size_roundup(size);
}

/*
 * Bytes the allocator gave for @own and its entry list. __sg_alloc_table() allocates blocks of
 * at most SG_MAX_SINGLE_ALLOC entries, each but the last ending in a link entry; a full block is
 * a page, a smaller one a kmalloc() (sg_kmalloc()).
 */
size_t nvpm_sg_bytes(const struct sg_table *own)
{
	size_t left = own->orig_nents, bytes = kmalloc_size_roundup(sizeof(*own));

	while (left) {
		size_t block = min_t(size_t, left, SG_MAX_SINGLE_ALLOC);

		if (block == SG_MAX_SINGLE_ALLOC)
			bytes += PAGE_SIZE;
		else
			bytes += kmalloc_size_roundup(block * sizeof(struct scatterlist));
		left -= left > SG_MAX_SINGLE_ALLOC ? SG_MAX_SINGLE_ALLOC - 1 : left;
	}
	return bytes;
}

void nvpm_sg_destroy(struct sg_table *own)
{
	sg_free_table(own);
	kfree(own);
}

unsigned int nvpm_sg_nents(const struct sg_table *own)
{
	return own->nents;
}

/*
 * The registry's XArray (slots.rs), allocating its indices from 1 (slots.rs reserves index 1
 * for good, so the first node stays; index 0 would live in the array's head, without one).
 */
void nvpm_slots_init(struct xarray *xa)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC1);
}

/* Reserves the lowest free index (a zero entry, read back as NULL) from 1 to INT_MAX. */
int nvpm_slots_reserve(struct xarray *xa, u32 *index)
{
	return xa_alloc(xa, index, NULL, XA_LIMIT(1, INT_MAX), GFP_KERNEL);
}

/* The first present entry at or after *@index (reserved ones skipped), or NULL. */
void *nvpm_slots_find(struct xarray *xa, unsigned long *index)
{
	return xa_find(xa, index, ULONG_MAX, XA_PRESENT);
}

/* A slot's share of its XArray node (a node holds XA_CHUNK_SIZE slots). */
size_t nvpm_slots_entry_bytes(void)
{
	return sizeof(struct xa_node) / XA_CHUNK_SIZE;
}

/* The running process, as NVIDIA's P2P API identifies it (token 0 lookups). */
int nvpm_current_tgid(void)
{
	return current->tgid;
}

/* Kernel-internal errnos (ENOTSUPP and friends) mean nothing to user space. */
int nvpm_user_errno(int err)
{
	if (err >= 0 || err < -MAX_ERRNO)
		return -EIO;
	switch (-err) {
	case ENOTSUPP:
		return -EOPNOTSUPP;
	case ERESTARTSYS:
	case ERESTARTNOINTR:
	case ERESTARTNOHAND:
	case ERESTART_RESTARTBLOCK:
		return -EINTR;
	default:
		return -err >= 512 ? -EIO : err;
	}
}
