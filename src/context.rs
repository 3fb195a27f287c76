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
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::{Arc, Mutex};

use crate::module_ref::ModuleRef;
use crate::nv_p2p::{DmaMapping, PageTable, GPU_PAGE_MASK, GPU_PAGE_SIZE};
use crate::pinning::{current_tgid, Pinned};
use crate::sg::SgCopy;
use crate::stats::{count, count_nvidia_error, Counter, Held};

/// Which client a registration belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientKind {
    /// "nv_mem": pins with a free callback and invalidates through ib_core.
    Invalidating,
    /// "nv_mem_nc" (or "nv_mem" with persistent_api_support=1): pins that never go away.
    Persistent,
}

/// Pinned GPU pages.
pub(crate) struct Pin {
    pub(crate) table: PageTable,
    /// ib_core's id for this registration, for invalidations.
    pub(crate) core_context: u64,
    /// The process that pinned: NVIDIA looks pins up by the calling process, so only it can
    /// unpin.
    pub(crate) tgid: c_int,
    /// In the counters while pinned by a registration (not by `acquire`'s probe).
    pub(crate) _held: Option<Held>,
}

/// The DMA mapping for the NIC and the sg list made from it.
pub(crate) struct Mapping {
    pub(crate) dma: DmaMapping,
    pub(crate) sg: SgCopy,
    /// The NIC's PCI address (`nvpm_pci_bdf`), for the registration view.
    pub(crate) nic: u32,
}

/// Where a registration is; each variant owns what that phase holds.
pub(crate) enum Phase {
    /// Nothing pinned: after `acquire`, or after `put_pages`.
    Acquired,
    /// `nvidia_p2p_get_pages` in flight.
    Pinning,
    /// Pinned by `acquire` to learn that the range is GPU memory; `get_pages` adopts the pin,
    /// `release` without `get_pages` unpins it.
    Claimed(Pin),
    Pinned(Pin),
    /// `nvidia_p2p_dma_map_pages` in flight; the caller holds the pin.
    Mapping,
    Mapped(Pin, Mapping),
    /// `nvidia_p2p_put_pages` in flight; the caller holds the pin.
    Unpinning,
    /// ib_core unpinned from a thread that is not the pinning process, so NVIDIA kept the pin:
    /// it goes when the GPU memory is freed, through the free callback.
    Orphaned(Pin),
    /// The free callback ran: nothing of NVIDIA's is left. The sg list stays until ib_core
    /// lets go of it.
    Revoked(Option<SgCopy>),
}

impl Phase {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Acquired => "acquired",
            Self::Pinning => "pinning",
            Self::Claimed(_) => "claimed",
            Self::Pinned(_) => "pinned",
            Self::Mapping => "mapping",
            Self::Mapped(..) => "mapped",
            Self::Unpinning => "unpinning",
            Self::Orphaned(_) => "orphaned",
            Self::Revoked(_) => "revoked",
        }
    }
}

/// The per-registration context.
#[pin_data]
pub(crate) struct Context {
    /// Our id for it: ib_core's `client_context` and the free callback's data.
    pub(crate) id: usize,
    /// The raw range ib_core asked about.
    pub(crate) addr: u64,
    pub(crate) size: u64,
    /// The range widened to whole GPU pages.
    pub(crate) va: u64,
    pub(crate) len: u64,
    pub(crate) kind: ClientKind,
    /// When `acquire` made it (`ktime_get_ns`), for the registration view.
    pub(crate) created_ns: u64,
    #[pin]
    pub(crate) phase: Mutex<Phase>,
    /// Keeps the module loaded for as long as ib_core or NVIDIA can call in for this context.
    _module: ModuleRef,
}

/// Widens `[addr, addr + size)` to whole GPU pages.
pub(crate) fn gpu_range(addr: u64, size: u64) -> Option<(u64, u64)> {
    if size == 0 {
        return None;
    }
    let end = addr.checked_add(size)?.checked_add(GPU_PAGE_SIZE - 1)? & GPU_PAGE_MASK;
    let va = addr & GPU_PAGE_MASK;
    Some((va, end - va))
}

extern "C" {
    fn nvpm_now_ns() -> u64;
}

/// Monotonic nanoseconds.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: reads the clock; no requirement.
    unsafe { nvpm_now_ns() }
}

impl Context {
    pub(crate) fn new(id: usize, addr: u64, size: u64, kind: ClientKind) -> Result<Arc<Self>> {
        let (va, len) = gpu_range(addr, size).ok_or(EINVAL)?;
        Arc::pin_init(
            pin_init!(Self {
                id,
                addr,
                size,
                va,
                len,
                kind,
                created_ns: now_ns(),
                phase <- new_mutex!(Phase::Acquired),
                _module: ModuleRef::take(),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether NVIDIA knows the range as GPU memory of the calling process, found out by
    /// pinning it (ib_core's `acquire`). The pin is kept for `get_pages` to adopt (phase
    /// `Claimed`), or with `probe_then_pin` given back at once. It goes through the phases like
    /// any other, so a free racing it is handled as in a registration: the phase is then
    /// `Revoked` (one pin) and `get_pages` fails. Returns NVIDIA's error.
    pub(crate) fn claim(self: &Arc<Self>) -> Result {
        *self.phase.lock() = Phase::Pinning;
        let (table, mut phase) = match self.pin()? {
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
        self.unpin(pin);
        // `get_pages` pins again; if the memory was freed meanwhile NVIDIA says so then.
        *self.phase.lock() = Phase::Acquired;
        Ok(())
    }

    /// Makes the registration's pin of `acquire`'s (ib_core's `get_pages`), or pins now when
    /// `acquire` kept none.
    pub(crate) fn get_pages(self: &Arc<Self>, core_context: u64) -> Result {
        let mut phase = self.phase.lock();
        match core::mem::replace(&mut *phase, Phase::Pinning) {
            Phase::Claimed(pin) => return self.adopt(phase, pin.table, pin.tgid, core_context),
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
        match self.pin() {
            Ok(Pinned::Live(table, phase)) => {
                self.adopt(phase, table, current_tgid(), core_context)
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
            self.unpin(pin);
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
    pub(crate) fn put_pages(self: &Arc<Self>) {
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
        self.unpin(pin);
    }

    /// Undoes whatever ib_core left mapped or pinned (ib_core's `release`).
    pub(crate) fn release(self: &Arc<Self>) {
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
        self.put_pages();
    }
}
