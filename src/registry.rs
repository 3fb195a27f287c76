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
//! registrations fill 157 nodes of 64 slots, and a walk from the top reads three nodes; up to
//! 62 live registrations share the node that the table keeps from load to unload);
//! generations count up, so a stale id is refused even when its index has been taken again
//! (until the 31-bit generation wraps, 2^31 registrations later). An id never has its top bit
//! set, which every kernel address has.
//!
//! What one registration costs here (Documentation/performance.md, "The registry per
//! registration"): each of ib_core's six calls for a registration takes the registry's lock once
//! (`acquire` twice: the slot is reserved, the context made without the lock, then the slot
//! filled). ib_core calls one registration's operations one after another, and
//! `release` last (Documentation/design.md, "Validating what ib_core hands back"), so the
//! callback's hold is taken and dropped by those calls without the lock ([`Registry::arm`],
//! [`Registry::disarm_held`]). A lookup first compares the id with the context found last,
//! which ib_core's next call for the same registration asks for again: the table is walked
//! only when they differ, and its depth, which grows with the live count, is then paid.

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

/// The slots and the context found last, under the registry's mutex.
///
/// # Invariants
///
/// `recent` is `None` or a context whose slot in `slots` is filled: the slot owns another
/// reference to it, so dropping `recent`'s reference under the lock never drops the last one.
struct Table {
    slots: Slots,
    recent: Option<Arc<Context>>,
}

#[pin_data]
pub(crate) struct Registry {
    #[pin]
    table: Mutex<Table>,
    next_generation: AtomicUsize,
}

impl Registry {
    pub(crate) fn new() -> Result<impl PinInit<Self>> {
        // INVARIANT: nothing was found yet.
        let table = Table {
            slots: Slots::new()?,
            recent: None,
        };
        Ok(pin_init!(Self {
            table <- new_mutex!(table),
            next_generation: AtomicUsize::new(1),
        }))
    }

    /// Makes a context with `make`, given the context's id, and keeps it for ib_core.
    pub(crate) fn insert_new(
        &self,
        make: impl FnOnce(usize) -> Result<Arc<Context>>,
    ) -> Result<Arc<Context>> {
        let index = self.table.lock().slots.reserve()?;
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed) & GENERATION_MASK;
        // The context is made without the lock held: a reserved slot reads as empty.
        match make(generation << INDEX_BITS | index as usize) {
            Ok(ctx) => {
                let mut table = self.table.lock();
                ctx.held_for.store(HeldFor::Core as u8, Ordering::Relaxed);
                table.slots.fill(index, ctx.clone());
                // INVARIANT: its slot was filled just now. The context this replaces has a slot
                // too, so its reference is not the last.
                table.recent = Some(ctx.clone());
                Ok(ctx)
            }
            Err(e) => {
                self.table.lock().slots.unreserve(index);
                Err(e)
            }
        }
    }

    /// The context with `id`, if it has a slot, and the slot's index; it becomes the one
    /// found last. Called under the registry's lock (the guard gives the `&mut`).
    fn find(table: &mut Table, id: usize) -> Option<(u32, Arc<Context>)> {
        let index = (id & INDEX_MASK) as u32;
        // The whole id, generation included, as the slot's context is compared below: a stale
        // id whose index was taken again does not match the context found last either.
        if let Some(ctx) = table.recent.as_ref().filter(|c| c.id == id) {
            return Some((index, ctx.clone()));
        }
        let ctx = table.slots.get(index)?;
        if ctx.id != id {
            return None;
        }
        // INVARIANT: `ctx` was found in its slot just now; the context it replaces has a slot
        // too (`let_go` forgets one whose slot it takes), so its reference is not the last.
        table.recent = Some(ctx.clone());
        Some((index, ctx))
    }

    /// Whether `who` holds `ctx`. Under the registry's lock, or where the bit cannot change
    /// meanwhile (ib_core's own calls, for `Core`: see [`Self::arm`]).
    fn holds(ctx: &Context, who: HeldFor) -> bool {
        ctx.held_for.load(Ordering::Relaxed) & who as u8 != 0
    }

    /// The context with `id`, if ib_core holds it.
    pub(crate) fn get(&self, id: usize) -> Option<Arc<Context>> {
        let mut table = self.table.lock();
        let (_, ctx) = Self::find(&mut table, id)?;
        Self::holds(&ctx, HeldFor::Core).then_some(ctx)
    }

    /// The live registrations, in index order, for the registration view.
    pub(crate) fn snapshot(&self) -> Result<KVec<Arc<Context>>> {
        let table = self.table.lock();
        let mut out = KVec::new();
        let mut index = 0;
        while let Some(ctx) = table.slots.next(&mut index) {
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

    /// Keeps `ctx` for NVIDIA's free callback too, before its pin is made. Only a context
    /// ib_core holds can be armed, so that its slot is there for the callback.
    ///
    /// Called from ib_core's `acquire` and `get_pages` only, without the lock: between the
    /// `acquire` that made the context and its `release`, ib_core calls the registration's
    /// operations one after another and `release` last, so `Core` cannot go while this runs,
    /// and the slot stays; and no pin of the context is armed at that point (the last one was
    /// released from its process, which disarmed it, or the callback ran), so no callback can
    /// let go of the hold this takes before NVIDIA has the new pin. The bit reaches a callback
    /// through NVIDIA's API lock, which the pin takes after this and the callback holds.
    pub(crate) fn arm(&self, ctx: &Context) -> Result {
        if !Self::holds(ctx, HeldFor::Core) {
            pr_err!("arming a released context {}: refused\n", ctx.id);
            return Err(EINVAL);
        }
        ctx.held_for
            .fetch_or(HeldFor::Callback as u8, Ordering::Relaxed);
        Ok(())
    }

    /// Drops the callback's hold on `ctx`, whose pin was just released from the process that
    /// made it and not revoked, so NVIDIA neither calls back nor is calling back.
    ///
    /// While ib_core holds the context this is not the last hold, and it is dropped without
    /// the lock or a lookup: ib_core's calls are the only ones that call this, and ib_core
    /// calls `release`, which drops its hold, after all the others (see [`Self::arm`]), so
    /// `Core` stays while this runs. Inside `release`, where ib_core's hold went first, the
    /// hold is dropped under the lock as a callback's is, and the slot goes with it.
    pub(crate) fn disarm_held(&self, ctx: &Context) {
        if Self::holds(ctx, HeldFor::Core) {
            ctx.held_for
                .fetch_and(!(HeldFor::Callback as u8), Ordering::Relaxed);
        } else {
            drop(self.disarm(ctx.id));
        }
    }

    /// Drops the callback's hold; returns the context to a callback that runs.
    pub(crate) fn disarm(&self, id: usize) -> Option<Arc<Context>> {
        self.let_go(id, HeldFor::Callback)
    }

    /// Ends the hold `who` has on the context with `id`; the slot goes with the last hold. The
    /// context is returned, so its last reference is never dropped under the lock.
    fn let_go(&self, id: usize, who: HeldFor) -> Option<Arc<Context>> {
        let mut table = self.table.lock();
        let (index, ctx) = Self::find(&mut table, id)?;
        if !Self::holds(&ctx, who) {
            return None;
        }
        let held = ctx.held_for.fetch_and(!(who as u8), Ordering::Relaxed);
        if held == who as u8 {
            // INVARIANT: the context found last loses its slot here, so it is forgotten.
            // Neither reference is the last: `ctx` is another.
            if table.recent.as_ref().is_some_and(|c| c.id == id) {
                table.recent = None;
            }
            drop(table.slots.take(index));
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
    fn lookups_compare_the_whole_id_with_the_one_found_last() -> Result {
        let reg = registry()?;
        let a = insert(&reg)?;
        let b = insert(&reg)?;
        // b was found last (inserted); a is walked to, then b again.
        for _ in 0..2 {
            assert!(found(&reg, a.id) && found(&reg, b.id));
        }
        // b's index under the generation before, with b found last: refused.
        assert!(!found(&reg, b.id - (1 << INDEX_BITS)));
        assert!(reg.remove(b.id).is_some());
        // Found last and gone: refused, and its index free again; still refused once taken.
        assert!(!found(&reg, b.id));
        let c = insert(&reg)?;
        assert_eq!(index(c.id), index(b.id));
        assert!(!found(&reg, b.id));
        assert!(reg.remove(b.id).is_none());
        assert!(reg.remove(a.id).is_some());
        assert!(reg.remove(c.id).is_some());
        Ok(())
    }

    #[test]
    fn callback_hold_dropped_without_the_lock_while_ib_core_holds() -> Result {
        let reg = registry()?;
        let a = insert(&reg)?;
        reg.arm(&a)?;
        // Unpinned from its process while ib_core holds it: the slot stays for ib_core, and a
        // late callback finds nothing armed.
        reg.disarm_held(&a);
        assert!(reg.disarm(a.id).is_none());
        assert!(found(&reg, a.id));
        // ib_core's release is then the last hold: the index is free again.
        assert!(reg.remove(a.id).is_some());
        let b = insert(&reg)?;
        assert_eq!(index(b.id), index(a.id));
        // Inside release (ib_core's hold gone first) the callback's hold goes under the lock
        // and takes the slot with it.
        reg.arm(&b)?;
        assert!(reg.remove(b.id).is_some());
        reg.disarm_held(&b);
        let c = insert(&reg)?;
        assert_eq!(index(c.id), index(b.id));
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
