// SPDX-License-Identifier: GPL-2.0

//! One registration of GPU memory: from `acquire` to `release`.
//!
//! NVIDIA's objects (the page table and its DMA mapping) are owned by exactly one party at a
//! time. They live in the context's `Inner`; an operation that calls NVIDIA takes them out
//! under the lock, calls NVIDIA without the lock, and puts them back. The free callback takes
//! whatever is in `Inner` and frees it after invalidating; an operation that held objects while
//! the callback fired finds `freed` set when it comes back and frees them instead. No lock is
//! held across a call into NVIDIA or ib_core, so the callback can never deadlock against
//! get_pages or dma_map, and no object can be freed twice.
//!
//! Lifetime: ib_core holds one reference (dropped in `release`); a pin with a free callback
//! holds another, passed to NVIDIA as the callback's data and dropped either by the callback or
//! by a successful `put_pages` (after which NVIDIA never calls back). Each context holds a
//! module reference, so the module cannot be unloaded while either party can still call in.

use core::ffi::c_void;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

use crate::compat::eopnotsupp;
use crate::module_ref::ModuleRef;
use crate::nv_p2p::{DmaMapping, PageTable, GPU_PAGE_MASK, GPU_PAGE_SIZE};
use crate::peer_mem;
use crate::sg::DmaSgTable;

/// Which client a registration belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientKind {
    /// "nv_mem": pins with a free callback and invalidates through ib_core.
    Invalidating,
    /// "nv_mem_nc" (or "nv_mem" with persistent_api_support=1): pins that never go away.
    Persistent,
}

/// Where a registration is in ib_core's sequence.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Acquired,
    Pinned,
    Mapped,
    /// An operation has taken NVIDIA's objects out of `Inner`.
    Busy,
    /// The GPU memory was freed; everything NVIDIA gave us is gone.
    Invalidated,
}

struct Inner {
    phase: Phase,
    table: Option<PageTable>,
    mapping: Option<DmaMapping>,
    /// ib_core's sg_table we filled in `dma_map`.
    sgt: Option<DmaSgTable>,
    core_context: u64,
    /// Set by the free callback; tells a `Busy` operation to free what it holds.
    freed: bool,
    /// The task running ib_core's invalidate for us: calls it makes into the client are no-ops.
    invalidating_task: *mut c_void,
}

/// The per-registration context.
#[pin_data]
pub(crate) struct Context {
    /// The raw range ib_core asked about.
    pub(crate) addr: u64,
    pub(crate) size: u64,
    /// The range widened to whole GPU pages.
    pub(crate) va: u64,
    pub(crate) len: u64,
    pub(crate) kind: ClientKind,
    #[pin]
    inner: Mutex<Inner>,
    /// Keeps the module loaded for as long as anyone (ib_core or a free callback) can call in.
    _module: ModuleRef,
}

// SAFETY: `invalidating_task` is only compared with the current task, never dereferenced;
// everything else in `Inner` is `Send`, and `Inner` is only reached through the mutex.
unsafe impl Send for Inner {}

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
    fn nvpm_current_task() -> *mut c_void;
}

/// The running task, as an identity to compare with.
fn current() -> *mut c_void {
    // SAFETY: returns `current`; no requirement.
    unsafe { nvpm_current_task() }
}

impl Context {
    pub(crate) fn new(addr: u64, size: u64, kind: ClientKind) -> Result<Arc<Self>> {
        let (va, len) = gpu_range(addr, size).ok_or(EINVAL)?;
        Arc::pin_init(
            pin_init!(Self {
                addr,
                size,
                va,
                len,
                kind,
                inner <- new_mutex!(Inner {
                    phase: Phase::Acquired,
                    table: None,
                    mapping: None,
                    sgt: None,
                    core_context: 0,
                    freed: false,
                    invalidating_task: core::ptr::null_mut(),
                }),
                _module: ModuleRef::take(),
            }),
            GFP_KERNEL,
        )
    }

    /// True when called back by ib_core from inside our own invalidate call.
    fn reentered(inner: &Inner) -> bool {
        !inner.invalidating_task.is_null() && inner.invalidating_task == current()
    }

    /// Pins the GPU pages (ib_core's `get_pages`).
    pub(crate) fn get_pages(self: &Arc<Self>, core_context: u64) -> Result {
        {
            let mut inner = self.inner.lock();
            if inner.phase != Phase::Acquired {
                pr_err!("get_pages on a registration in phase {:?}\n", inner.phase);
                return Err(EINVAL);
            }
            inner.phase = Phase::Busy;
            inner.core_context = core_context;
        }
        let pinned = match self.kind {
            ClientKind::Invalidating => self.pin_revocable(),
            ClientKind::Persistent => crate::globals().persistent.pin(self.va, self.len),
        };
        let validated = pinned.and_then(|t| match t.validate() {
            Ok(()) => Ok(t),
            Err(e) => {
                self.unpin(t);
                Err(e)
            }
        });
        let table = match validated {
            Ok(t) => t,
            Err(e) => {
                self.inner.lock().phase = Phase::Acquired;
                return Err(e);
            }
        };
        let mut inner = self.inner.lock();
        if inner.freed {
            // The GPU memory was freed while we were pinning it: the table is dead.
            inner.phase = Phase::Invalidated;
            drop(inner);
            table.free_dead();
            pr_err!(
                "GPU memory at {:#x} (+{:#x}) was freed during registration\n",
                self.va,
                self.len
            );
            return Err(EFAULT);
        }
        inner.table = Some(table);
        inner.phase = Phase::Pinned;
        Ok(())
    }

    fn pin_revocable(self: &Arc<Self>) -> Result<PageTable> {
        let data = Arc::into_raw(self.clone()).cast_mut().cast::<c_void>();
        // SAFETY: `data` carries a reference on `self` that keeps the context alive until the
        // callback has run or the table was put successfully (see the module docs).
        let res = unsafe { PageTable::get_revocable(self.va, self.len, Some(free_callback), data) };
        if let Err(e) = res {
            // SAFETY: NVIDIA did not keep the callback: take back the reference.
            drop(unsafe { Arc::from_raw(data.cast::<Self>()) });
            let hint = if e == ENOMEM {
                " (GPU BAR1 space exhausted? see nvidia-smi -q -d MEMORY)"
            } else {
                ""
            };
            pr_err!(
                "nvidia_p2p_get_pages(va={:#x}, len={:#x}) failed: {:?}{}\n",
                self.va,
                self.len,
                e,
                hint
            );
        }
        res
    }

    /// Puts `table`; on success drops the callback's reference, as NVIDIA will never call back.
    fn unpin(self: &Arc<Self>, table: PageTable) {
        let revocable = self.kind == ClientKind::Invalidating;
        match table.put() {
            Ok(()) if revocable => {
                let raw: *const Self = &**self;
                // SAFETY: `raw` is what `Arc::into_raw` returned for the reference given to
                // NVIDIA in `pin_revocable`; NVIDIA has dropped the callback, so nothing else
                // will consume that reference.
                drop(unsafe { Arc::from_raw(raw) });
            }
            Ok(()) => {}
            // A free callback raced the put: the callback owns its reference.
            Err(e) if revocable => crate::dbg_log!("put_pages raced a free callback: {:?}\n", e),
            Err(e) => pr_err!(
                "releasing persistent GPU pages at {:#x} (+{:#x}) failed: {:?}\n",
                self.va,
                self.len,
                e
            ),
        }
    }

    /// Maps the pinned pages for `peer` and fills ib_core's `sgt` (ib_core's `dma_map`).
    ///
    /// # Safety
    ///
    /// `peer` must be a valid PCI device and `sgt` ib_core's table for this registration; both
    /// must stay valid until `dma_unmap`, `release`, or the end of an invalidation.
    pub(crate) unsafe fn dma_map(
        self: &Arc<Self>,
        peer: *mut c_void,
        sgt: *mut c_void,
    ) -> Result<u32> {
        let table = {
            let mut inner = self.inner.lock();
            if inner.phase != Phase::Pinned {
                return Err(if inner.phase == Phase::Invalidated {
                    EFAULT
                } else {
                    EINVAL
                });
            }
            inner.phase = Phase::Busy;
            inner.table.take().ok_or(EINVAL)?
        };
        // SAFETY: `peer` is valid and outlives the mapping (caller).
        let mapped = unsafe { DmaMapping::map(peer, &table) }.and_then(|mapping| {
            // SAFETY: `sgt` is ib_core's table for this registration (caller).
            match unsafe { DmaSgTable::fill(sgt, mapping.dma_addresses(), GPU_PAGE_SIZE) } {
                Ok(filled) => Ok((mapping, filled)),
                Err(e) => {
                    mapping.unmap(&table);
                    Err(e)
                }
            }
        });
        let mut inner = self.inner.lock();
        if inner.freed {
            inner.phase = Phase::Invalidated;
            drop(inner);
            if let Ok((mapping, filled)) = mapped {
                drop(filled);
                mapping.free_dead();
            }
            table.free_dead();
            return Err(EFAULT);
        }
        inner.table = Some(table);
        match mapped {
            Ok((mapping, filled)) => {
                let nents = filled.nents();
                inner.mapping = Some(mapping);
                inner.sgt = Some(filled);
                inner.phase = Phase::Mapped;
                Ok(nents)
            }
            Err(e) => {
                inner.phase = Phase::Pinned;
                pr_err!(
                    "nvidia_p2p_dma_map_pages(va={:#x}, len={:#x}) failed: {:?}\n",
                    self.va,
                    self.len,
                    e
                );
                Err(e)
            }
        }
    }

    /// Unmaps (ib_core's `dma_unmap`). A no-op inside our own invalidation, where only the
    /// sg_table is given back.
    pub(crate) fn dma_unmap(self: &Arc<Self>) {
        let (table, mapping, sgt) = {
            let mut inner = self.inner.lock();
            if Self::reentered(&inner) {
                // ib_core is done with its sg_table; NVIDIA's objects are the callback's.
                let sgt = inner.sgt.take();
                drop(inner);
                drop(sgt);
                return;
            }
            if inner.phase != Phase::Mapped {
                return;
            }
            inner.phase = Phase::Busy;
            (inner.table.take(), inner.mapping.take(), inner.sgt.take())
        };
        drop(sgt);
        let Some(table) = table else { return };
        if let Some(m) = mapping {
            m.unmap(&table);
        }
        self.check_in_table(table, Phase::Pinned);
    }

    /// Returns `table` to `Inner` after an operation, unless the callback fired meanwhile.
    fn check_in_table(&self, table: PageTable, phase: Phase) {
        let mut inner = self.inner.lock();
        if inner.freed {
            inner.phase = Phase::Invalidated;
            drop(inner);
            table.free_dead();
        } else {
            inner.table = Some(table);
            inner.phase = phase;
        }
    }

    /// Unpins (ib_core's `put_pages`). A no-op inside our own invalidation.
    pub(crate) fn put_pages(self: &Arc<Self>) {
        let table = {
            let mut inner = self.inner.lock();
            if Self::reentered(&inner) || inner.phase != Phase::Pinned {
                return;
            }
            inner.phase = Phase::Acquired;
            inner.table.take()
        };
        if let Some(t) = table {
            self.unpin(t);
        }
    }

    /// Undoes whatever ib_core left mapped or pinned (ib_core's `release`).
    pub(crate) fn release(self: &Arc<Self>) {
        let phase = self.inner.lock().phase;
        if phase == Phase::Mapped {
            pr_warn!(
                "release of a still-mapped registration at {:#x}: unmapping\n",
                self.va
            );
            self.dma_unmap();
        }
        self.put_pages();
    }

    /// NVIDIA's free callback: the GPU memory under this registration is being freed.
    ///
    /// The sg_table stays in `Inner` during the invalidation: a legacy core hands it back by
    /// calling `dma_unmap` from inside, after which it may free its own structures.
    fn on_free(self: &Arc<Self>) {
        let (live, core_context, table, mapping) = {
            let mut inner = self.inner.lock();
            inner.freed = true;
            let live = matches!(inner.phase, Phase::Pinned | Phase::Mapped);
            if live {
                inner.phase = Phase::Invalidated;
                inner.invalidating_task = current();
            }
            (
                live,
                inner.core_context,
                inner.table.take(),
                inner.mapping.take(),
            )
        };
        crate::dbg_log!(
            "free callback for va {:#x} (+{:#x}): {}\n",
            self.va,
            self.len,
            if live {
                "invalidating"
            } else {
                "registration in transition"
            }
        );
        if live && !peer_mem::invalidate(core_context) {
            pr_err!(
                "cannot invalidate va {:#x}: no invalidate function from ib_core\n",
                self.va
            );
        }
        let sgt = {
            let mut inner = self.inner.lock();
            inner.invalidating_task = core::ptr::null_mut();
            if live {
                inner.sgt.take()
            } else {
                None
            }
        };
        // ib_core has stopped the NIC: free our sg list and NVIDIA's objects.
        drop(sgt);
        if let Some(m) = mapping {
            m.free_dead();
        }
        if let Some(t) = table {
            t.free_dead();
        }
    }
}

/// NVIDIA's free callback for pins made by [`Context::get_pages`].
///
/// # Safety
///
/// `data` must be the reference created in `pin_revocable`, passed exactly once.
unsafe extern "C" fn free_callback(data: *mut c_void) {
    // SAFETY: per the function's contract this consumes the callback's reference.
    let ctx = unsafe { Arc::from_raw(data.cast::<Context>()) };
    ctx.on_free();
}

/// Whether `[addr, addr + size)` is GPU memory nvidia.ko knows, checked by pinning and
/// unpinning it. NVIDIA answers -EINVAL for memory that is not its own; any other error (BAR1
/// space exhausted, say) still means GPU memory, which we claim so that `get_pages` reports the
/// real errno instead of ib_core's generic EFAULT.
pub(crate) fn probe(kind: ClientKind, addr: u64, size: u64) -> bool {
    let Some((va, len)) = gpu_range(addr, size) else {
        return false;
    };
    let table = match kind {
        // SAFETY: the probe callback ignores its data and may run any time until put.
        ClientKind::Invalidating => unsafe {
            PageTable::get_revocable(va, len, Some(probe_callback), core::ptr::null_mut())
        },
        ClientKind::Persistent => crate::globals().persistent.pin(va, len),
    };
    match table {
        Ok(t) => {
            let _ = t.put();
            true
        }
        Err(e) if e == EINVAL || e == eopnotsupp() && kind == ClientKind::Persistent => false,
        Err(e) => {
            crate::dbg_log!(
                "claiming {:#x} (+{:#x}) although pinning failed: {:?}\n",
                va,
                len,
                e
            );
            true
        }
    }
}

/// The free callback of a probe pin: nothing to invalidate.
///
/// # Safety
///
/// None: the data pointer is ignored.
unsafe extern "C" fn probe_callback(_data: *mut c_void) {}
