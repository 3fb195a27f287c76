// SPDX-License-Identifier: GPL-2.0

//! The NVIDIA P2P API exported by `nvidia.ko`, declared from its documented ABI, with owning
//! wrappers for the objects it hands out.
//!
//! Struct versions are checked on every table and mapping NVIDIA returns: the major number must
//! match ours and the driver's minor must be at least ours.

use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use kernel::error::to_result;
use kernel::prelude::*;

/// GPU pages are 64 KiB; registrations are widened to this granularity.
pub(crate) const GPU_PAGE_SIZE: u64 = 64 * 1024;
pub(crate) const GPU_PAGE_MASK: u64 = !(GPU_PAGE_SIZE - 1);

const PAGE_TABLE_VERSION: u32 = 0x0001_0002;
const DMA_MAPPING_VERSION: u32 = 0x0002_0003;
/// `page_size` value of a table made of 64 KiB pages.
const PAGE_SIZE_64KB: u32 = 1;

#[repr(C)]
struct RawPage {
    physical_address: u64,
    // The `registers` union of the ABI: only its size matters here.
    registers: [u32; 6],
}

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

/// Signatures of the optional persistent-pages entry points, looked up at load time.
type GetPagesPersistentFn = unsafe extern "C" fn(u64, u64, *mut *mut RawPageTable, u32) -> c_int;
type PutPagesPersistentFn = unsafe extern "C" fn(u64, *mut RawPageTable, u32) -> c_int;

fn version_compatible(have: u32, want: u32) -> bool {
    (have >> 16) == (want >> 16) && (have & 0xffff) >= (want & 0xffff)
}

/// How a page table was pinned, which decides how it is released.
#[derive(Clone, Copy)]
pub(crate) enum PinKind {
    /// `nvidia_p2p_get_pages`, released with `nvidia_p2p_put_pages`.
    Revocable,
    /// `nvidia_p2p_get_pages_persistent`, released with `nvidia_p2p_put_pages_persistent`
    /// (this pointer; the symbol reference is held by [`PersistentApi`]).
    Persistent(PutPagesPersistentFn),
}

/// NVIDIA's page table for a pinned GPU range. Dropping it without [`PageTable::put`] or
/// [`PageTable::free_dead`] would leak the pin, so both consume it and `Drop` is a last resort
/// that puts the pages.
pub(crate) struct PageTable {
    raw: NonNull<RawPageTable>,
    va: u64,
    kind: PinKind,
}

// SAFETY: the table is an NVIDIA-owned object that may be used from any thread; ownership of
// the pointer is unique to this wrapper.
unsafe impl Send for PageTable {}

impl PageTable {
    /// Pins `[va, va + len)` (64 KiB aligned) with a free callback receiving `data`.
    ///
    /// # Safety
    ///
    /// `callback` must remain callable with `data` until the table is put or the callback has
    /// run, as NVIDIA may invoke it at any time in between.
    pub(crate) unsafe fn get_revocable(
        va: u64,
        len: u64,
        callback: Option<FreeCallback>,
        data: *mut c_void,
    ) -> Result<Self> {
        let mut raw: *mut RawPageTable = core::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the caller guarantees the callback contract.
        to_result(unsafe { nvidia_p2p_get_pages(0, 0, va, len, &mut raw, callback, data) })?;
        let raw = NonNull::new(raw).ok_or(EIO)?;
        Ok(Self {
            raw,
            va,
            kind: PinKind::Revocable,
        })
    }

    /// Pins `[va, va + len)` with no free callback through the persistent API.
    pub(crate) fn get_persistent(api: &PersistentApi, va: u64, len: u64) -> Result<Self> {
        let mut raw: *mut RawPageTable = core::ptr::null_mut();
        // SAFETY: `api.get` is NVIDIA's exported function (kept alive by the symbol reference
        // `api` holds); `raw` is a valid out-pointer.
        to_result(unsafe { (api.get)(va, len, &mut raw, 0) })?;
        let raw = NonNull::new(raw).ok_or(EIO)?;
        Ok(Self {
            raw,
            va,
            kind: PinKind::Persistent(api.put),
        })
    }

    fn raw(&self) -> &RawPageTable {
        // SAFETY: NVIDIA keeps the table valid until it is put or freed, both of which consume
        // `self`.
        unsafe { self.raw.as_ref() }
    }

    pub(crate) fn as_ptr(&self) -> *mut RawPageTable {
        self.raw.as_ptr()
    }

    /// Checks the struct version and page size NVIDIA returned.
    pub(crate) fn validate(&self) -> Result {
        let t = self.raw();
        if !version_compatible(t.version, PAGE_TABLE_VERSION) {
            pr_err!(
                "page table version {:#010x} from nvidia.ko is incompatible with {:#010x}\n",
                t.version,
                PAGE_TABLE_VERSION
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
        Ok(())
    }

    pub(crate) fn entries(&self) -> usize {
        self.raw().entries as usize
    }

    /// Unpins the pages. On failure (a free callback raced this call) NVIDIA has revoked the
    /// table, which is then freed here.
    pub(crate) fn put(self) -> Result {
        let mut this = core::mem::ManuallyDrop::new(self);
        this.release()
    }

    fn release(&mut self) -> Result {
        let raw = self.raw.as_ptr();
        // SAFETY: `raw` is the live table pinned at `self.va`; callers give up ownership.
        let ret = unsafe {
            match self.kind {
                PinKind::Revocable => nvidia_p2p_put_pages(0, 0, self.va, raw),
                PinKind::Persistent(put) => put(self.va, raw, 0),
            }
        };
        if ret != 0 && matches!(self.kind, PinKind::Revocable) {
            // SAFETY: the table was revoked by a free callback and is ours to free.
            unsafe { nvidia_p2p_free_page_table(raw) };
        }
        to_result(ret)
    }

    /// Frees a table whose free callback has run (its pages are already gone).
    pub(crate) fn free_dead(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: NVIDIA revoked the table in its free callback; freeing it is our duty.
        unsafe { nvidia_p2p_free_page_table(this.raw.as_ptr()) };
    }
}

impl Drop for PageTable {
    /// Error paths drop tables they pinned: unpin them.
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// NVIDIA's DMA mapping of a page table for one peer PCI device.
pub(crate) struct DmaMapping {
    raw: NonNull<RawDmaMapping>,
    peer: *mut c_void,
}

// SAFETY: an NVIDIA-owned object usable from any thread; the wrapper owns it uniquely.
unsafe impl Send for DmaMapping {}

impl DmaMapping {
    /// Maps `table` for `peer`.
    ///
    /// # Safety
    ///
    /// `peer` must be a valid PCI device that outlives the mapping.
    pub(crate) unsafe fn map(peer: *mut c_void, table: &PageTable) -> Result<Self> {
        let mut raw: *mut RawDmaMapping = core::ptr::null_mut();
        // SAFETY: `peer` is valid (caller), `table` is live, `raw` is a valid out-pointer.
        to_result(unsafe { nvidia_p2p_dma_map_pages(peer, table.as_ptr(), &mut raw) })?;
        let raw = NonNull::new(raw).ok_or(EIO)?;
        let mapping = Self { raw, peer };
        // SAFETY: NVIDIA returned a valid mapping.
        let m = unsafe { mapping.raw.as_ref() };
        if !version_compatible(m.version, DMA_MAPPING_VERSION) {
            pr_err!(
                "DMA mapping version {:#010x} from nvidia.ko is incompatible with {:#010x}\n",
                m.version,
                DMA_MAPPING_VERSION
            );
            mapping.unmap(table);
            return Err(EINVAL);
        }
        if m.entries as usize != table.entries() || m.page_size_type != PAGE_SIZE_64KB {
            pr_err!(
                "DMA mapping has {} entries of size type {}, page table {} entries\n",
                m.entries,
                m.page_size_type,
                table.entries()
            );
            mapping.unmap(table);
            return Err(EINVAL);
        }
        Ok(mapping)
    }

    /// The DMA address of every 64 KiB page, in order.
    pub(crate) fn dma_addresses(&self) -> &[u64] {
        // SAFETY: a valid mapping holds `entries` addresses until it is unmapped or freed,
        // which consumes `self`.
        unsafe {
            let m = self.raw.as_ref();
            core::slice::from_raw_parts(m.dma_addresses, m.entries as usize)
        }
    }

    /// Unmaps through NVIDIA. If the table was revoked meanwhile, frees the mapping instead.
    pub(crate) fn unmap(self, table: &PageTable) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: the mapping was made for `this.peer` from `table`.
        let ret =
            unsafe { nvidia_p2p_dma_unmap_pages(this.peer, table.as_ptr(), this.raw.as_ptr()) };
        if ret != 0 {
            // SAFETY: NVIDIA refused the unmap because the table was revoked; the mapping
            // object is still ours to free.
            unsafe { nvidia_p2p_free_dma_mapping(this.raw.as_ptr()) };
        }
    }

    /// Frees a mapping whose table was revoked by a free callback.
    pub(crate) fn free_dead(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: after the free callback the mapping object is ours to free.
        unsafe { nvidia_p2p_free_dma_mapping(this.raw.as_ptr()) };
    }
}

/// The persistent-pages entry points of `nvidia.ko`.
pub(crate) struct PersistentApi {
    get: GetPagesPersistentFn,
    put: PutPagesPersistentFn,
}

extern "C" {
    // Weak references to NVIDIA's optional symbols, NULL when absent (see glue.c).
    fn nvpm_nvidia_get_pages_persistent() -> *mut c_void;
    fn nvpm_nvidia_put_pages_persistent() -> *mut c_void;
    fn nvpm_nvidia_has_cap_persistent_pages() -> bool;
}

/// What nvidia.ko offers for pins without a free callback.
pub(crate) enum PersistentSupport {
    /// `*_persistent` entry points.
    Api(PersistentApi),
    /// Only `nvidia_p2p_cap_persistent_pages`: `get_pages` accepts a NULL callback.
    NullCallback,
    None,
}

impl PersistentSupport {
    pub(crate) fn probe() -> Self {
        // SAFETY: the helpers only return the addresses of weak symbol references.
        let (get, put, cap) = unsafe {
            (
                nvpm_nvidia_get_pages_persistent(),
                nvpm_nvidia_put_pages_persistent(),
                nvpm_nvidia_has_cap_persistent_pages(),
            )
        };
        if !get.is_null() && !put.is_null() {
            // SAFETY: the symbols are NVIDIA's functions with these documented signatures; the
            // module dependency on nvidia.ko keeps them loaded while we are.
            return Self::Api(unsafe {
                PersistentApi {
                    get: core::mem::transmute::<*mut c_void, GetPagesPersistentFn>(get),
                    put: core::mem::transmute::<*mut c_void, PutPagesPersistentFn>(put),
                }
            });
        }
        if cap {
            Self::NullCallback
        } else {
            Self::None
        }
    }
}

// The ABI's layouts on 64-bit kernels.
const _: () = assert!(core::mem::size_of::<RawPage>() == 32);
const _: () = assert!(core::mem::size_of::<RawPageTable>() == 32);
const _: () = assert!(core::mem::size_of::<RawDmaMapping>() == 40);
