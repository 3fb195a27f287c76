// SPDX-License-Identifier: GPL-2.0

//! The C half's functions (`glue.c`, `stats_sysfs.c`, `debugfs_view.c`), declared once, in the
//! one `extern "C"` block of the crate that is ours (NVIDIA's and ib_core's ABIs stay in
//! `nv_p2p.rs` and `peer_mem.rs`), each behind a wrapper the rest of the crate calls.
//!
//! `glue.h` has the C prototypes, which every C file includes; `tests/lint/glue.py` fails when
//! a declaration here and its prototype there differ (`make modules` runs it where python3 is
//! present, `make check` always). Pointers to kernel structures are opaque here (`c_void`),
//! except the registry's XArray, which `slots.rs` embeds.
//!
//! The wrappers are `#[inline]`: the module calls the same `nvpm_*` symbols from the same Rust
//! functions as it did when each file declared its own, so the fault-injection sweep's call
//! sites and the bench's profile (both keyed by the C symbols) do not move.

use core::ffi::{c_char, c_int, c_uint, c_void, CStr};
use kernel::bindings;
use kernel::ffi::c_ulong;

extern "C" {
    // glue.c: module parameters.
    fn nvpm_param_enable_dbg() -> c_int;
    fn nvpm_param_peerdirect_support() -> c_int;
    fn nvpm_param_persistent_api_support() -> c_int;
    fn nvpm_param_probe_then_pin() -> c_int;
    fn nvpm_param_coalesce_sg() -> c_int;

    // glue.c: devices, this module and the others, the clock, the current process, errnos.
    fn nvpm_dev_to_pci(dev: *mut c_void) -> *mut c_void;
    fn nvpm_pci_bdf(pdev: *mut c_void) -> u32;
    fn nvpm_module_get();
    fn nvpm_module_put();
    fn nvpm_module_loaded(name: *const c_char) -> bool;
    fn nvpm_now_ns() -> u64;
    fn nvpm_current_tgid() -> c_int;
    fn nvpm_user_errno(err: c_int) -> c_int;
    fn nvpm_alloc_bytes(size: usize) -> usize;

    // glue.c: nvidia.ko's optional entry points (weak references, NULL when absent).
    fn nvpm_nvidia_has_persistent_api() -> bool;
    fn nvpm_nvidia_has_cap_persistent_pages() -> bool;
    fn nvpm_nvidia_get_pages_persistent(va: u64, len: u64, page_table: *mut *mut c_void) -> c_int;
    fn nvpm_nvidia_put_pages_persistent(va: u64, page_table: *mut c_void) -> c_int;

    // glue.c: the sg table handed to ib_core (`struct sg_table *`, `struct scatterlist *`).
    fn nvpm_sg_alloc(n: c_uint) -> *mut c_void;
    fn nvpm_sg_first(own: *mut c_void) -> *mut c_void;
    fn nvpm_sg_set(sg: *mut c_void, dma: u64, len: c_uint) -> *mut c_void;
    fn nvpm_sg_publish(core_sgt: *mut c_void, own: *const c_void);
    fn nvpm_sg_destroy(own: *mut c_void);
    fn nvpm_sg_nents(own: *const c_void) -> c_uint;
    fn nvpm_sg_bytes(own: *const c_void) -> usize;

    // glue.c: the registry's XArray.
    fn nvpm_slots_init(xa: *mut bindings::xarray);
    fn nvpm_slots_reserve(xa: *mut bindings::xarray, index: *mut u32) -> c_int;
    fn nvpm_slots_find(xa: *mut bindings::xarray, index: *mut c_ulong) -> *mut c_void;
    fn nvpm_slots_entry_bytes() -> usize;

    // stats_sysfs.c: /sys/module/nv_peer_mem/stats.
    fn nvpm_sysfs_stats_create() -> c_int;
    fn nvpm_sysfs_stats_add_client(client: c_int, name: *const c_char) -> c_int;
    fn nvpm_sysfs_stats_destroy();

    // debugfs_view.c: /sys/kernel/debug/nv_peer_mem/registrations (`struct seq_file *`).
    fn nvpm_seq_write(m: *mut c_void, buf: *const c_char, len: usize);
    fn nvpm_debugfs_create();
    fn nvpm_debugfs_destroy();
}

// --- Module parameters ---------------------------------------------------------------------

/// `enable_dbg` (0 or 1).
#[inline]
pub(crate) fn param_enable_dbg() -> c_int {
    // SAFETY: reads an int parameter of this module; no requirement.
    unsafe { nvpm_param_enable_dbg() }
}

/// `peerdirect_support` (0 or 1).
#[inline]
pub(crate) fn param_peerdirect_support() -> c_int {
    // SAFETY: reads an int parameter of this module; no requirement.
    unsafe { nvpm_param_peerdirect_support() }
}

/// `persistent_api_support` (0 or 1).
#[inline]
pub(crate) fn param_persistent_api_support() -> c_int {
    // SAFETY: reads an int parameter of this module; no requirement.
    unsafe { nvpm_param_persistent_api_support() }
}

/// `probe_then_pin` (0 or 1).
#[inline]
pub(crate) fn param_probe_then_pin() -> c_int {
    // SAFETY: reads an int parameter of this module; no requirement.
    unsafe { nvpm_param_probe_then_pin() }
}

/// `coalesce_sg` (-1, 0 or 1).
#[inline]
pub(crate) fn param_coalesce_sg() -> c_int {
    // SAFETY: reads an int parameter of this module; no requirement.
    unsafe { nvpm_param_coalesce_sg() }
}

// --- Devices, this module and the others, the clock, the current process, errnos -----------

/// The PCI device (`struct pci_dev *`) behind `dev`, or NULL when it is not a PCI device.
///
/// # Safety
///
/// `dev` is NULL or points to a live `struct device`.
#[inline]
pub(crate) unsafe fn dev_to_pci(dev: *mut c_void) -> *mut c_void {
    // SAFETY: `dev` is NULL (handled by the helper) or a live device (caller).
    unsafe { nvpm_dev_to_pci(dev) }
}

/// The PCI address of `pdev` packed as DDDDBBFF (domain, bus, devfn).
///
/// # Safety
///
/// `pdev` points to a live `struct pci_dev`.
#[inline]
pub(crate) unsafe fn pci_bdf(pdev: *mut c_void) -> u32 {
    // SAFETY: `pdev` is a live PCI device (caller); the helper only reads it.
    unsafe { nvpm_pci_bdf(pdev) }
}

/// Takes a reference on this module.
#[inline]
pub(crate) fn module_get() {
    // SAFETY: the module is loaded (we are running its code); taking a reference has no other
    // requirement.
    unsafe { nvpm_module_get() }
}

/// Drops a reference on this module.
///
/// # Safety
///
/// Balances one earlier [`module_get`], whose reference the caller no longer relies on.
#[inline]
pub(crate) unsafe fn module_put() {
    // SAFETY: balances a reference taken by `module_get` (caller).
    unsafe { nvpm_module_put() }
}

/// Whether the module `name` is loaded (`/sys/module/<name>` exists).
#[inline]
pub(crate) fn module_loaded(name: &CStr) -> bool {
    // The bytes with their NUL, not `CStr::as_ptr`, whose `c_char` is signed (the kernel's
    // clippy forbids it; 6.12 has no `CStrExt::as_char_ptr`).
    let name = name.to_bytes_with_nul().as_ptr().cast();
    // SAFETY: `name` is a NUL-terminated string that outlives the call; the helper only reads it.
    unsafe { nvpm_module_loaded(name) }
}

/// Monotonic nanoseconds.
#[inline]
pub(crate) fn now_ns() -> u64 {
    // SAFETY: reads the clock; no requirement.
    unsafe { nvpm_now_ns() }
}

/// `current->tgid`: the calling process.
#[inline]
pub(crate) fn current_tgid() -> c_int {
    // SAFETY: reads `current->tgid`; no requirement.
    unsafe { nvpm_current_tgid() }
}

/// `err` as user space can decode it (kernel-internal errnos such as ENOTSUPP mapped).
#[inline]
pub(crate) fn user_errno(err: c_int) -> c_int {
    // SAFETY: a pure function of its argument.
    unsafe { nvpm_user_errno(err) }
}

/// Bytes the allocator gives for a kmalloc() of `size` (its size class).
#[inline]
pub(crate) fn alloc_bytes(size: usize) -> usize {
    // SAFETY: a pure function of its argument.
    unsafe { nvpm_alloc_bytes(size) }
}

// --- nvidia.ko's optional entry points -----------------------------------------------------

/// Whether nvidia.ko exports `nvidia_p2p_{get,put}_pages_persistent` (R535 and later).
#[inline]
pub(crate) fn nvidia_has_persistent_api() -> bool {
    // SAFETY: tests the addresses of weak symbol references; no requirement.
    unsafe { nvpm_nvidia_has_persistent_api() }
}

/// Whether nvidia.ko exports `nvidia_p2p_cap_persistent_pages` (R515 and later).
#[inline]
pub(crate) fn nvidia_has_cap_persistent_pages() -> bool {
    // SAFETY: tests the address of a weak symbol reference; no requirement.
    unsafe { nvpm_nvidia_has_cap_persistent_pages() }
}

/// `nvidia_p2p_get_pages_persistent(va, len, page_table, 0)`.
///
/// # Safety
///
/// [`nvidia_has_persistent_api`] returned true (the entry point is NULL otherwise) and
/// nvidia.ko stays loaded (the module dependency keeps it); `page_table` is valid for writes.
#[inline]
pub(crate) unsafe fn nvidia_get_pages_persistent(
    va: u64,
    len: u64,
    page_table: *mut *mut c_void,
) -> c_int {
    // SAFETY: the entry point exists and `page_table` is a valid out-pointer (caller).
    unsafe { nvpm_nvidia_get_pages_persistent(va, len, page_table) }
}

/// `nvidia_p2p_put_pages_persistent(va, page_table, 0)`.
///
/// # Safety
///
/// `page_table` is the table [`nvidia_get_pages_persistent`] pinned at `va`, not put since;
/// its owner gives it up with this call.
#[inline]
pub(crate) unsafe fn nvidia_put_pages_persistent(va: u64, page_table: *mut c_void) -> c_int {
    // SAFETY: `page_table` is a live persistent pin at `va` (caller), which implies the entry
    // point exists.
    unsafe { nvpm_nvidia_put_pages_persistent(va, page_table) }
}

// --- The sg table handed to ib_core --------------------------------------------------------

/// A table (`struct sg_table *`) of `n` unfilled entries, or NULL when out of memory.
#[inline]
pub(crate) fn sg_alloc(n: c_uint) -> *mut c_void {
    // SAFETY: no requirement; the result is NULL or a table owned by the caller.
    unsafe { nvpm_sg_alloc(n) }
}

/// The first entry (`struct scatterlist *`) of `own`.
///
/// # Safety
///
/// `own` came from [`sg_alloc`] and was not destroyed.
#[inline]
pub(crate) unsafe fn sg_first(own: *mut c_void) -> *mut c_void {
    // SAFETY: `own` is a live table (caller).
    unsafe { nvpm_sg_first(own) }
}

/// Fills entry `sg` with one run; returns the next entry, NULL after the last.
///
/// # Safety
///
/// `sg` is an entry of a live table from [`sg_alloc`] (from [`sg_first`] or a previous call),
/// which nobody else reads or writes meanwhile.
#[inline]
pub(crate) unsafe fn sg_set(sg: *mut c_void, dma: u64, len: c_uint) -> *mut c_void {
    // SAFETY: `sg` is an entry of a live table, ours to write (caller).
    unsafe { nvpm_sg_set(sg, dma, len) }
}

/// Copies the header of `own` into `core_sgt`, ib_core's table.
///
/// # Safety
///
/// `core_sgt` points to a `struct sg_table` valid for writes; `own` is a live, filled table.
#[inline]
pub(crate) unsafe fn sg_publish(core_sgt: *mut c_void, own: *const c_void) {
    // SAFETY: both tables are valid as the caller promises.
    unsafe { nvpm_sg_publish(core_sgt, own) }
}

/// Frees `own` and its entries.
///
/// # Safety
///
/// `own` came from [`sg_alloc`], was not destroyed, and nobody uses its list any more.
#[inline]
pub(crate) unsafe fn sg_destroy(own: *mut c_void) {
    // SAFETY: `own` is live and unused (caller); it is freed here, once.
    unsafe { nvpm_sg_destroy(own) }
}

/// The number of entries of `own`.
///
/// # Safety
///
/// `own` came from [`sg_alloc`] and was not destroyed.
#[inline]
pub(crate) unsafe fn sg_nents(own: *const c_void) -> c_uint {
    // SAFETY: `own` is a live table (caller); the helper only reads it.
    unsafe { nvpm_sg_nents(own) }
}

/// Bytes the allocator gave for `own` and its entries.
///
/// # Safety
///
/// `own` came from [`sg_alloc`] and was not destroyed.
#[inline]
pub(crate) unsafe fn sg_bytes(own: *const c_void) -> usize {
    // SAFETY: `own` is a live table (caller); the helper only reads it.
    unsafe { nvpm_sg_bytes(own) }
}

// --- The registry's XArray -----------------------------------------------------------------

/// Initializes `xa`, allocating indices from 1.
///
/// # Safety
///
/// `xa` is valid for writes and not in use (it is initialized here, before any other use).
#[inline]
pub(crate) unsafe fn slots_init(xa: *mut bindings::xarray) {
    // SAFETY: `xa` is valid for writes and unused (caller).
    unsafe { nvpm_slots_init(xa) }
}

/// Reserves the lowest free index from 1 to `INT_MAX` into `*index`; 0 or a negative errno.
///
/// # Safety
///
/// `xa` was initialized by [`slots_init`] and is live; `index` is valid for writes.
#[inline]
pub(crate) unsafe fn slots_reserve(xa: *mut bindings::xarray, index: *mut u32) -> c_int {
    // SAFETY: `xa` is initialized and `index` writable (caller).
    unsafe { nvpm_slots_reserve(xa, index) }
}

/// The first present entry at or after `*index` (its index into `*index`), or NULL.
///
/// # Safety
///
/// `xa` was initialized by [`slots_init`] and is live; `index` is valid for reads and writes.
#[inline]
pub(crate) unsafe fn slots_find(xa: *mut bindings::xarray, index: *mut c_ulong) -> *mut c_void {
    // SAFETY: `xa` is initialized and `index` readable and writable (caller).
    unsafe { nvpm_slots_find(xa, index) }
}

/// A slot's share of its XArray node.
#[inline]
pub(crate) fn slots_entry_bytes() -> usize {
    // SAFETY: a constant; no requirement.
    unsafe { nvpm_slots_entry_bytes() }
}

// --- /sys/module/nv_peer_mem/stats ---------------------------------------------------------

/// Creates the `stats` directory; 0 or a negative errno.
///
/// # Safety
///
/// Not called concurrently with itself or the other `sysfs_stats_*` functions (they share the
/// C file's static state), and not again before [`sysfs_stats_destroy`].
#[inline]
pub(crate) unsafe fn sysfs_stats_create() -> c_int {
    // SAFETY: no concurrent or repeated call (caller).
    unsafe { nvpm_sysfs_stats_create() }
}

/// Adds `stats/<name>/` with a file per counter for client `client`; 0 or a negative errno.
///
/// # Safety
///
/// [`sysfs_stats_create`] succeeded and [`sysfs_stats_destroy`] has not run since; no
/// concurrent `sysfs_stats_*` call; `name` is a NUL-terminated string (sysfs copies it).
#[inline]
pub(crate) unsafe fn sysfs_stats_add_client(client: c_int, name: *const c_char) -> c_int {
    // SAFETY: the directory exists, nothing runs beside us, `name` is valid (caller).
    unsafe { nvpm_sysfs_stats_add_client(client, name) }
}

/// Removes what [`sysfs_stats_create`] and [`sysfs_stats_add_client`] made (kernfs drains the
/// readers in flight).
///
/// # Safety
///
/// No concurrent `sysfs_stats_*` call.
#[inline]
pub(crate) unsafe fn sysfs_stats_destroy() {
    // SAFETY: nothing runs beside us (caller).
    unsafe { nvpm_sysfs_stats_destroy() }
}

// --- /sys/kernel/debug/nv_peer_mem/registrations -------------------------------------------

/// Appends `buf` to the seq_file `m`.
///
/// # Safety
///
/// `m` is the `struct seq_file` of a `show` call in progress.
#[inline]
pub(crate) unsafe fn seq_write(m: *mut c_void, buf: &[u8]) {
    // SAFETY: `m` is live (caller); `buf` is valid for `buf.len()` bytes, which are copied.
    unsafe { nvpm_seq_write(m, buf.as_ptr().cast(), buf.len()) }
}

/// Creates the registrations file; failures are logged, not returned (debugfs may be off).
///
/// # Safety
///
/// Not called concurrently with itself or [`debugfs_destroy`], and not again before it; what
/// `nvpm_registrations_show` reads exists until [`debugfs_destroy`] returns.
#[inline]
pub(crate) unsafe fn debugfs_create() {
    // SAFETY: a single, unshared creation, and the view's state outlives the file (caller).
    unsafe { nvpm_debugfs_create() }
}

/// Removes the registrations file, waiting for readers in flight.
///
/// # Safety
///
/// Not called concurrently with itself or [`debugfs_create`].
#[inline]
pub(crate) unsafe fn debugfs_destroy() {
    // SAFETY: nothing runs beside us (caller).
    unsafe { nvpm_debugfs_destroy() }
}
