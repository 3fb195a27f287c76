// SPDX-License-Identifier: GPL-2.0

//! The PeerDirect API of MLNX_OFED's `ib_core`, declared from its documented ABI, and the
//! registration of our clients with it. Kernel structs ib_core passes (`sg_table`, `device`)
//! are opaque here.

use core::ffi::{c_char, c_int, c_ulong, c_void};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;

const NAME_MAX: usize = 64;
const VERSION_MAX: usize = 16;
/// The client unmaps and unpins an invalidated registration itself.
const PEER_MEM_INVALIDATE_UNMAPS: u32 = 1;

pub(crate) type AcquireFn = unsafe extern "C" fn(
    addr: c_ulong,
    size: usize,
    peer_mem_private_data: *mut c_void,
    peer_mem_name: *mut c_char,
    client_context: *mut *mut c_void,
) -> c_int;
pub(crate) type GetPagesFn = unsafe extern "C" fn(
    addr: c_ulong,
    size: usize,
    write: c_int,
    force: c_int,
    sg_head: *mut c_void,
    client_context: *mut c_void,
    core_context: u64,
) -> c_int;
pub(crate) type DmaMapFn = unsafe extern "C" fn(
    sg_head: *mut c_void,
    client_context: *mut c_void,
    dma_device: *mut c_void,
    dmasync: c_int,
    nmap: *mut c_int,
) -> c_int;
pub(crate) type DmaUnmapFn = unsafe extern "C" fn(
    sg_head: *mut c_void,
    client_context: *mut c_void,
    dma_device: *mut c_void,
) -> c_int;
pub(crate) type PutPagesFn =
    unsafe extern "C" fn(sg_head: *mut c_void, client_context: *mut c_void);
pub(crate) type GetPageSizeFn = unsafe extern "C" fn(client_context: *mut c_void) -> c_ulong;
pub(crate) type ReleaseFn = unsafe extern "C" fn(client_context: *mut c_void);
/// ib_core's function a client calls to invalidate a registration.
type InvalidateFn = unsafe extern "C" fn(reg_handle: *mut c_void, core_context: u64) -> c_int;

/// `struct peer_memory_client`.
#[repr(C)]
pub(crate) struct PeerMemoryClient {
    name: [u8; NAME_MAX],
    version: [u8; VERSION_MAX],
    acquire: Option<AcquireFn>,
    get_pages: Option<GetPagesFn>,
    dma_map: Option<DmaMapFn>,
    dma_unmap: Option<DmaUnmapFn>,
    put_pages: Option<PutPagesFn>,
    get_page_size: Option<GetPageSizeFn>,
    release: Option<ReleaseFn>,
}

/// `struct peer_memory_client_ex`: the extended form ib_core recognises by the last version
/// byte being 1.
///
/// MLNX_OFED 4.9 knows no extended form: its `peer_memory_client` is 16 bytes longer, and it
/// reads `ex_size` and `flags` (with the padding after them) as two more function pointers,
/// `get_context_private_data` and `put_context_private_data`. A non-NULL first one makes it
/// skip the client for every registration. The legacy form therefore zeroes all 16 bytes,
/// padding included (`reserved`).
#[repr(C)]
pub(crate) struct PeerMemoryClientEx {
    client: PeerMemoryClient,
    ex_size: usize,
    flags: u32,
    reserved: u32,
}

// SAFETY: the struct is immutable after construction and holds only function pointers and
// bytes.
unsafe impl Sync for PeerMemoryClientEx {}

extern "C" {
    fn ib_register_peer_memory_client(
        client: *const PeerMemoryClient,
        invalidate_callback: *mut Option<InvalidateFn>,
    ) -> *mut c_void;
    fn ib_unregister_peer_memory_client(reg_handle: *mut c_void);
}

/// The operations a client implements.
pub(crate) struct ClientOps {
    pub(crate) acquire: AcquireFn,
    pub(crate) get_pages: GetPagesFn,
    pub(crate) dma_map: DmaMapFn,
    pub(crate) dma_unmap: DmaUnmapFn,
    pub(crate) put_pages: PutPagesFn,
    pub(crate) get_page_size: GetPageSizeFn,
    pub(crate) release: ReleaseFn,
}

const fn fixed<const N: usize>(s: &str) -> [u8; N] {
    let b = s.as_bytes();
    assert!(b.len() < N);
    let mut out = [0u8; N];
    let mut i = 0;
    while i < b.len() {
        out[i] = b[i];
        i += 1;
    }
    out
}

impl PeerMemoryClientEx {
    /// A client description. `extended` selects the extended form with
    /// `PEER_MEM_INVALIDATE_UNMAPS`; otherwise the legacy form MLNX_OFED 4.9 understands.
    pub(crate) const fn new(name: &str, version: &str, ops: &ClientOps, extended: bool) -> Self {
        let mut v: [u8; VERSION_MAX] = fixed(version);
        // The version string must leave room for the terminator and the extended-form flag.
        assert!(version.len() < VERSION_MAX - 1);
        let (ex_size, flags) = if extended {
            v[VERSION_MAX - 1] = 1;
            (core::mem::size_of::<Self>(), PEER_MEM_INVALIDATE_UNMAPS)
        } else {
            (0, 0)
        };
        Self {
            client: PeerMemoryClient {
                name: fixed(name),
                version: v,
                acquire: Some(ops.acquire),
                get_pages: Some(ops.get_pages),
                dma_map: Some(ops.dma_map),
                dma_unmap: Some(ops.dma_unmap),
                put_pages: Some(ops.put_pages),
                get_page_size: Some(ops.get_page_size),
                release: Some(ops.release),
            },
            ex_size,
            flags,
            reserved: 0,
        }
    }

    /// The name as a C string (`fixed` keeps a terminator).
    pub(crate) fn name_ptr(&self) -> *const c_char {
        self.client.name.as_ptr().cast()
    }

    pub(crate) fn name(&self) -> &str {
        let len = self
            .client
            .name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(NAME_MAX);
        core::str::from_utf8(&self.client.name[..len]).unwrap_or("?")
    }
}

/// The handle and invalidate function ib_core gave the invalidating client. Set once the
/// client is registered, cleared after it is unregistered; free callbacks read it.
static INVALIDATE_HANDLE: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static INVALIDATE_FN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// Asks ib_core to invalidate the registration it knows as `core_context`. Returns false when
/// no invalidating client is registered.
pub(crate) fn invalidate(core_context: u64) -> bool {
    let handle = INVALIDATE_HANDLE.load(Ordering::Acquire);
    let f = INVALIDATE_FN.load(Ordering::Acquire);
    if handle.is_null() || f.is_null() {
        return false;
    }
    // SAFETY: `f` was written by ib_core as its invalidate function and stays valid while the
    // client is registered, which outlives every registration (unregister waits for them).
    unsafe {
        let f = core::mem::transmute::<*mut c_void, InvalidateFn>(f);
        f(handle, core_context);
    }
    true
}

/// A client registered with ib_core; unregistered on drop (which waits until ib_core has
/// released every registration the client backs).
///
/// # Invariants
///
/// `handle` is the handle ib_core returned for `client`, not yet unregistered; `client` is
/// `'static`, so ib_core's pointer to it stays valid for as long as the handle does. When
/// `invalidating`, ib_core's invalidate function and this handle are published for the free
/// callback.
pub(crate) struct Registration {
    handle: NonNull<c_void>,
    client: &'static PeerMemoryClientEx,
    invalidating: bool,
}

// SAFETY: the handle is an opaque token ib_core accepts from any thread.
unsafe impl Send for Registration {}
// SAFETY: `Registration` offers no interior mutability.
unsafe impl Sync for Registration {}

impl Registration {
    /// Registers `client`. An invalidating client receives ib_core's invalidate function.
    pub(crate) fn register(
        client: &'static PeerMemoryClientEx,
        invalidating: bool,
    ) -> Result<Self> {
        let mut invalidate: Option<InvalidateFn> = None;
        let out: *mut Option<InvalidateFn> = if invalidating {
            &mut invalidate
        } else {
            core::ptr::null_mut()
        };
        // SAFETY: `client` is 'static; `out` is NULL or points to a local ib_core fills in.
        let handle = unsafe { ib_register_peer_memory_client(&client.client, out) };
        let handle = NonNull::new(handle).ok_or_else(|| {
            pr_err!(
                "ib_core refused to register peer memory client {}\n",
                client.name()
            );
            EINVAL
        })?;
        // INVARIANT: ib_core accepted `client` and returned `handle`; dropping `reg` on the
        // error paths below unregisters it.
        let reg = Self {
            handle,
            client,
            invalidating,
        };
        if invalidating {
            let f = invalidate.ok_or_else(|| {
                pr_err!(
                    "ib_core gave client {} no invalidate function\n",
                    client.name()
                );
                EINVAL
            })?;
            INVALIDATE_FN.store(f as *mut c_void, Ordering::Release);
            INVALIDATE_HANDLE.store(handle.as_ptr(), Ordering::Release);
        }
        Ok(reg)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: the handle came from a successful registration and is used once here.
        unsafe { ib_unregister_peer_memory_client(self.handle.as_ptr()) };
        if self.invalidating {
            INVALIDATE_HANDLE.store(core::ptr::null_mut(), Ordering::Release);
            INVALIDATE_FN.store(core::ptr::null_mut(), Ordering::Release);
        }
        crate::dbg_log!("unregistered client {}\n", self.client.name());
    }
}

// The ABI's layouts on 64-bit kernels.
const _: () = assert!(core::mem::size_of::<PeerMemoryClient>() == 136);
const _: () = assert!(core::mem::size_of::<PeerMemoryClientEx>() == 152);

// KUnit (`nvpm_kunit`: see Kbuild): the client descriptions, byte for byte as ib_core reads
// them.
#[cfg(nvpm_kunit)]
#[kernel::macros::kunit_tests(nv_peer_mem_peer_mem)]
mod tests {
    use super::{
        ClientOps, PeerMemoryClient, PeerMemoryClientEx, NAME_MAX, PEER_MEM_INVALIDATE_UNMAPS,
        VERSION_MAX,
    };
    use core::mem::size_of;
    use kernel::prelude::*;

    /// The clients the module registers, as (description, extended form).
    fn shipped() -> [(&'static PeerMemoryClientEx, bool); 4] {
        [
            (&crate::clients::NV_MEM, true),
            (&crate::clients::NV_MEM_LEGACY, false),
            (&crate::clients::NV_MEM_NC, false),
            (&crate::clients::NV_MEM_PERSISTENT, false),
        ]
    }

    /// What follows the legacy `peer_memory_client`: the extended form's fields, which
    /// MLNX_OFED 4.9 reads as two more function pointers.
    fn tail(c: &PeerMemoryClientEx) -> &[u8] {
        // SAFETY: `c` is valid for reads of its size, and every byte of it is initialized: its
        // fields leave no padding (64 + 16 + 7 * 8 + 8 + 4 + 4 bytes, the 152 asserted above).
        let all = unsafe {
            core::slice::from_raw_parts(
                core::ptr::from_ref(c).cast::<u8>(),
                size_of::<PeerMemoryClientEx>(),
            )
        };
        &all[size_of::<PeerMemoryClient>()..]
    }

    /// The operations of `c`, to describe another client with.
    fn ops_of(c: &PeerMemoryClientEx) -> Option<ClientOps> {
        let c = &c.client;
        Some(ClientOps {
            acquire: c.acquire?,
            get_pages: c.get_pages?,
            dma_map: c.dma_map?,
            dma_unmap: c.dma_unmap?,
            put_pages: c.put_pages?,
            get_page_size: c.get_page_size?,
            release: c.release?,
        })
    }

    #[test]
    fn legacy_form_ends_in_16_zero_bytes() {
        assert_eq!(tail(&crate::clients::NV_MEM_LEGACY).len(), 16);
        for (c, extended) in shipped() {
            if !extended {
                assert!(tail(c).iter().all(|&b| b == 0));
                assert_eq!(c.client.version[VERSION_MAX - 1], 0);
            }
        }
    }

    #[test]
    fn extended_form_says_so() {
        for (c, extended) in shipped() {
            if extended {
                assert_eq!(c.client.version[VERSION_MAX - 1], 1);
                assert_eq!(c.ex_size, size_of::<PeerMemoryClientEx>());
                assert_eq!(c.flags, PEER_MEM_INVALIDATE_UNMAPS);
                assert_eq!(c.reserved, 0);
            }
        }
    }

    #[test]
    fn names_and_versions_are_c_strings() {
        for (c, _) in shipped() {
            let v = crate::clients::VERSION.as_bytes();
            assert_eq!(c.client.version[..v.len()], *v);
            assert!(c.client.version[v.len()..VERSION_MAX - 1]
                .iter()
                .all(|&b| b == 0));
            assert_eq!(c.client.name[NAME_MAX - 1], 0);
        }
        assert_eq!(crate::clients::NV_MEM.name(), "nv_mem");
        assert_eq!(crate::clients::NV_MEM_NC.name(), "nv_mem_nc");
    }

    #[test]
    fn legacy_form_zeroes_dirty_memory() -> Result {
        let ops = ops_of(&crate::clients::NV_MEM).ok_or(EINVAL)?;
        for extended in [false, true] {
            let mut slot = KBox::<PeerMemoryClientEx>::new_uninit(GFP_KERNEL)?;
            // SAFETY: `slot` is valid for writes of one `PeerMemoryClientEx`, and is
            // uninitialized memory, which any bytes may fill.
            unsafe { core::ptr::write_bytes(slot.as_mut_ptr(), 0xff, 1) };
            let c = KBox::write(
                slot,
                PeerMemoryClientEx::new("nv_mem", crate::clients::VERSION, &ops, extended),
            );
            let zeroes = tail(&c).iter().filter(|&&b| b == 0).count();
            // Extended: one byte of `ex_size` (152) and one of `flags` (1) are not zero.
            assert_eq!(zeroes, if extended { 14 } else { 16 });
        }
        Ok(())
    }
}
