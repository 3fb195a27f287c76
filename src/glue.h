/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The one boundary between nv_peer_mem's Rust crate and its C files: every function the C
 * files define for Rust, and every Rust function (#[no_mangle] extern "C") the C files call.
 * Each C file includes this header, so the compiler checks each definition against it; Rust
 * declares the C-defined ones once, in src/glue.rs, and tests/lint/glue.py (run by make
 * modules where python3 is present, and by make check) fails when the two differ.
 *
 * Types here are the ones tests/lint/glue.py maps to Rust: int, unsigned int, unsigned long,
 * u32, u64, size_t, bool, void, char, and pointers (struct pointers are opaque to Rust, as
 * *mut c_void, except struct xarray: *mut bindings::xarray). The Rust-side parameter names
 * follow these.
 */
#ifndef NVPM_GLUE_H
#define NVPM_GLUE_H

#include <linux/types.h>

struct device;
struct pci_dev;
struct scatterlist;
struct seq_file;
struct sg_table;
struct xarray;

/* --- Defined in C (glue.c, stats_sysfs.c, debugfs_view.c), called by Rust ----------------- */

/* glue.c: module parameters. */
int nvpm_param_enable_dbg(void);
int nvpm_param_peerdirect_support(void);
int nvpm_param_persistent_api_support(void);
int nvpm_param_probe_then_pin(void);
int nvpm_param_coalesce_sg(void);

/* glue.c: devices, this module and the others, the clock, the current process, errnos. */
struct pci_dev *nvpm_dev_to_pci(struct device *dev);
u32 nvpm_pci_bdf(struct pci_dev *pdev);
void nvpm_module_get(void);
void nvpm_module_put(void);
bool nvpm_module_loaded(const char *name);
u64 nvpm_now_ns(void);
int nvpm_current_tgid(void);
int nvpm_user_errno(int err);
size_t nvpm_alloc_bytes(size_t size);

/* glue.c: nvidia.ko's optional entry points (weak references). */
bool nvpm_nvidia_has_persistent_api(void);
bool nvpm_nvidia_has_cap_persistent_pages(void);
int nvpm_nvidia_get_pages_persistent(u64 va, u64 len, void **page_table);
int nvpm_nvidia_put_pages_persistent(u64 va, void *page_table);

/* glue.c: the sg table handed to ib_core (sg.rs). */
struct sg_table *nvpm_sg_alloc(unsigned int n);
struct scatterlist *nvpm_sg_first(struct sg_table *own);
struct scatterlist *nvpm_sg_set(struct scatterlist *sg, u64 dma, unsigned int len);
void nvpm_sg_publish(struct sg_table *core_sgt, const struct sg_table *own);
void nvpm_sg_destroy(struct sg_table *own);
unsigned int nvpm_sg_nents(const struct sg_table *own);
size_t nvpm_sg_bytes(const struct sg_table *own);

/* glue.c: the registry's XArray (slots.rs). */
void nvpm_slots_init(struct xarray *xa);
int nvpm_slots_reserve(struct xarray *xa, u32 *index);
void *nvpm_slots_find(struct xarray *xa, unsigned long *index);
size_t nvpm_slots_entry_bytes(void);

/* stats_sysfs.c: /sys/module/nv_peer_mem/stats (stats.rs). */
int nvpm_sysfs_stats_create(void);
int nvpm_sysfs_stats_add_client(int client, const char *name);
void nvpm_sysfs_stats_destroy(void);

/* debugfs_view.c: /sys/kernel/debug/nv_peer_mem/registrations (registrations_view.rs). */
void nvpm_seq_write(struct seq_file *m, const char *buf, size_t len);
void nvpm_debugfs_create(void);
void nvpm_debugfs_destroy(void);

/* --- Defined in Rust (#[no_mangle] extern "C"), called by C ------------------------------- */

/* stats.rs, for stats_sysfs.c. */
const char *nvpm_stats_counter_name(int index);
u64 nvpm_stats_value(int client, int index);

/* registrations_view.rs, for debugfs_view.c. */
int nvpm_registrations_show(struct seq_file *m);

#endif /* NVPM_GLUE_H */
