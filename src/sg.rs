// SPDX-License-Identifier: GPL-2.0

//! The sg list of DMA addresses handed to ib_core.
//!
//! The list is owned through a `struct sg_table` of our own; ib_core's table receives a copy of
//! its header. MLNX_OFED 5.x zeroes its table after an unmap or an invalidation, so freeing
//! through ib_core's pointer would free nothing, and after ib_core released the registration
//! that pointer is gone. The layout of `sg_table` depends on the kernel configuration, so
//! `glue.c` handles it and it stays opaque here.
//!
//! Entries are either one per GPU page or, coalesced, one per run of DMA-contiguous pages (each
//! below 4 GiB: ib_core keeps entry lengths in `unsigned int`). Fewer entries mean a smaller list
//! and let the NIC driver pick larger pages (`ib_umem_find_best_pgsz` is capped by every entry
//! boundary).

use core::ffi::{c_int, c_uint, c_void};
use core::ptr::NonNull;
use kernel::prelude::*;

/// One sg entry (`struct nvpm_sg_run` in `glue.c`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SgRun {
    dma: u64,
    len: u32,
    _pad: u32,
}

extern "C" {
    fn nvpm_sg_create(core_sgt: *mut c_void, runs: *const SgRun, n: c_uint) -> *mut c_void;
    fn nvpm_sg_destroy(own: *mut c_void);
    fn nvpm_sg_nents(own: *const c_void) -> c_uint;
    fn nvpm_sg_bytes(own: *const c_void) -> usize;
}

/// The entries for `addrs`, `chunk` bytes each: one per address, or with `coalesce` one per run
/// of contiguous addresses, each run at most `u32::MAX` rounded down to `chunk`.
///
/// The list is allocated once, at its exact length: how many runs there are depends on where
/// the IOMMU put each page, and growing the list as it fills would make the number of
/// allocations (and so which one a fault-injection run fails) depend on that too.
pub(crate) fn sg_runs(addrs: &[u64], chunk: u64, coalesce: bool) -> Result<KVec<SgRun>> {
    let chunk = u32::try_from(chunk)
        .ok()
        .filter(|&c| c != 0)
        .ok_or(EINVAL)?;
    let count = Runs::new(addrs, chunk, coalesce).count();
    let mut runs = KVec::with_capacity(count, GFP_KERNEL)?;
    for run in Runs::new(addrs, chunk, coalesce) {
        // Within the capacity reserved above: no allocation.
        runs.push(run, GFP_KERNEL)?;
    }
    Ok(runs)
}

/// The entries of a list of DMA addresses, in order (see [`sg_runs`]).
struct Runs<'a> {
    addrs: core::slice::Iter<'a, u64>,
    chunk: u32,
    max_len: u32,
    coalesce: bool,
    /// The entry being built, which the next address may extend.
    open: Option<SgRun>,
}

impl<'a> Runs<'a> {
    fn new(addrs: &'a [u64], chunk: u32, coalesce: bool) -> Self {
        Self {
            addrs: addrs.iter(),
            chunk,
            max_len: u32::MAX - u32::MAX % chunk,
            coalesce,
            open: None,
        }
    }
}

impl Iterator for Runs<'_> {
    type Item = SgRun;

    fn next(&mut self) -> Option<SgRun> {
        for &dma in self.addrs.by_ref() {
            let fresh = SgRun {
                dma,
                len: self.chunk,
                _pad: 0,
            };
            let Some(run) = self.open.as_mut() else {
                self.open = Some(fresh);
                continue;
            };
            let contiguous = run.dma.checked_add(u64::from(run.len)) == Some(dma);
            if self.coalesce && contiguous && run.len <= self.max_len - self.chunk {
                run.len += self.chunk;
                continue;
            }
            return self.open.replace(fresh);
        }
        self.open.take()
    }
}

/// Our `sg_table` with one entry per run; the list is freed on drop.
pub(crate) struct SgCopy {
    own: NonNull<c_void>,
}

// SAFETY: the table is only touched by whoever owns this wrapper.
unsafe impl Send for SgCopy {}

impl SgCopy {
    /// Builds the list and gives ib_core's `core_sgt` a copy of its header.
    ///
    /// # Safety
    ///
    /// `core_sgt` must point to ib_core's `struct sg_table` for this registration, with no
    /// entry list of its own.
    pub(crate) unsafe fn create(core_sgt: *mut c_void, runs: &[SgRun]) -> Result<Self> {
        let n = c_uint::try_from(runs.len()).map_err(|_| EINVAL)?;
        if n == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `core_sgt` is valid (caller); `runs` holds `n` entries.
        let own = unsafe { nvpm_sg_create(core_sgt, runs.as_ptr(), n) };
        Ok(Self {
            own: NonNull::new(own).ok_or(ENOMEM)?,
        })
    }

    pub(crate) fn nents(&self) -> c_int {
        // SAFETY: `own` is valid while `self` lives.
        let n = unsafe { nvpm_sg_nents(self.own.as_ptr()) };
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }

    /// Bytes allocated for the table and its entries.
    pub(crate) fn bytes(&self) -> usize {
        // SAFETY: `own` is valid while `self` lives.
        unsafe { nvpm_sg_bytes(self.own.as_ptr()) }
    }
}

impl Drop for SgCopy {
    fn drop(&mut self) {
        // SAFETY: we created the table and nobody uses the list any more (ib_core has unmapped,
        // been invalidated, or failed the registration).
        unsafe { nvpm_sg_destroy(self.own.as_ptr()) };
    }
}
