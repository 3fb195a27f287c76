// SPDX-License-Identifier: GPL-2.0

//! The sg list of DMA addresses handed to ib_core.
//!
//! The list is owned through a `struct sg_table` of our own; ib_core's table receives a copy of
//! its header. MLNX_OFED 5.x zeroes its table after an unmap or an invalidation, so freeing
//! through ib_core's pointer would free nothing, and after ib_core released the registration
//! that pointer is gone. The layout of `sg_table` depends on the kernel configuration, so
//! `glue.c` handles it and it stays opaque here.

use core::ffi::{c_int, c_uint, c_void};
use core::ptr::NonNull;
use kernel::prelude::*;

extern "C" {
    fn nvpm_sg_create(
        core_sgt: *mut c_void,
        dma_addresses: *const u64,
        n: c_uint,
        len: u32,
    ) -> *mut c_void;
    fn nvpm_sg_destroy(own: *mut c_void);
    fn nvpm_sg_nents(own: *const c_void) -> c_uint;
}

/// Our `sg_table` with one `chunk`-byte entry per DMA address; the list is freed on drop.
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
    pub(crate) unsafe fn create(core_sgt: *mut c_void, addrs: &[u64], chunk: u64) -> Result<Self> {
        let n = c_uint::try_from(addrs.len()).map_err(|_| EINVAL)?;
        let len = u32::try_from(chunk).map_err(|_| EINVAL)?;
        if n == 0 {
            return Err(EINVAL);
        }
        // SAFETY: `core_sgt` is valid (caller); `addrs` holds `n` addresses.
        let own = unsafe { nvpm_sg_create(core_sgt, addrs.as_ptr(), n, len) };
        Ok(Self {
            own: NonNull::new(own).ok_or(ENOMEM)?,
        })
    }

    pub(crate) fn nents(&self) -> c_int {
        // SAFETY: `own` is valid while `self` lives.
        let n = unsafe { nvpm_sg_nents(self.own.as_ptr()) };
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }
}

impl Drop for SgCopy {
    fn drop(&mut self) {
        // SAFETY: we created the table and nobody uses the list any more (ib_core has unmapped,
        // been invalidated, or failed the registration).
        unsafe { nvpm_sg_destroy(self.own.as_ptr()) };
    }
}
