// SPDX-License-Identifier: GPL-2.0

//! The registry's table: contexts by index in an XArray, through its C API (6.12 has no Rust
//! abstraction for it). An entry present in the table owns one reference to its context.

use kernel::bindings;
use kernel::error::to_result;
use kernel::ffi::{c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};
use kernel::types::Opaque;

use crate::registration::Context;

/// Contexts by index, from 1 (`nvpm_slots_init`). Not `Sync`: the registry's mutex serializes
/// every call, so no call can drop an entry's reference while another reads the entry.
///
/// # Invariants
///
/// - `xa` is an initialized XArray that allocates indices from 1; index 1 is reserved for good
///   and never filled.
/// - Every filled entry is a pointer from `Arc::into_raw` of a `Context`: the XArray holds that
///   reference until the entry is taken out, which gives it back to an `Arc`.
pub(crate) struct Slots {
    /// Boxed: the XArray's nodes point back to it.
    xa: Pin<KBox<Opaque<bindings::xarray>>>,
}

// SAFETY: the XArray and the contexts it references may be used from any thread (`Context` is
// `Send + Sync`); it is sharing a `&Slots` that needs the registry's mutex, and `Slots` is not
// `Sync`.
unsafe impl Send for Slots {}

impl Slots {
    /// An empty table but for index 1, reserved for good: its node stays, so that registrations
    /// allocate nothing here while fewer than 63 are live (an empty XArray would allocate a
    /// node for a lone registration and free it through RCU when it goes).
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: `xa` is valid for writes; it is initialized here, before any other use.
        let init = Opaque::ffi_init(|xa| unsafe { crate::glue::slots_init(xa) });
        // INVARIANT: initialized by `nvpm_slots_init`, empty; index 1 is reserved just below.
        let slots = Self {
            xa: KBox::pin_init(init, GFP_KERNEL)?,
        };
        // Index 1, the first free one; never filled, so nothing ever finds it.
        slots.reserve()?;
        Ok(slots)
    }

    /// Reserves the lowest free index for [`Self::fill`] or [`Self::unreserve`]. Allocates a
    /// node of the XArray when no node has room for it.
    pub(crate) fn reserve(&self) -> Result<u32> {
        let mut index = 0;
        // SAFETY: `xa` was initialized in `new`; `index` is valid for writes.
        to_result(unsafe { crate::glue::slots_reserve(self.xa.get(), &mut index) })?;
        Ok(index)
    }

    /// Puts `ctx`, with the reference it carries, at a reserved `index`.
    pub(crate) fn fill(&self, index: u32, ctx: Arc<Context>) {
        let entry = Arc::into_raw(ctx).cast_mut().cast::<c_void>();
        // SAFETY: `xa` was initialized. A reserved index has its slot in a node already, so
        // the store replaces the reservation without allocating and cannot fail; `entry` is
        // 8-byte aligned, which the XArray needs of a pointer it stores.
        let old = unsafe {
            bindings::xa_store(self.xa.get(), index as usize, entry, bindings::GFP_NOWAIT)
        };
        debug_assert!(old.is_null());
    }

    /// Gives back a reserved `index` that was never filled.
    pub(crate) fn unreserve(&self, index: u32) {
        // SAFETY: `xa` was initialized; a reservation owns no reference.
        unsafe { bindings::xa_erase(self.xa.get(), index as usize) };
    }

    /// A new reference to the context at `index`.
    pub(crate) fn get(&self, index: u32) -> Option<Arc<Context>> {
        // SAFETY: `xa` was initialized.
        let entry = unsafe { bindings::xa_load(self.xa.get(), index as usize) };
        // SAFETY: `entry` was read from the table just now, and no other call can take it out
        // before this one returns.
        unsafe { Self::clone_entry(entry) }
    }

    /// Takes the context at `index` out of the table, with the reference its entry owned.
    pub(crate) fn take(&self, index: u32) -> Option<Arc<Context>> {
        // SAFETY: `xa` was initialized.
        let entry = unsafe { bindings::xa_erase(self.xa.get(), index as usize) };
        if entry.is_null() {
            return None;
        }
        // SAFETY: `entry` came from `Arc::into_raw` in `fill`, and erasing it handed its
        // reference to us.
        Some(unsafe { Arc::from_raw(entry.cast::<Context>()) })
    }

    /// A new reference to the first context at an index from `*index` on; `*index` becomes
    /// its index.
    pub(crate) fn next(&self, index: &mut usize) -> Option<Arc<Context>> {
        let mut at: c_ulong = *index;
        // SAFETY: `xa` was initialized; `at` is valid for reads and writes.
        let entry = unsafe { crate::glue::slots_find(self.xa.get(), &mut at) };
        *index = at;
        // SAFETY: as in `get`.
        unsafe { Self::clone_entry(entry) }
    }

    /// # Safety
    ///
    /// `entry` is NULL or an entry of the table whose reference nothing drops while this runs.
    unsafe fn clone_entry(entry: *mut c_void) -> Option<Arc<Context>> {
        if entry.is_null() {
            return None;
        }
        // SAFETY: `entry` came from `Arc::into_raw` in `fill` and its reference stays while
        // this runs (the caller's promise).
        let ctx = unsafe { ArcBorrow::from_raw(entry.cast::<Context>()) };
        Some(ctx.into())
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // Nothing but the reserved index is left: every context holds a reference on the
        // module. A reservation owns no reference.
        // SAFETY: `xa` was initialized and nothing uses it any more.
        unsafe { bindings::xa_destroy(self.xa.get()) };
    }
}

// KUnit (`nvpm_kunit`: see Kbuild): which index a reservation gets, and what a lookup sees of
// reserved and filled slots, on a table of the test's own.
#[cfg(nvpm_kunit)]
#[kernel::macros::kunit_tests(nv_peer_mem_slots)]
mod tests {
    use super::Slots;
    use crate::client_kind::ClientKind;
    use crate::registration::Context;
    use kernel::prelude::*;
    use kernel::sync::Arc;

    /// A context whose id is `id`.
    fn context(id: usize) -> Result<Arc<Context>> {
        Context::new(id, 0x7f00_0000_0000, 0x1_0000, ClientKind::Persistent)
    }

    /// The id of the context `next` finds from `from` on, and its index.
    fn next_from(slots: &Slots, from: usize) -> Option<(usize, usize)> {
        let mut at = from;
        slots.next(&mut at).map(|c| (c.id, at))
    }

    #[test]
    fn lowest_free_index_first() -> Result {
        let slots = Slots::new()?;
        // Index 1 is reserved for good by `new`.
        assert_eq!(slots.reserve()?, 2);
        assert_eq!(slots.reserve()?, 3);
        assert_eq!(slots.reserve()?, 4);
        slots.unreserve(3);
        slots.unreserve(2);
        assert_eq!(slots.reserve()?, 2);
        assert_eq!(slots.reserve()?, 3);
        assert_eq!(slots.reserve()?, 5);
        for i in 2..=5 {
            slots.unreserve(i);
        }
        Ok(())
    }

    #[test]
    fn reserved_slot_reads_empty() -> Result {
        let slots = Slots::new()?;
        let i = slots.reserve()?;
        assert!(slots.get(1).is_none());
        assert!(slots.get(i).is_none());
        assert!(next_from(&slots, 0).is_none());
        slots.unreserve(i);
        Ok(())
    }

    #[test]
    fn filled_slot_is_found_until_taken() -> Result {
        let slots = Slots::new()?;
        let i = slots.reserve()?;
        slots.fill(i, context(0x1234)?);
        assert!(slots.get(i).is_some_and(|c| c.id == 0x1234));
        assert_eq!(next_from(&slots, 0), Some((0x1234, i as usize)));
        assert!(slots.take(i).is_some_and(|c| c.id == 0x1234));
        assert!(slots.get(i).is_none());
        assert!(slots.take(i).is_none());
        // Taken means free again.
        assert_eq!(slots.reserve()?, i);
        slots.unreserve(i);
        Ok(())
    }

    #[test]
    fn next_walks_in_index_order() -> Result {
        let slots = Slots::new()?;
        let mut at = [0; 3];
        for (n, i) in at.iter_mut().enumerate() {
            *i = slots.reserve()?;
            slots.fill(*i, context(100 + n)?);
        }
        // The middle one gone: the walk skips its index.
        assert!(slots.take(at[1]).is_some());
        let (i0, i2) = (at[0] as usize, at[2] as usize);
        assert_eq!(next_from(&slots, 0), Some((100, i0)));
        assert_eq!(next_from(&slots, i0 + 1), Some((102, i2)));
        assert!(next_from(&slots, i2 + 1).is_none());
        assert!(slots.take(at[0]).is_some());
        assert!(slots.take(at[2]).is_some());
        Ok(())
    }
}
