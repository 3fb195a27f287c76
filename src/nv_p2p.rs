// SPDX-License-Identifier: GPL-2.0

//! The NVIDIA P2P API exported by `nvidia.ko`, declared from its documented ABI, with owning
//! wrappers for the objects it hands out. Everything that differs between NVIDIA driver
//! generations is decided here:
//!
//! - page tables are version 1.x up to driver 570 and 2.0 (with a trailing `flags` word) since
//!   580.65.06; both share the prefix this module reads;
//! - since R515 the driver frees a revoked table and its mappings itself once the free callback
//!   returns, and `nvidia_p2p_free_*` are no-ops; older drivers wanted the client to call them
//!   from inside its callback. Calling them there is right for every generation;
//! - the persistent-pages entry points exist since R535, the capability symbol since R515.
//!
//! The wrappers never call NVIDIA on drop: which call releases an object depends on whether its
//! free callback has run, which only the owner knows (see `registration/context.rs`). Dropping
//! one without releasing it is a bug that is logged.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::prelude::*;

/// GPU pages are 64 KiB; registrations are widened to this granularity.
pub(crate) const GPU_PAGE_SIZE: u64 = 64 * 1024;
pub(crate) const GPU_PAGE_MASK: u64 = !(GPU_PAGE_SIZE - 1);

/// Page-table versions we understand: (major, lowest minor). 1.2 up to driver 570; 2.0 since
/// 580.65.06, which appends `u32 flags` (bit 0: CPU-cacheable) that we do not need.
const PAGE_TABLE_VERSIONS: [(u32, u32); 2] = [(1, 2), (2, 0)];
/// DMA mapping version 2.3, unchanged across the generations we support.
const DMA_MAPPING_VERSIONS: [(u32, u32); 1] = [(2, 3)];
/// `page_size` value of a table made of 64 KiB pages.
const PAGE_SIZE_64KB: u32 = 1;

fn version_known(have: u32, known: &[(u32, u32)]) -> bool {
    known
        .iter()
        .any(|&(major, minor)| have >> 16 == major && have & 0xffff >= minor)
}

#[repr(C)]
struct RawPage {
    physical_address: u64,
    // The `registers` union of the ABI: only its size matters here.
    registers: [u32; 6],
}

/// The prefix every page-table generation shares (v2 appends `u32 flags`).
#[repr(C)]
pub(crate) struct RawPageTable {
    version: u32,
    page_size: u32,
    pages: *mut *mut RawPage,
    entries: u32,
    gpu_uuid: *mut u8,
}

#[repr(C)]
pub(crate) struct RawDmaMapping {
    version: u32,
    page_size_type: u32,
    entries: u32,
    dma_addresses: *mut u64,
    private: *mut c_void,
    pci_dev: *mut c_void,
}

/// Signature of NVIDIA's free callback.
pub(crate) type FreeCallback = unsafe extern "C" fn(data: *mut c_void);

extern "C" {
    fn nvidia_p2p_get_pages(
        p2p_token: u64,
        va_space: u32,
        virtual_address: u64,
        length: u64,
        page_table: *mut *mut RawPageTable,
        free_callback: Option<FreeCallback>,
        data: *mut c_void,
    ) -> c_int;
    fn nvidia_p2p_put_pages(
        p2p_token: u64,
        va_space: u32,
        virtual_address: u64,
        page_table: *mut RawPageTable,
    ) -> c_int;
    fn nvidia_p2p_free_page_table(page_table: *mut RawPageTable) -> c_int;
    fn nvidia_p2p_dma_map_pages(
        peer: *mut c_void,
        page_table: *mut RawPageTable,
        dma_mapping: *mut *mut RawDmaMapping,
    ) -> c_int;
    fn nvidia_p2p_dma_unmap_pages(
        peer: *mut c_void,
        page_table: *mut RawPageTable,
        dma_mapping: *mut RawDmaMapping,
    ) -> c_int;
    fn nvidia_p2p_free_dma_mapping(dma_mapping: *mut RawDmaMapping) -> c_int;
}

/// How a page table was pinned, which decides how it is released.
#[derive(Clone, Copy)]
pub(crate) enum PinKind {
    /// `nvidia_p2p_get_pages` with a free callback, released with `nvidia_p2p_put_pages`.
    Revocable,
    /// `nvidia_p2p_get_pages_persistent` (R535 and later), released with
    /// `nvidia_p2p_put_pages_persistent`.
    PersistentApi,
    /// `nvidia_p2p_get_pages` with a NULL callback (R515-R530), released with
    /// `nvidia_p2p_put_pages`.
    PersistentNullCallback,
}

/// NVIDIA's page table for a pinned GPU range.
///
/// # Invariants
///
/// - `raw` is a page table NVIDIA returned for `va` by the pin `kind` names, and this wrapper is
///   its only owner: nothing else releases it.
/// - The table is given up exactly once: by `put` followed by `released`, or by `free_revoked`
///   (both consume the wrapper); dropping it otherwise is a bug and is logged as one.
/// - NVIDIA may free the table behind it when the free callback runs (a revocable pin only): it
///   is read only while the owner knows the callback cannot have returned.
pub(crate) struct PageTable {
    raw: NonNull<RawPageTable>,
    va: u64,
    kind: PinKind,
}

// SAFETY: the table is an NVIDIA-owned object that may be used from any thread; ownership of
// the pointer is unique to this wrapper.
unsafe impl Send for PageTable {}

/// `nvidia_p2p_get_pages` with token 0 (the calling process), with or without a free callback.
/// One call site for both, so the fault-injection sweep reaches it in every generation
/// (`tests/sweep/`).
///
/// # Safety
///
/// With a callback: it must stay callable with `data` until the pin is released or it has run.
/// Without: only R515-R530 accept it, as a persistent pin.
#[inline(never)]
unsafe fn get_pages(
    va: u64,
    len: u64,
    callback: Option<FreeCallback>,
    data: *mut c_void,
) -> Result<NonNull<RawPageTable>> {
    let mut raw: *mut RawPageTable = core::ptr::null_mut();
    // SAFETY: `raw` is a valid out-pointer; the caller guarantees the callback contract.
    to_result(unsafe { nvidia_p2p_get_pages(0, 0, va, len, &mut raw, callback, data) })?;
    NonNull::new(raw).ok_or(EIO)
}

impl PageTable {
    /// Pins `[va, va + len)` (64 KiB aligned) with a free callback receiving `data`.
    ///
    /// # Safety
    ///
    /// `callback` must stay callable with `data` until the pin is released or the callback has
    /// run: NVIDIA may call it at any time in between, from any thread.
    pub(crate) unsafe fn get_revocable(
        va: u64,
        len: u64,
        callback: FreeCallback,
        data: *mut c_void,
    ) -> Result<Self> {
        // SAFETY: the caller guarantees the callback contract.
        let raw = unsafe { get_pages(va, len, Some(callback), data) }?;
        // INVARIANT: `raw` is the table NVIDIA just returned for `va`, pinned with a callback.
        Ok(Self {
            raw,
            va,
            kind: PinKind::Revocable,
        })
    }

    /// Pins `[va, va + len)` for good: NVIDIA never revokes it.
    pub(crate) fn get_persistent(support: &PersistentSupport, va: u64, len: u64) -> Result<Self> {
        let (raw, kind) = match support {
            PersistentSupport::Api => {
                let mut raw: *mut RawPageTable = core::ptr::null_mut();
                // SAFETY: `Api` means nvidia.ko exports the entry point (kept loaded by the
                // module dependency); `raw` is a valid out-pointer.
                to_result(unsafe {
                    crate::glue::nvidia_get_pages_persistent(
                        va,
                        len,
                        core::ptr::from_mut(&mut raw).cast(),
                    )
                })?;
                (NonNull::new(raw).ok_or(EIO)?, PinKind::PersistentApi)
            }
            PersistentSupport::NullCallback => (
                // SAFETY: R515-R530 take a NULL callback as a persistent pin: nothing to keep
                // alive.
                unsafe { get_pages(va, len, None, core::ptr::null_mut()) }?,
                PinKind::PersistentNullCallback,
            ),
            PersistentSupport::None => return Err(crate::compat::eopnotsupp()),
        };
        // INVARIANT: `raw` is the table NVIDIA just returned for `va` by the pin `kind` names.
        Ok(Self { raw, va, kind })
    }

    fn raw(&self) -> &RawPageTable {
        // SAFETY: the owner of `self` guarantees that NVIDIA has not freed the table: it reads
        // tables only while their free callback cannot have returned (see
        // `registration/context.rs`).
        unsafe { self.raw.as_ref() }
    }

    pub(crate) fn is_revocable(&self) -> bool {
        matches!(self.kind, PinKind::Revocable)
    }

    /// Checks the struct version, the page size and that the table covers `len` bytes.
    pub(crate) fn validate(&self, len: u64) -> Result {
        let t = self.raw();
        if !version_known(t.version, &PAGE_TABLE_VERSIONS) {
            pr_err!(
                "nvidia.ko returned page table version {:#010x}; this nv_peer_mem understands 1.x and 2.x (driver up to 595): update nv_peer_mem\n",
                t.version
            );
            return Err(EINVAL);
        }
        if t.page_size != PAGE_SIZE_64KB {
            pr_err!(
                "GPU page size type {} at va {:#x} is not supported (only 64 KiB pages)\n",
                t.page_size,
                self.va
            );
            return Err(EINVAL);
        }
        if u64::from(t.entries) * GPU_PAGE_SIZE != len || t.pages.is_null() {
            pr_err!(
                "page table for va {:#x} has {} entries, the range needs {}\n",
                self.va,
                t.entries,
                len / GPU_PAGE_SIZE
            );
            return Err(EINVAL);
        }
        Ok(())
    }

    pub(crate) fn entries(&self) -> usize {
        self.raw().entries as usize
    }

    /// Unpins the pages (`nvidia_p2p_put_pages[_persistent]`). Takes NVIDIA's API lock: the
    /// caller must hold no lock the free callback takes. NVIDIA answers 0 also to a put that
    /// raced the free callback, so the result says nothing about the callback: afterwards the
    /// owner disposes of the wrapper with [`Self::released`], or with [`Self::free_revoked`]
    /// if it knows the callback ran meanwhile.
    ///
    /// NVIDIA's -ENOMEM comes from its stack allocation, before it touched the pin
    /// (`nvidia_p2p_put_pages*` in nv-p2p.c): the pin is whole and one retry may release it;
    /// a persistent pin would otherwise stay pinned until nvidia.ko unloads.
    pub(crate) fn put(&self) -> Result {
        match self.put_call() {
            Err(e) if e == ENOMEM => {
                pr_warn!(
                    "unpinning GPU memory at {:#x}: nvidia.ko was out of memory, retrying once\n",
                    self.va
                );
                self.put_call()
            }
            res => res,
        }
    }

    fn put_call(&self) -> Result {
        let raw = self.raw.as_ptr();
        // SAFETY: `raw` is the table pinned at `self.va`; its owner gives it up after this.
        to_result(unsafe {
            match self.kind {
                PinKind::Revocable | PinKind::PersistentNullCallback => {
                    nvidia_p2p_put_pages(0, 0, self.va, raw)
                }
                PinKind::PersistentApi => {
                    crate::glue::nvidia_put_pages_persistent(self.va, raw.cast())
                }
            }
        })
    }

    /// Forgets a table that [`Self::put`] released.
    pub(crate) fn released(self) {
        let _ = core::mem::ManuallyDrop::new(self);
    }

    /// Gives up a revoked table: called from its free callback, or after one ran (for drivers
    /// before R515 the client frees the table; later ones free it themselves and this call is a
    /// no-op that does not dereference it).
    pub(crate) fn free_revoked(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the table was revoked; freeing it is the client's part on old drivers and
        // harmless on new ones.
        let ret = unsafe { nvidia_p2p_free_page_table(this.raw.as_ptr()) };
        if ret != 0 {
            pr_err!(
                "nvidia_p2p_free_page_table for va {:#x} failed: {}\n",
                this.va,
                ret
            );
        }
    }

    fn as_ptr(&self) -> *mut RawPageTable {
        self.raw.as_ptr()
    }
}

impl Drop for PageTable {
    fn drop(&mut self) {
        pr_err!(
            "bug: page table for va {:#x} dropped without being released (pin leaked)\n",
            self.va
        );
    }
}

/// NVIDIA's DMA mapping of a page table for one peer PCI device.
///
/// # Invariants
///
/// - `raw` is the mapping NVIDIA returned for the page table it was made from and for `peer`,
///   and this wrapper is its only owner.
/// - It is released exactly once, by `unmap` (while its table is live) or `free_revoked` (after
///   the free callback), each consuming the wrapper; it never outlives its page table's pin.
pub(crate) struct DmaMapping {
    raw: NonNull<RawDmaMapping>,
    peer: *mut c_void,
}

// SAFETY: an NVIDIA-owned object usable from any thread; the wrapper owns it uniquely.
unsafe impl Send for DmaMapping {}

impl DmaMapping {
    /// Maps `table` for `peer` (`nvidia_p2p_dma_map_pages`). Takes NVIDIA's API lock: the
    /// caller must hold no lock the free callback takes, and must not read the result before
    /// checking that the free callback has not run meanwhile.
    ///
    /// # Safety
    ///
    /// `peer` must be a valid PCI device that outlives the mapping; `table` must not have been
    /// revoked when the call starts.
    pub(crate) unsafe fn map(peer: *mut c_void, table: &PageTable) -> Result<Self> {
        let mut raw: *mut RawDmaMapping = core::ptr::null_mut();
        // SAFETY: `peer` is valid (caller), `table` is live, `raw` is a valid out-pointer.
        to_result(unsafe { nvidia_p2p_dma_map_pages(peer, table.as_ptr(), &mut raw) })?;
        let raw = NonNull::new(raw).ok_or(EIO)?;
        // INVARIANT: `raw` is the mapping NVIDIA just made of `table` for `peer`.
        Ok(Self { raw, peer })
    }

    fn raw(&self) -> &RawDmaMapping {
        // SAFETY: read only while the table's free callback cannot have returned (owner's duty).
        unsafe { self.raw.as_ref() }
    }

    /// Checks the struct version and that there is one address per page of `table`.
    pub(crate) fn validate(&self, table: &PageTable) -> Result {
        let m = self.raw();
        if !version_known(m.version, &DMA_MAPPING_VERSIONS) {
            pr_err!(
                "nvidia.ko returned DMA mapping version {:#010x}; this nv_peer_mem understands 2.3 and later 2.x\n",
                m.version
            );
            return Err(EINVAL);
        }
        if m.entries as usize != table.entries()
            || m.page_size_type != PAGE_SIZE_64KB
            || m.dma_addresses.is_null()
        {
            pr_err!(
                "DMA mapping has {} entries of size type {}, page table {} entries\n",
                m.entries,
                m.page_size_type,
                table.entries()
            );
            return Err(EINVAL);
        }
        Ok(())
    }

    /// The DMA address of every 64 KiB page, in order (after [`Self::validate`]).
    pub(crate) fn dma_addresses(&self) -> &[u64] {
        let m = self.raw();
        // SAFETY: a validated mapping holds `entries` addresses while it is live.
        unsafe { core::slice::from_raw_parts(m.dma_addresses, m.entries as usize) }
    }

    /// Unmaps (`nvidia_p2p_dma_unmap_pages`: no API lock, allowed inside the free callback).
    pub(crate) fn unmap(self, table: &PageTable) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the mapping was made for `this.peer` from `table`, neither has been freed.
        let ret =
            unsafe { nvidia_p2p_dma_unmap_pages(this.peer, table.as_ptr(), this.raw.as_ptr()) };
        if ret != 0 {
            pr_err!("nvidia_p2p_dma_unmap_pages failed: {}\n", ret);
        }
    }

    /// Gives up a mapping of a revoked table, from inside its free callback (a no-op on R515
    /// and later, which unmap and free it when the callback returns).
    pub(crate) fn free_revoked(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the table was revoked; the mapping is the client's to free on old drivers.
        let ret = unsafe { nvidia_p2p_free_dma_mapping(this.raw.as_ptr()) };
        if ret != 0 {
            pr_err!("nvidia_p2p_free_dma_mapping failed: {}\n", ret);
        }
    }
}

impl Drop for DmaMapping {
    fn drop(&mut self) {
        pr_err!("bug: DMA mapping dropped without being released\n");
    }
}

/// What nvidia.ko offers for pins without a free callback.
pub(crate) enum PersistentSupport {
    /// `*_persistent` entry points (R535 and later).
    Api,
    /// Only `nvidia_p2p_cap_persistent_pages` (R515-R530): `get_pages` accepts a NULL callback.
    NullCallback,
    /// Neither (before R515).
    None,
}

impl PersistentSupport {
    pub(crate) fn probe() -> Self {
        let api = crate::glue::nvidia_has_persistent_api();
        let cap = crate::glue::nvidia_has_cap_persistent_pages();
        if api {
            Self::Api
        } else if cap {
            Self::NullCallback
        } else {
            Self::None
        }
    }

    pub(crate) fn available(&self) -> bool {
        !matches!(self, Self::None)
    }
}

// The ABI's layouts on 64-bit kernels (v2 page tables are 40 bytes; we read the 32-byte prefix).
const _: () = assert!(core::mem::size_of::<RawPage>() == 32);
const _: () = assert!(core::mem::size_of::<RawPageTable>() == 32);
const _: () = assert!(core::mem::size_of::<RawDmaMapping>() == 40);

// KUnit (`nvpm_kunit`: see Kbuild): which page-table and DMA-mapping versions are accepted.
#[cfg(nvpm_kunit)]
#[kernel::macros::kunit_tests(nv_peer_mem_versions)]
mod tests {
    use super::{version_known, DMA_MAPPING_VERSIONS, PAGE_TABLE_VERSIONS};

    /// A version as nvidia.ko encodes it: major in the high 16 bits, minor in the low.
    const fn v(major: u32, minor: u32) -> u32 {
        major << 16 | minor
    }

    #[test]
    fn page_table_versions() {
        // 1.2 up to driver 570, 2.0 since 580.65.06; a later minor keeps the layout.
        assert!(version_known(v(1, 2), &PAGE_TABLE_VERSIONS));
        assert!(version_known(v(1, 3), &PAGE_TABLE_VERSIONS));
        assert!(version_known(v(2, 0), &PAGE_TABLE_VERSIONS));
        assert!(version_known(v(2, 7), &PAGE_TABLE_VERSIONS));
        assert!(!version_known(v(1, 1), &PAGE_TABLE_VERSIONS));
        assert!(!version_known(v(1, 0), &PAGE_TABLE_VERSIONS));
        assert!(!version_known(v(0, 2), &PAGE_TABLE_VERSIONS));
        assert!(!version_known(v(3, 0), &PAGE_TABLE_VERSIONS));
    }

    #[test]
    fn dma_mapping_versions() {
        assert!(version_known(v(2, 3), &DMA_MAPPING_VERSIONS));
        assert!(version_known(v(2, 4), &DMA_MAPPING_VERSIONS));
        assert!(!version_known(v(2, 2), &DMA_MAPPING_VERSIONS));
        assert!(!version_known(v(1, 3), &DMA_MAPPING_VERSIONS));
        assert!(!version_known(v(3, 3), &DMA_MAPPING_VERSIONS));
    }

    #[test]
    fn minor_never_stands_for_major() {
        // The largest 1.x minor is not 2.0, nor is a bare minor a major.
        assert!(!version_known(v(1, 0xffff), &[(2, 0)]));
        assert!(!version_known(2, &[(2, 0)]));
        assert!(!version_known(v(2, 0), &[]));
    }
}
