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

use core::ffi::{c_int, c_void};
use kernel::new_mutex;
use kernel::prelude::*;
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
    // A `struct pci_dev *`, opaque here.
    fn nvpm_pci_bdf(pdev: *mut c_void) -> u32;
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
    /// pinning and unpinning it (ib_core's `acquire`). The pin goes through the phases like any
    /// other, so a free racing it is handled as in a registration. Returns NVIDIA's error.
    pub(crate) fn probe(self: &Arc<Self>) -> Result {
        *self.phase.lock() = Phase::Pinning;
        let (table, mut phase) = match self.pin()? {
            Pinned::Live(table, phase) => (table, phase),
            Pinned::Revoked => {
                *self.phase.lock() = Phase::Acquired;
                return Ok(());
            }
        };
        *phase = Phase::Unpinning;
        drop(phase);
        self.unpin(Pin {
            table,
            core_context: 0,
            tgid: current_tgid(),
            _held: None,
        });
        // A free that raced the unpin left the phase revoked: `get_pages` will find the memory
        // gone and say so.
        *self.phase.lock() = Phase::Acquired;
        Ok(())
    }

    /// Pins the GPU pages (ib_core's `get_pages`).
    pub(crate) fn get_pages(self: &Arc<Self>, core_context: u64) -> Result {
        {
            let mut phase = self.phase.lock();
            if !matches!(*phase, Phase::Acquired) {
                pr_err!(
                    "get_pages for va {:#x} in phase {}: refused\n",
                    self.va,
                    phase.name()
                );
                count(self.kind, Counter::ErrRefusedContext);
                return Err(EINVAL);
            }
            *phase = Phase::Pinning;
        }
        let (table, mut phase) = match self.pin() {
            Ok(Pinned::Live(table, phase)) => (table, phase),
            Ok(Pinned::Revoked) => return Err(self.freed_during_registration()),
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
                return Err(e);
            }
        };
        if let Err(e) = table.validate(self.len) {
            count(self.kind, Counter::ErrNvidiaOther);
            *phase = Phase::Unpinning;
            drop(phase);
            self.unpin(Pin {
                table,
                core_context,
                tgid: current_tgid(),
                _held: None,
            });
            return Err(e);
        }
        count(self.kind, Counter::Registrations);
        *phase = Phase::Pinned(Pin {
            table,
            core_context,
            tgid: current_tgid(),
            _held: Some(Held::new(self.kind, self.len)),
        });
        Ok(())
    }

    /// Logs and counts a registration whose GPU memory was freed under it; the error for ib_core.
    fn freed_during_registration(&self) -> Error {
        pr_err!(
            "GPU memory at {:#x} (+{:#x}) was freed during registration\n",
            self.va,
            self.len
        );
        count(self.kind, Counter::ErrFreedDuringRegistration);
        EFAULT
    }

    /// Maps the pinned pages for `peer` and gives ib_core's `core_sgt` the sg list (ib_core's
    /// `dma_map`). Returns the number of entries.
    ///
    /// # Safety
    ///
    /// `peer` must be a valid PCI device and `core_sgt` ib_core's empty table for this
    /// registration; the device must outlive the mapping.
    pub(crate) unsafe fn dma_map(
        self: &Arc<Self>,
        peer: *mut c_void,
        core_sgt: *mut c_void,
    ) -> Result<c_int> {
        let pin = {
            let mut phase = self.phase.lock();
            match core::mem::replace(&mut *phase, Phase::Mapping) {
                Phase::Pinned(pin) => pin,
                other => {
                    let err = if matches!(other, Phase::Revoked(_)) {
                        count(self.kind, Counter::ErrFreedDuringRegistration);
                        EFAULT
                    } else {
                        count(self.kind, Counter::ErrRefusedContext);
                        pr_err!(
                            "dma_map for va {:#x} in phase {}: refused\n",
                            self.va,
                            other.name()
                        );
                        EINVAL
                    };
                    *phase = other;
                    return Err(err);
                }
            }
        };
        // SAFETY: `peer` is valid (caller); the table was live when the phase said `Pinned`.
        let mapped = unsafe { DmaMapping::map(peer, &pin.table) };
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Revoked(_)) {
            drop(phase);
            if let Ok(dma) = mapped {
                dma.free_revoked();
            }
            pin.table.free_revoked();
            return Err(self.freed_during_registration());
        }
        let made = mapped.and_then(|dma| {
            let addrs = dma.validate(&pin.table).map(|()| dma.dma_addresses());
            // SAFETY: `core_sgt` is ib_core's table for this registration (caller).
            match addrs.and_then(|a| unsafe { SgCopy::create(core_sgt, a, GPU_PAGE_SIZE) }) {
                Ok(sg) => Ok(Mapping {
                    dma,
                    sg,
                    // SAFETY: `peer` is a valid PCI device (caller).
                    nic: unsafe { nvpm_pci_bdf(peer) },
                }),
                Err(e) => {
                    dma.unmap(&pin.table);
                    Err(e)
                }
            }
        });
        match made {
            Ok(mapping) => {
                let n = mapping.sg.nents();
                *phase = Phase::Mapped(pin, mapping);
                Ok(n)
            }
            Err(e) => {
                *phase = Phase::Pinned(pin);
                count(self.kind, Counter::ErrMapping);
                pr_err!(
                    "DMA-mapping GPU memory va={:#x} len={:#x} failed: {:?}\n",
                    self.va,
                    self.len,
                    e
                );
                Err(e)
            }
        }
    }

    /// Unmaps (ib_core's `dma_unmap`; ib_core is done with the sg list).
    pub(crate) fn dma_unmap(&self) {
        let mut phase = self.phase.lock();
        match core::mem::replace(&mut *phase, Phase::Acquired) {
            Phase::Mapped(pin, mapping) => {
                mapping.dma.unmap(&pin.table);
                drop(mapping.sg);
                *phase = Phase::Pinned(pin);
            }
            // After the free callback: only the sg list is left, and ib_core hands it back.
            Phase::Revoked(_) => *phase = Phase::Revoked(None),
            other => *phase = other,
        }
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
        {
            let mut phase = self.phase.lock();
            match &mut *phase {
                Phase::Mapped(..) => pr_warn!(
                    "release of a still-mapped registration at {:#x}: unmapping\n",
                    self.va
                ),
                // ib_core is done with the sg list of a revoked registration.
                Phase::Revoked(sg) => drop(sg.take()),
                _ => {}
            }
        }
        self.dma_unmap();
        self.put_pages();
    }
}
