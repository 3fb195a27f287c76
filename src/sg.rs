// SPDX-License-Identifier: GPL-2.0

//! Filling ib_core's `sg_table` with the DMA addresses of GPU pages.

use kernel::bindings;
use kernel::error::to_result;
use kernel::prelude::*;

/// ib_core's `sg_table`, whose entry list we allocated and filled; freed on drop.
pub(crate) struct DmaSgTable {
    sgt: *mut bindings::sg_table,
}

// SAFETY: the table is only touched by whoever owns this wrapper.
unsafe impl Send for DmaSgTable {}

impl DmaSgTable {
    /// Allocates one entry per `chunk`-sized block at each of `addrs` in `sgt`. Entries carry
    /// DMA addresses only: there are no CPU pages behind GPU memory.
    ///
    /// # Safety
    ///
    /// `sgt` must point to a valid `sg_table` with no entry list, which stays valid until the
    /// returned value is dropped.
    pub(crate) unsafe fn fill(
        sgt: *mut bindings::sg_table,
        addrs: &[u64],
        chunk: u64,
    ) -> Result<Self> {
        let n = u32::try_from(addrs.len()).map_err(|_| EINVAL)?;
        let len = u32::try_from(chunk).map_err(|_| EINVAL)?;
        if n == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `sgt` is valid and empty (caller).
        to_result(unsafe { bindings::sg_alloc_table(sgt, n, bindings::GFP_KERNEL) })?;
        // SAFETY: `sg_alloc_table` succeeded: `sgl` heads a chain of `n` entries.
        let mut sg = unsafe { (*sgt).sgl };
        for &addr in addrs {
            // SAFETY: `sg` is one of the `n` entries we just allocated.
            unsafe {
                (*sg).dma_address = addr;
                (*sg).dma_length = len;
                (*sg).length = len;
                sg = bindings::sg_next(sg);
            }
        }
        Ok(Self { sgt })
    }

    pub(crate) fn nents(&self) -> u32 {
        // SAFETY: `sgt` is valid while `self` lives.
        unsafe { (*self.sgt).nents }
    }
}

impl Drop for DmaSgTable {
    fn drop(&mut self) {
        // SAFETY: we allocated the entry list; `sg_free_table` also clears `sgl`.
        unsafe { bindings::sg_free_table(self.sgt) };
    }
}
