// SPDX-License-Identifier: GPL-2.0

//! ib_core's `sg_table`, filled with the DMA addresses of GPU pages.
//!
//! The table's layout depends on the kernel configuration, so it is handled by `glue.c` and
//! stays opaque here.

use core::ffi::{c_int, c_uint, c_void};
use kernel::error::to_result;
use kernel::prelude::*;

extern "C" {
    fn nvpm_sg_fill(sgt: *mut c_void, dma_addresses: *const u64, n: c_uint, len: u32) -> c_int;
    fn nvpm_sg_free(sgt: *mut c_void);
    fn nvpm_sg_nents(sgt: *const c_void) -> c_uint;
}

/// ib_core's `sg_table`, whose entry list we allocated and filled; freed on drop.
pub(crate) struct DmaSgTable {
    sgt: *mut c_void,
}

// SAFETY: the table is only touched by whoever owns this wrapper.
unsafe impl Send for DmaSgTable {}

impl DmaSgTable {
    /// Allocates one `chunk`-byte entry per address of `addrs` in `sgt`.
    ///
    /// # Safety
    ///
    /// `sgt` must point to a valid `struct sg_table` with no entry list, which stays valid
    /// until the returned value is dropped.
    pub(crate) unsafe fn fill(sgt: *mut c_void, addrs: &[u64], chunk: u64) -> Result<Self> {
        let n = c_uint::try_from(addrs.len()).map_err(|_| EINVAL)?;
        let len = u32::try_from(chunk).map_err(|_| EINVAL)?;
        if n == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `sgt` is valid and empty (caller); `addrs` holds `n` addresses.
        to_result(unsafe { nvpm_sg_fill(sgt, addrs.as_ptr(), n, len) })?;
        Ok(Self { sgt })
    }

    pub(crate) fn nents(&self) -> u32 {
        // SAFETY: `sgt` is valid while `self` lives.
        unsafe { nvpm_sg_nents(self.sgt) }
    }
}

impl Drop for DmaSgTable {
    fn drop(&mut self) {
        // SAFETY: we allocated the entry list; freeing it also clears the table.
        unsafe { nvpm_sg_free(self.sgt) };
    }
}
