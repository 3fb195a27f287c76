// SPDX-License-Identifier: GPL-2.0

//! Pinning and unpinning a registration's GPU pages, the two steps that call into NVIDIA with
//! no lock held (rule 2 in `context.rs`) and then look at the phase to learn whether a free
//! callback ran meanwhile.

use core::ffi::c_void;
use kernel::prelude::*;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::Arc;

use super::{current_tgid, Context, Phase, Pin};
use crate::client_kind::ClientKind;
use crate::globals::Globals;
use crate::nv_p2p::PageTable;

/// What pinning found once NVIDIA returned.
pub(crate) enum Pinned<'a> {
    /// The table, with the phase still locked (and still `Pinning`).
    Live(PageTable, Guard<'a, Phase, MutexBackend>),
    /// A free callback revoked the pin as soon as it was made: the table is given up and the
    /// phase is `Revoked`.
    Revoked,
}

impl Context {
    /// Pins with a free callback (invalidating client) or for good (persistent client); the
    /// phase is `Pinning` and no lock is held. On error the phase is back to `Acquired`.
    pub(crate) fn pin(self: &Arc<Self>, state: &Globals) -> Result<Pinned<'_>> {
        let pinned = self.pin_call(state);
        let mut phase = self.phase.lock();
        let table = match pinned {
            Ok(table) => table,
            Err(e) => {
                *phase = Phase::Acquired;
                return Err(e);
            }
        };
        if matches!(*phase, Phase::Revoked(_)) {
            // The GPU memory was freed as soon as it was pinned: the table is dead.
            drop(phase);
            table.free_revoked();
            return Ok(Pinned::Revoked);
        }
        Ok(Pinned::Live(table, phase))
    }

    /// The NVIDIA call of [`Self::pin`].
    fn pin_call(self: &Arc<Self>, state: &Globals) -> Result<PageTable> {
        match self.kind {
            ClientKind::Persistent => {
                PageTable::get_persistent(state.persistent(), self.va, self.len)
            }
            ClientKind::Invalidating => {
                state.registry().arm(self)?;
                // SAFETY: the callback finds the context by id in the registry, which keeps it
                // armed until the callback ran or the pin is released (`registry.rs`).
                let res = unsafe {
                    PageTable::get_revocable(
                        self.va,
                        self.len,
                        super::revoke::free_callback,
                        self.id as *mut c_void,
                    )
                };
                if res.is_err() {
                    // NVIDIA did not keep the callback.
                    state.registry().disarm_held(self);
                }
                res
            }
        }
    }

    /// Releases `pin`; the phase is `Unpinning` and no lock is held.
    pub(crate) fn unpin(self: &Arc<Self>, pin: Pin, state: &Globals) {
        if pin.table.is_revocable() && pin.tgid != current_tgid() {
            pr_warn!(
                "GPU memory at {:#x} (+{:#x}) released by another process than the one that pinned it (pid {}): nvidia keeps it pinned until that process frees it\n",
                self.va,
                self.len,
                pin.tgid
            );
            let mut phase = self.phase.lock();
            if matches!(*phase, Phase::Revoked(_)) {
                drop(phase);
                pin.table.free_revoked();
            } else {
                *phase = Phase::Orphaned(pin);
            }
            return;
        }
        let res = pin.table.put();
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Revoked(_)) {
            // The free callback ran while the put waited for NVIDIA: the table was revoked.
            drop(phase);
            pin.table.free_revoked();
            return;
        }
        *phase = Phase::Acquired;
        drop(phase);
        let revocable = pin.table.is_revocable();
        pin.table.released();
        if revocable {
            // Put from the pinning process: the pin is gone, NVIDIA will not call back (and is
            // not calling back: the put waited for a callback that held its API lock, and the
            // phase would say `Revoked`).
            state.registry().disarm_held(self);
        }
        if let Err(e) = res {
            pr_err!(
                "releasing GPU pages at {:#x} (+{:#x}) failed: {:?}\n",
                self.va,
                self.len,
                e
            );
        }
    }
}
