// SPDX-License-Identifier: GPL-2.0

//! One registration of GPU memory: what it is made of (its context, the phases it goes through
//! and what each phase owns), here, and the steps that move it between phases, in
//! `registration/`:
//!
//! - `context.rs`: what ib_core asks of it, from `acquire` to `release`, and the locking rules
//!   every step keeps;
//! - `pinning.rs`: pinning and unpinning, the calls into NVIDIA made with no lock held;
//! - `mapping.rs`: `dma_map` and `dma_unmap`, the DMA mapping and the sg list made from it;
//! - `revoke.rs`: NVIDIA's free callback.
//!
//! The steps are `impl Context` blocks; the rest of the crate sees only `Context` and the
//! methods they give it.

use core::ffi::c_int;
use core::sync::atomic::AtomicU8;
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

use crate::client_kind::ClientKind;
use crate::module_ref::ModuleRef;
use crate::nv_p2p::{DmaMapping, PageTable, GPU_PAGE_MASK, GPU_PAGE_SIZE};
use crate::sg::SgCopy;
use crate::stats::Held;

mod context;
mod mapping;
mod pinning;
mod revoke;

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
///
/// # Invariants
///
/// - `[va, va + len)` is `[addr, addr + size)` widened to whole 64 KiB GPU pages, and is not
///   empty.
/// - `phase` owns everything of NVIDIA's the registration holds (see [`Phase`]): nothing else
///   does, so a pin, a mapping or an sg list is released exactly once, by whoever moves the
///   phase past it.
/// - `id` is the context's index in the registry, which is how ib_core and NVIDIA's free
///   callback find it; neither ever holds a pointer to it.
/// - While the context exists the module stays loaded (`_module`).
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
    /// For whom the registry keeps it (`registry::HeldFor` bits); changed under the registry's
    /// lock, but for the callback's bit while ib_core holds the context (`Registry::arm`,
    /// `Registry::disarm_held`).
    pub(crate) held_for: AtomicU8,
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

/// The calling process (`current->tgid`): NVIDIA finds GPU memory, and pins, by it.
#[inline]
pub(crate) fn current_tgid() -> c_int {
    crate::glue::current_tgid()
}

impl Context {
    pub(crate) fn new(id: usize, addr: u64, size: u64, kind: ClientKind) -> Result<Arc<Self>> {
        let (va, len) = gpu_range(addr, size).ok_or(EINVAL)?;
        // INVARIANT: `gpu_range` widened the range to whole GPU pages, or refused it; the phase
        // starts with nothing held; the module reference is taken here.
        Arc::pin_init(
            pin_init!(Self {
                id,
                addr,
                size,
                va,
                len,
                kind,
                created_ns: crate::glue::now_ns(),
                phase <- new_mutex!(Phase::Acquired),
                held_for: AtomicU8::new(0),
                _module: ModuleRef::take(),
            }),
            GFP_KERNEL,
        )
    }
}

// KUnit (`nvpm_kunit`: see Kbuild): how a range ib_core asks about becomes whole GPU pages.
#[cfg(nvpm_kunit)]
#[kernel::macros::kunit_tests(nv_peer_mem_gpu_range)]
mod tests {
    use super::gpu_range;

    const P: u64 = 0x1_0000;
    const VA: u64 = 0x7f00_0000_0000;

    #[test]
    fn empty_range_is_refused() {
        assert!(gpu_range(VA, 0).is_none());
        assert!(gpu_range(VA + 0x1234, 0).is_none());
    }

    #[test]
    fn whole_pages_stay_as_they_are() {
        assert_eq!(gpu_range(VA, P), Some((VA, P)));
        assert_eq!(gpu_range(VA, 0x20_0000), Some((VA, 0x20_0000)));
    }

    #[test]
    fn part_of_one_page_becomes_that_page() {
        assert_eq!(gpu_range(VA + 0x1000, 0x100), Some((VA, P)));
        assert_eq!(gpu_range(VA + 0x8000, 0x8000), Some((VA, P)));
        assert_eq!(gpu_range(VA + P - 1, 1), Some((VA, P)));
    }

    #[test]
    fn range_across_a_boundary_takes_both_pages() {
        assert_eq!(gpu_range(VA + P - 1, 2), Some((VA, 2 * P)));
        assert_eq!(gpu_range(VA + 0x1000, 0x20_0000), Some((VA, 0x20_0000 + P)));
    }

    #[test]
    fn range_past_the_top_of_the_address_space_is_refused() {
        // The last page but one, widened, still ends below 2^64.
        let top = 0u64.wrapping_sub(2 * P);
        assert_eq!(gpu_range(top, P), Some((top, P)));
        // Widening to a page end past 2^64, or an end past it already: no range.
        assert!(gpu_range(top + 1, P).is_none());
        assert!(gpu_range(u64::MAX - 9, 20).is_none());
        assert!(gpu_range(P, u64::MAX).is_none());
    }
}
