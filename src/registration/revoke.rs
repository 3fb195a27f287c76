// SPDX-License-Identifier: GPL-2.0

//! NVIDIA's free callback: the GPU memory under a registration is being freed (cudaFree,
//! process exit). NVIDIA holds its API lock while it runs and frees the page table and its
//! mappings as soon as it returns (since R515).
//!
//! What the callback does, by phase (see the rules in `context.rs`):
//! - `Mapped`: a live registration. Take the objects, mark it revoked, and with no lock held ask
//!   ib_core to invalidate it: ib_core stops the NIC and waits for a registration still in
//!   progress (its mapping lock). Then free the mapping and the table. The sg list stays for
//!   ib_core, which may still restore its trimmed entries; `dma_unmap` or `release` frees it.
//! - `Claimed`, `Pinned`, `Orphaned`: no NIC access exists (not yet registered or mapped, or
//!   being torn down): free the table, do not invalidate; a later `get_pages` fails.
//! - `Pinning`, `Mapping`, `Unpinning`: another thread is inside NVIDIA for this registration,
//!   waiting for the API lock we hold. Waiting for it, or invalidating (ib_core's mapping lock
//!   may be held by that thread), would deadlock. Mark it revoked and return: that thread
//!   disposes of the objects when NVIDIA returns, without reading them. A `Mapping` caller
//!   meets NVIDIA's own use of the freed table (see Documentation/design.md).

use core::ffi::c_void;
use kernel::prelude::*;
use kernel::sync::Arc;

use super::{Context, Mapping, Phase, Pin};
use crate::globals::globals;

/// What the callback took over from the registration.
enum Revoked {
    Live(Pin, crate::nv_p2p::DmaMapping),
    Unmapped(Pin),
    InFlight(&'static str),
    Nothing,
}

impl Context {
    fn on_free(self: &Arc<Self>) {
        let taken = {
            let mut phase = self.phase.lock();
            match core::mem::replace(&mut *phase, Phase::Revoked(None)) {
                Phase::Mapped(pin, Mapping { dma, sg, .. }) => {
                    *phase = Phase::Revoked(Some(sg));
                    Revoked::Live(pin, dma)
                }
                Phase::Claimed(pin) | Phase::Pinned(pin) | Phase::Orphaned(pin) => {
                    Revoked::Unmapped(pin)
                }
                Phase::Pinning => Revoked::InFlight("nvidia_p2p_get_pages"),
                Phase::Mapping => Revoked::InFlight("nvidia_p2p_dma_map_pages"),
                Phase::Unpinning => Revoked::InFlight("nvidia_p2p_put_pages"),
                Phase::Acquired => Revoked::Nothing,
                Phase::Revoked(sg) => {
                    *phase = Phase::Revoked(sg);
                    Revoked::Nothing
                }
            }
        };
        match taken {
            Revoked::Live(pin, dma) => {
                crate::stats::count(self.kind, crate::stats::Counter::Invalidations);
                crate::dbg_log!(
                    "free callback for va {:#x} (+{:#x}): invalidating\n",
                    self.va,
                    self.len
                );
                if !crate::peer_mem::invalidate(pin.core_context) {
                    pr_err!(
                        "cannot invalidate va {:#x}: no invalidate function from ib_core\n",
                        self.va
                    );
                }
                // ib_core has stopped the NIC.
                dma.free_revoked();
                pin.table.free_revoked();
            }
            Revoked::Unmapped(pin) => {
                crate::dbg_log!(
                    "free callback for va {:#x} (+{:#x}): not mapped, nothing to invalidate\n",
                    self.va,
                    self.len
                );
                pin.table.free_revoked();
            }
            Revoked::InFlight(call) => crate::dbg_log!(
                "free callback for va {:#x} (+{:#x}) while {} is in flight\n",
                self.va,
                self.len,
                call
            ),
            Revoked::Nothing => {}
        }
    }
}

/// NVIDIA's free callback for pins made by `Context::claim` or `Context::get_pages`; `data` is the context's id.
///
/// # Safety
///
/// Called by NVIDIA only, with the data given to `nvidia_p2p_get_pages`.
pub(crate) unsafe extern "C" fn free_callback(data: *mut c_void) {
    let id = data as usize;
    // The armed entry is the callback's reference; without one (the pin was released from its
    // process) there is nothing to do.
    // SAFETY: NVIDIA calls back only for an armed pin, whose context the registry keeps until
    // this call disarms it; the context holds a reference on this module (`module_ref.rs`), so
    // module exit, which takes the state back, waits.
    let state = unsafe { globals() };
    match state.registry().disarm(id) {
        Some(ctx) => ctx.on_free(),
        None => crate::dbg_log!("free callback for unknown context {}\n", id),
    }
}
