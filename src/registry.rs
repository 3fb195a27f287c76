// SPDX-License-Identifier: GPL-2.0

//! The live registrations, by id. The id is what ib_core holds as `client_context` and what
//! NVIDIA passes back to our free callback: never a pointer, so a stale or foreign value is
//! refused instead of dereferenced.
//!
//! A context has a slot in the table (`slots.rs`) for as long as ib_core or NVIDIA can call in
//! with its id: ib_core from `acquire` to `release`, NVIDIA from arming a pin's free callback
//! until the callback runs, or until the pin is released from the process that made it (after
//! which NVIDIA never calls back). The context's `held_for` says for whom; the slot, and the
//! reference it owns, go when neither is left. A callback that finds its context not armed
//! does nothing.
//!
//! The id is the slot's index in its low 32 bits and a generation number above them. Indices
//! are taken again, the lowest free one first, so the table stays dense (10 000 live
//! registrations fill 157 nodes of 64 slots, and a lookup reads three nodes; up to 62 live
//! registrations share the node that the table keeps from load to unload); generations
//! count up, so a stale id is refused even when its index has been taken again (until the
//! 31-bit generation wraps, 2^31 registrations later). An id never has its top bit set, which
//! every kernel address has.

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

use crate::registration::Context;
use crate::slots::Slots;

const _: () = assert!(usize::BITS == 64, "ids need 64 bits");

const INDEX_BITS: u32 = 32;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
const GENERATION_MASK: usize = (1 << 31) - 1;

/// For whom the registry keeps a context: bits of `Context::held_for`.
#[derive(Clone, Copy)]
#[repr(u8)]
pub(crate) enum HeldFor {
    /// ib_core, from `acquire` to `release`.
    Core = 1,
    /// NVIDIA's free callback, while a pin's callback is armed.
    Callback = 2,
}

#[pin_data]
pub(crate) struct Registry {
    #[pin]
    slots: Mutex<Slots>,
    next_generation: AtomicUsize,
}

impl Registry {
    pub(crate) fn new() -> Result<impl PinInit<Self>> {
        let slots = Slots::new()?;
        Ok(pin_init!(Self {
            slots <- new_mutex!(slots),
            next_generation: AtomicUsize::new(1),
        }))
    }

    /// Makes a context with `make`, given the context's id, and keeps it for ib_core.
    pub(crate) fn insert_new(
        &self,
        make: impl FnOnce(usize) -> Result<Arc<Context>>,
    ) -> Result<Arc<Context>> {
        let index = self.slots.lock().reserve()?;
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed) & GENERATION_MASK;
        // The context is made without the lock held: a reserved slot reads as empty.
        match make(generation << INDEX_BITS | index as usize) {
            Ok(ctx) => {
                let slots = self.slots.lock();
                ctx.held_for.store(HeldFor::Core as u8, Ordering::Relaxed);
                slots.fill(index, ctx.clone());
                Ok(ctx)
            }
            Err(e) => {
                self.slots.lock().unreserve(index);
                Err(e)
            }
        }
    }

    /// The context with `id`, if it has a slot. The slots' lock must be held.
    fn find(slots: &Slots, id: usize) -> Option<(u32, Arc<Context>)> {
        let index = (id & INDEX_MASK) as u32;
        let ctx = slots.get(index)?;
        (ctx.id == id).then_some((index, ctx))
    }

    /// Whether `who` holds `ctx`. The slots' lock must be held (the bits change under it).
    fn holds(ctx: &Context, who: HeldFor) -> bool {
        ctx.held_for.load(Ordering::Relaxed) & who as u8 != 0
    }

    /// The context with `id`, if ib_core holds it.
    pub(crate) fn get(&self, id: usize) -> Option<Arc<Context>> {
        let slots = self.slots.lock();
        let (_, ctx) = Self::find(&slots, id)?;
        Self::holds(&ctx, HeldFor::Core).then_some(ctx)
    }

    /// The live registrations, in index order, for the registration view.
    pub(crate) fn snapshot(&self) -> Result<KVec<Arc<Context>>> {
        let slots = self.slots.lock();
        let mut out = KVec::new();
        let mut index = 0;
        while let Some(ctx) = slots.next(&mut index) {
            if Self::holds(&ctx, HeldFor::Core) {
                out.push(ctx, GFP_KERNEL)?;
            }
            index += 1;
        }
        Ok(out)
    }

    /// ib_core lets go of the context with `id` (`release`); returns it if ib_core held it.
    pub(crate) fn remove(&self, id: usize) -> Option<Arc<Context>> {
        self.let_go(id, HeldFor::Core)
    }

    /// Keeps `ctx` for NVIDIA's free callback too. Only a context ib_core holds can be armed
    /// (`acquire` records it before it pins), so that its slot is there for the callback.
    pub(crate) fn arm(&self, ctx: &Context) -> Result {
        let _slots = self.slots.lock();
        if !Self::holds(ctx, HeldFor::Core) {
            pr_err!("arming a released context {}: refused\n", ctx.id);
            return Err(EINVAL);
        }
        ctx.held_for
            .fetch_or(HeldFor::Callback as u8, Ordering::Relaxed);
        Ok(())
    }

    /// Drops the callback's hold; returns the context to a callback that runs.
    pub(crate) fn disarm(&self, id: usize) -> Option<Arc<Context>> {
        self.let_go(id, HeldFor::Callback)
    }

    /// Ends the hold `who` has on the context with `id`; the slot goes with the last hold. The
    /// context is returned, so its last reference is never dropped under the lock.
    fn let_go(&self, id: usize, who: HeldFor) -> Option<Arc<Context>> {
        let slots = self.slots.lock();
        let (index, ctx) = Self::find(&slots, id)?;
        if !Self::holds(&ctx, who) {
            return None;
        }
        let held = ctx.held_for.fetch_and(!(who as u8), Ordering::Relaxed);
        if held == who as u8 {
            // Not the last reference: `ctx` is another.
            drop(slots.take(index));
        }
        Some(ctx)
    }
}

// KUnit (`nvpm_kunit`: see Kbuild): ids, generations and holds, on a registry of the test's own
// (the module's is left alone). Each test empties its registry before dropping it: the table
// drops no context itself.
#[cfg(nvpm_kunit)]
#[kernel::macros::kunit_tests(nv_peer_mem_registry)]
mod tests {
    use super::{Registry, GENERATION_MASK, INDEX_BITS, INDEX_MASK};
    use crate::client_kind::ClientKind;
    use crate::registration::Context;
    use core::sync::atomic::Ordering;
    use kernel::prelude::*;
    use kernel::sync::Arc;

    fn registry() -> Result<Pin<KBox<Registry>>> {
        KBox::pin_init(Registry::new()?, GFP_KERNEL)
    }

    /// A new registration of one GPU page, held for ib_core.
    fn insert(reg: &Registry) -> Result<Arc<Context>> {
        reg.insert_new(|id| Context::new(id, 0x7f00_0000_0000, 0x1_0000, ClientKind::Invalidating))
    }

    fn index(id: usize) -> usize {
        id & INDEX_MASK
    }

    fn generation(id: usize) -> usize {
        id >> INDEX_BITS
    }

    /// Whether the registry gives ib_core the context with `id`.
    fn found(reg: &Registry, id: usize) -> bool {
        reg.get(id).is_some_and(|c| c.id == id)
    }

    /// The ids the registration view lists.
    fn listed(reg: &Registry) -> Result<KVec<usize>> {
        let mut ids = KVec::new();
        for ctx in reg.snapshot()? {
            ids.push(ctx.id, GFP_KERNEL)?;
        }
        Ok(ids)
    }

    #[test]
    fn ids_are_index_and_generation() -> Result {
        let reg = registry()?;
        let a = insert(&reg)?;
        let b = insert(&reg)?;
        // Index 1 is the table's own reservation; generations count from 1.
        assert_eq!((index(a.id), generation(a.id)), (2, 1));
        assert_eq!((index(b.id), generation(b.id)), (3, 2));
        assert!(found(&reg, a.id) && found(&reg, b.id));
        assert!(reg.remove(a.id).is_some_and(|c| c.id == a.id));
        assert!(reg.remove(b.id).is_some_and(|c| c.id == b.id));
        Ok(())
    }

    #[test]
    fn stale_id_is_refused_after_its_index_is_taken_again() -> Result {
        let reg = registry()?;
        let old = insert(&reg)?;
        assert!(reg.remove(old.id).is_some());
        let new = insert(&reg)?;
        // The lowest free index again, under a new generation.
        assert_eq!(index(new.id), index(old.id));
        assert_eq!(generation(new.id), generation(old.id) + 1);
        assert!(!found(&reg, old.id));
        assert!(reg.remove(old.id).is_none());
        assert!(reg.disarm(old.id).is_none());
        assert!(found(&reg, new.id));
        assert!(reg.remove(new.id).is_some());
        Ok(())
    }

    #[test]
    fn foreign_ids_are_refused() -> Result {
        let reg = registry()?;
        let a = insert(&reg)?;
        // Nothing, the reserved index, a kernel address, a's index under other generations.
        for id in [
            0,
            1,
            0xffff_8880_0000_1000,
            a.id + (1 << INDEX_BITS),
            index(a.id),
        ] {
            assert!(!found(&reg, id));
            assert!(reg.remove(id).is_none());
            assert!(reg.disarm(id).is_none());
        }
        assert!(found(&reg, a.id));
        assert!(reg.remove(a.id).is_some());
        Ok(())
    }

    #[test]
    fn generation_wraps_below_the_top_bit() -> Result {
        let reg = registry()?;
        reg.next_generation
            .store(GENERATION_MASK, Ordering::Relaxed);
        let last = insert(&reg)?;
        let wrapped = insert(&reg)?;
        assert_eq!(generation(last.id), GENERATION_MASK);
        assert_eq!(last.id >> 63, 0);
        assert_eq!(generation(wrapped.id), 0);
        assert!(found(&reg, last.id) && found(&reg, wrapped.id));
        assert!(reg.remove(last.id).is_some());
        assert!(reg.remove(wrapped.id).is_some());
        Ok(())
    }

    #[test]
    fn slot_stays_until_the_last_hold_goes() -> Result {
        let reg = registry()?;
        let a = insert(&reg)?;
        reg.arm(&a)?;
        // ib_core lets go first: ib_core no longer finds it, its index stays taken.
        assert!(reg.remove(a.id).is_some());
        assert!(!found(&reg, a.id));
        assert!(reg.remove(a.id).is_none());
        let b = insert(&reg)?;
        assert_eq!(index(b.id), index(a.id) + 1);
        // The callback finds it once; then the index is free.
        assert!(reg.disarm(a.id).is_some_and(|c| c.id == a.id));
        assert!(reg.disarm(a.id).is_none());
        let c = insert(&reg)?;
        assert_eq!(index(c.id), index(a.id));
        // A released context cannot be armed again (this logs an error line).
        assert!(reg.remove(b.id).is_some());
        assert!(reg.arm(&b).is_err());
        assert!(reg.disarm(b.id).is_none());
        assert!(reg.remove(c.id).is_some());
        Ok(())
    }

    #[test]
    fn snapshot_lists_what_ib_core_holds_in_index_order() -> Result {
        let reg = registry()?;
        let a = insert(&reg)?;
        let b = insert(&reg)?;
        let c = insert(&reg)?;
        assert_eq!(listed(&reg)?[..], [a.id, b.id, c.id]);
        // Held for the callback alone: not a live registration any more.
        reg.arm(&b)?;
        assert!(reg.remove(b.id).is_some());
        assert_eq!(listed(&reg)?[..], [a.id, c.id]);
        assert!(reg.disarm(b.id).is_some());
        assert!(reg.remove(a.id).is_some());
        assert!(reg.remove(c.id).is_some());
        assert!(listed(&reg)?.is_empty());
        Ok(())
    }
}
