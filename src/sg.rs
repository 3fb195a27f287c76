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

/// One sg entry: a DMA address and a length below 4 GiB.
#[derive(Clone, Copy)]
struct SgRun {
    dma: u64,
    len: u32,
}

/// The entries of a list of DMA addresses, in order: `chunk` bytes each, one per address, or
/// with `coalesce` one per run of contiguous addresses, each run at most `u32::MAX` rounded
/// down to `chunk`.
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
///
/// # Invariants
///
/// `own` is an `sg_table` allocated by `nvpm_sg_alloc`, owned by this wrapper alone, with every
/// entry filled with a run of DMA addresses; ib_core's table holds a copy of its header (so
/// ib_core reads the same entries) until ib_core hands it back through `dma_unmap` or `release`.
pub(crate) struct SgCopy {
    own: NonNull<c_void>,
}

// SAFETY: the table is only touched by whoever owns this wrapper.
unsafe impl Send for SgCopy {}

impl SgCopy {
    /// Builds the list of `addrs`, `chunk` bytes each (see [`Runs`]), and gives ib_core's
    /// `core_sgt` a copy of its header.
    ///
    /// The list is allocated once, at its exact length, and filled in place: how many runs
    /// there are depends on where the IOMMU put each page, and growing the list as it fills
    /// would make the number of allocations (and so which one a fault-injection run fails)
    /// depend on that too.
    ///
    /// # Safety
    ///
    /// `core_sgt` must point to ib_core's `struct sg_table` for this registration, with no
    /// entry list of its own.
    pub(crate) unsafe fn create(
        core_sgt: *mut c_void,
        addrs: &[u64],
        chunk: u64,
        coalesce: bool,
    ) -> Result<Self> {
        let chunk = u32::try_from(chunk)
            .ok()
            .filter(|&c| c != 0)
            .ok_or(EINVAL)?;
        let n = c_uint::try_from(Runs::new(addrs, chunk, coalesce).count()).map_err(|_| EINVAL)?;
        if n == 0 {
            return Err(EINVAL);
        }
        let table = crate::glue::sg_alloc(n);
        // INVARIANT: a table of `n` entries that only this wrapper owns; the loop below fills
        // all `n` before the header is published to ib_core, and on any error the wrapper
        // drops, freeing it.
        let own = Self {
            own: NonNull::new(table).ok_or(ENOMEM)?,
        };
        // SAFETY: `own` is a table of `n` entries, which the loop fills in order: `Runs` yields
        // exactly `n` of them, the count above (and stops at the end of the list regardless).
        let mut sg = unsafe { crate::glue::sg_first(own.own.as_ptr()) };
        for run in Runs::new(addrs, chunk, coalesce) {
            if sg.is_null() {
                return Err(EINVAL);
            }
            // SAFETY: `sg` is the next unfilled entry of `own` (see above).
            sg = unsafe { crate::glue::sg_set(sg, run.dma, run.len) };
        }
        // SAFETY: `core_sgt` is valid (caller); `own` is a filled table.
        unsafe { crate::glue::sg_publish(core_sgt, own.own.as_ptr()) };
        Ok(own)
    }

    pub(crate) fn nents(&self) -> c_int {
        // SAFETY: `own` is valid while `self` lives.
        let n = unsafe { crate::glue::sg_nents(self.own.as_ptr()) };
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }

    /// Bytes the allocator gave for the table and its entries.
    pub(crate) fn bytes(&self) -> usize {
        // SAFETY: `own` is valid while `self` lives.
        unsafe { crate::glue::sg_bytes(self.own.as_ptr()) }
    }
}

impl Drop for SgCopy {
    fn drop(&mut self) {
        // SAFETY: we created the table and nobody uses the list any more (ib_core has unmapped,
        // been invalidated, or failed the registration).
        unsafe { crate::glue::sg_destroy(self.own.as_ptr()) };
    }
}

// KUnit (`nvpm_kunit`: see Kbuild): how `Runs` cuts a list into entries, the 4 GiB limit
// included, which no emulated BAR is large enough to reach.
#[cfg(nvpm_kunit)]
#[kernel::macros::kunit_tests(nv_peer_mem_sg)]
mod tests {
    use super::Runs;
    use kernel::prelude::*;

    /// A GPU page, the chunk every registration uses.
    const PAGE: u32 = 64 * 1024;
    const P: u64 = PAGE as u64;
    /// Somewhere above 4 GiB, as an IOMMU or a BAR puts GPU memory.
    const BASE: u64 = 0x40_0000_0000;

    /// The entries `Runs` makes of `addrs`, as (DMA address, length).
    fn entries(addrs: &[u64], chunk: u32, coalesce: bool) -> Result<KVec<(u64, u32)>> {
        let mut out = KVec::new();
        for run in Runs::new(addrs, chunk, coalesce) {
            out.push((run.dma, run.len), GFP_KERNEL)?;
        }
        Ok(out)
    }

    /// `n` contiguous chunks of `chunk` bytes from `BASE`.
    fn contiguous(n: usize, chunk: u32) -> Result<KVVec<u64>> {
        let mut addrs = KVVec::with_capacity(n, GFP_KERNEL)?;
        let mut dma = BASE;
        for _ in 0..n {
            addrs.push(dma, GFP_KERNEL)?;
            dma += u64::from(chunk);
        }
        Ok(addrs)
    }

    #[test]
    fn empty_list_has_no_entry() -> Result {
        assert!(entries(&[], PAGE, true)?.is_empty());
        assert!(entries(&[], PAGE, false)?.is_empty());
        Ok(())
    }

    #[test]
    fn one_entry_per_page_without_coalescing() -> Result {
        let addrs = [BASE, BASE + P, BASE + 2 * P];
        assert_eq!(
            entries(&addrs, PAGE, false)?[..],
            [(BASE, PAGE), (BASE + P, PAGE), (BASE + 2 * P, PAGE)]
        );
        Ok(())
    }

    #[test]
    fn contiguous_pages_make_one_entry() -> Result {
        let addrs = [BASE, BASE + P, BASE + 2 * P, BASE + 3 * P];
        assert_eq!(entries(&addrs, PAGE, true)?[..], [(BASE, 4 * PAGE)]);
        Ok(())
    }

    #[test]
    fn gaps_and_backward_steps_split_runs() -> Result {
        // A gap after the second page, a step back, the same page twice.
        let addrs = [
            BASE,
            BASE + P,
            BASE + 3 * P,
            BASE + 4 * P,
            BASE + 2 * P,
            BASE + 2 * P,
        ];
        assert_eq!(
            entries(&addrs, PAGE, true)?[..],
            [
                (BASE, 2 * PAGE),
                (BASE + 3 * P, 2 * PAGE),
                (BASE + 2 * P, PAGE),
                (BASE + 2 * P, PAGE)
            ]
        );
        Ok(())
    }

    #[test]
    fn no_run_wraps_past_the_top_of_the_address_space() -> Result {
        // The last page's end wraps to 0, which does not make 0 its successor.
        let last = 0u64.wrapping_sub(P);
        assert_eq!(
            entries(&[last, 0], PAGE, true)?[..],
            [(last, PAGE), (0, PAGE)]
        );
        Ok(())
    }

    #[test]
    fn largest_run_below_4_gib_is_one_entry() -> Result {
        // 65 535 pages: 4 GiB less one page, the most one entry holds.
        let n = (u32::MAX / PAGE) as usize;
        let runs = entries(&contiguous(n, PAGE)?, PAGE, true)?;
        assert_eq!(runs[..], [(BASE, 0xffff_0000)]);
        Ok(())
    }

    #[test]
    fn run_of_4_gib_and_more_is_split() -> Result {
        // 65 537 contiguous pages (4 GiB and one page): the first entry stops a page short of
        // 4 GiB, the second takes the two pages left.
        let n = (1usize << 32) / PAGE as usize + 1;
        let runs = entries(&contiguous(n, PAGE)?, PAGE, true)?;
        assert_eq!(
            runs[..],
            [(BASE, 0xffff_0000), (BASE + 0xffff_0000, 2 * PAGE)]
        );
        Ok(())
    }

    #[test]
    fn split_is_a_whole_number_of_chunks() -> Result {
        // 1.5 GiB chunks: two make 3 GiB, a third would pass 4 GiB.
        const CHUNK: u32 = 0x6000_0000;
        let runs = entries(&contiguous(5, CHUNK)?, CHUNK, true)?;
        let c = u64::from(CHUNK);
        assert_eq!(
            runs[..],
            [
                (BASE, 2 * CHUNK),
                (BASE + 2 * c, 2 * CHUNK),
                (BASE + 4 * c, CHUNK)
            ]
        );
        Ok(())
    }
}
