// SPDX-License-Identifier: GPL-2.0

//! One registration of GPU memory, from `acquire` to `release`, and what ib_core asks of it.
//!
//! The rules that keep it safe against NVIDIA's free callback (`revoke.rs`), which can run at
//! any moment from any thread while NVIDIA holds its API lock:
//!
//! 1. NVIDIA's objects are read, unmapped or freed only while holding the context's `phase`
//!    mutex. The callback takes that mutex before anything else, so it cannot return, and NVIDIA
//!    cannot free the objects, while another thread uses them.
//! 2. The mutex is never held across a call that takes NVIDIA's API lock (get_pages, put_pages,
//!    dma_map_pages) or across ib_core's invalidate: the callback holds the API lock and would
//!    wait for us forever. During such a call the phase says so (`Pinning`, `Mapping`,
//!    `Unpinning`) and the caller owns the objects; the callback then neither invalidates nor
//!    waits, and the caller looks at the phase before touching what NVIDIA returned.
//! 3. The sg list is ib_core's until it unmaps or releases (it restores trimmed entries, without
//!    its lock, during teardown): only `dma_unmap` and `release` free it.
use core::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::Arc;

use super::pinning::Pinned;
use super::{current_tgid, Context, Phase, Pin};
use crate::globals::Globals;
use crate::nv_p2p::PageTable;
use crate::stats::{count, count_nvidia_error, Counter, Held};

impl Context {
    /// Whether NVIDIA knows the range as GPU memory of the calling process, found out by
    /// pinning it (ib_core's `acquire`). The pin is kept for `get_pages` to adopt (phase
    /// `Claimed`), or with `probe_then_pin` given back at once. It goes through the phases like
    /// any other, so a free racing it is handled as in a registration: the phase is then
    /// `Revoked` (one pin) and `get_pages` fails. Returns NVIDIA's error.
    pub(crate) fn claim(self: &Arc<Self>, state: &Globals) -> Result {
        *self.phase.lock() = Phase::Pinning;
        let (table, mut phase) = match self.pin(state)? {
            Pinned::Live(table, phase) => (table, phase),
            Pinned::Revoked => return Ok(()),
        };
        let pin = Pin {
            table,
            core_context: 0,
            tgid: current_tgid(),
            _held: None,
        };
        if !crate::params::probe_then_pin() {
            *phase = Phase::Claimed(pin);
            return Ok(());
        }
        *phase = Phase::Unpinning;
        drop(phase);
        self.unpin(pin, state);
        // `get_pages` pins again; if the memory was freed meanwhile NVIDIA says so then.
        *self.phase.lock() = Phase::Acquired;
        Ok(())
    }

    /// Makes the registration's pin of `acquire`'s (ib_core's `get_pages`), or pins now when
    /// `acquire` kept none.
    pub(crate) fn get_pages(self: &Arc<Self>, state: &Globals, core_context: u64) -> Result {
        let mut phase = self.phase.lock();
        match core::mem::replace(&mut *phase, Phase::Pinning) {
            Phase::Claimed(pin) => {
                return self.adopt(state, phase, pin.table, pin.tgid, core_context)
            }
            Phase::Acquired => {}
            Phase::Revoked(sg) => {
                *phase = Phase::Revoked(sg);
                return Err(self.freed_during_registration());
            }
            other => {
                pr_err!(
                    "get_pages for va {:#x} in phase {}: refused\n",
                    self.va,
                    other.name()
                );
                *phase = other;
                count(self.kind, Counter::ErrRefusedContext);
                return Err(EINVAL);
            }
        }
        drop(phase);
        match self.pin(state) {
            Ok(Pinned::Live(table, phase)) => {
                self.adopt(state, phase, table, current_tgid(), core_context)
            }
            Ok(Pinned::Revoked) => Err(self.freed_during_registration()),
            Err(e) => {
                count_nvidia_error(self.kind, e);
                let hint = if e == ENOMEM {
                    " (GPU BAR1 space exhausted? see nvidia-smi -q -d MEMORY)"
                } else {
                    ""
                };
                pr_err!(
                    "pinning GPU memory va={:#x} len={:#x} failed: {:?}{}\n",
                    self.va,
                    self.len,
                    e,
                    hint
                );
                Err(e)
            }
        }
    }

    /// Checks a live pin and makes it the registration's; the phase is locked and `Pinning`.
    fn adopt(
        self: &Arc<Self>,
        state: &Globals,
        mut phase: Guard<'_, Phase, MutexBackend>,
        table: PageTable,
        tgid: c_int,
        core_context: u64,
    ) -> Result {
        let mut pin = Pin {
            table,
            core_context,
            tgid,
            _held: None,
        };
        if let Err(e) = pin.table.validate(self.len) {
            count(self.kind, Counter::ErrNvidiaOther);
            *phase = Phase::Unpinning;
            drop(phase);
            self.unpin(pin, state);
            return Err(e);
        }
        count(self.kind, Counter::Registrations);
        pin._held = Some(Held::new(self.kind, self.len));
        *phase = Phase::Pinned(pin);
        Ok(())
    }

    /// Logs and counts a registration whose GPU memory was freed under it; the error for ib_core.
    pub(crate) fn freed_during_registration(&self) -> Error {
        pr_err!(
            "GPU memory at {:#x} (+{:#x}) was freed during registration\n",
            self.va,
            self.len
        );
        count(self.kind, Counter::ErrFreedDuringRegistration);
        EFAULT
    }

    /// Unpins (ib_core's `put_pages`).
    pub(crate) fn put_pages(self: &Arc<Self>, state: &Globals) {
        let pin = {
            let mut phase = self.phase.lock();
            match core::mem::replace(&mut *phase, Phase::Unpinning) {
                Phase::Pinned(pin) => {
                    count(self.kind, Counter::Deregistrations);
                    pin
                }
                // `release` without `get_pages`: `acquire`'s pin was never adopted.
                Phase::Claimed(pin) => pin,
                other => {
                    *phase = other;
                    return;
                }
            }
        };
        self.unpin(pin, state);
    }

    /// Undoes whatever ib_core left mapped or pinned (ib_core's `release`).
    pub(crate) fn release(self: &Arc<Self>, state: &Globals) {
        let mapped = {
            let mut phase = self.phase.lock();
            match &mut *phase {
                Phase::Mapped(..) => {
                    pr_warn!(
                        "release of a still-mapped registration at {:#x}: unmapping\n",
                        self.va
                    );
                    true
                }
                // ib_core is done with the sg list of a revoked registration.
                Phase::Revoked(sg) => {
                    drop(sg.take());
                    false
                }
                _ => false,
            }
        };
        // Still mapped, or revoked by a free callback since: `dma_unmap` accepts both.
        if mapped && self.dma_unmap().is_err() {
            pr_err!("release at {:#x}: could not unmap\n", self.va);
        }
        self.put_pages(state);
    }
}
