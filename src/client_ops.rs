// SPDX-License-Identifier: GPL-2.0

//! The entry points ib_core calls. Each resolves the client context ib_core hands back through
//! the registry, so a stale or foreign pointer is refused instead of dereferenced.

use core::ffi::{c_char, c_int, c_ulong, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::client_kind::ClientKind;
use crate::compat::eopnotsupp;
use crate::globals::{globals, Globals};
use crate::nv_p2p::GPU_PAGE_SIZE;
use crate::peer_mem::ClientOps;
use crate::registration::{gpu_range, Context};
use crate::registry::Registry;
use crate::stats::{count, Counter};

/// The client an entry point serves.
const fn kind<const PERSISTENT: bool>() -> ClientKind {
    if PERSISTENT {
        ClientKind::Persistent
    } else {
        ClientKind::Invalidating
    }
}

/// An unknown context from ib_core: logged once and counted. An id never has its top bit set
/// (`registry.rs`); a value with it set is no id of ours and may be a kernel address, which the
/// log must not show.
fn refuse(kind: ClientKind, client_context: *mut c_void, op: &str) {
    let value = client_context as usize;
    if value >> (usize::BITS - 1) == 0 {
        pr_err!("{}: unknown client context {} from ib_core\n", op, value);
    } else {
        pr_err!(
            "{}: unknown client context from ib_core (not an id this module issued)\n",
            op
        );
    }
    count(kind, Counter::ErrRefusedContext);
}

/// The context handed to ib_core for a buffer this module claimed without the memory to track
/// it (no id has its top bit set; NULL stays an unknown context): `get_pages`
/// fails it with ENOMEM and `release` has nothing to give back. Declining instead would let
/// ib_core ask the next client, and nv_mem_nc would pin an MR's GPU memory persistently: a
/// registration that cudaFree never invalidates (Documentation/design.md, "Out of memory in
/// acquire").
const NO_MEMORY: usize = usize::MAX;

/// Claims the buffer with [`NO_MEMORY`] after an allocation failed (the caller has logged it),
/// and counts the failure.
fn claim_without_memory(kind: ClientKind, client_context: *mut *mut c_void) -> c_int {
    count(kind, Counter::ErrAlloc);
    // SAFETY: ib_core passes a valid out-pointer (checked non-NULL by the caller).
    unsafe { *client_context = NO_MEMORY as *mut c_void };
    1
}

/// The context behind ib_core's `client_context`, or an error logged once.
fn lookup<const PERSISTENT: bool>(
    registry: &Registry,
    client_context: *mut c_void,
    op: &str,
) -> Option<Arc<Context>> {
    let found = registry.get(client_context as usize);
    if found.is_none() {
        refuse(kind::<PERSISTENT>(), client_context, op);
    }
    found
}

/// The errno ib_core passes on to `ibv_reg_mr`: kernel-internal ones (such as NVIDIA's
/// ENOTSUPP, 524, "Unknown error 524" in user space) become ones user space can decode.
fn errno(e: Error) -> c_int {
    crate::glue::user_errno(e.to_errno())
}

fn acquire(
    state: &Globals,
    kind: ClientKind,
    addr: c_ulong,
    size: usize,
    client_context: *mut *mut c_void,
) -> c_int {
    let (addr, size): (u64, u64) = (addr, size as u64);
    if client_context.is_null() {
        return 0;
    }
    if gpu_range(addr, size).is_none() {
        count(kind, Counter::ErrNotMine);
        return 0;
    }
    let registry = state.registry();
    let ctx = match registry.insert_new(|id| Context::new(id, addr, size, kind)) {
        Ok(ctx) => ctx,
        Err(e) => {
            pr_err!(
                "acquire {:#x} (+{:#x}): no memory for a context ({:?}): the registration fails with ENOMEM\n",
                addr,
                size,
                e
            );
            return claim_without_memory(kind, client_context);
        }
    };
    // -EINVAL from NVIDIA means "not GPU memory of this process" (host memory, freed or another
    // process's GPU memory). Any other error still means GPU memory, which we claim so that
    // `get_pages` reports the real errno (ENOMEM when BAR1 is exhausted, say) instead of
    // ib_core's generic EFAULT.
    match ctx.claim(state) {
        Ok(()) => {}
        Err(e) if e == EINVAL || (e == eopnotsupp() && kind == ClientKind::Persistent) => {
            count(kind, Counter::ErrNotMine);
            drop(registry.remove(ctx.id));
            return 0;
        }
        Err(e) => crate::dbg_log!(
            "claiming {:#x} (+{:#x}) although pinning failed: {:?}\n",
            addr,
            size,
            e
        ),
    }
    let id = ctx.id;
    // SAFETY: ib_core passes a valid out-pointer (checked non-NULL above).
    unsafe { *client_context = id as *mut c_void };
    crate::dbg_log!("acquire {:#x} (+{:#x}): context {}\n", addr, size, id);
    1
}

/// ib_core's `acquire`, for nv_mem (`PERSISTENT = false`) or nv_mem_nc.
///
/// # Safety
///
/// `client_context` must be NULL or valid for writing a pointer (ib_core's contract).
unsafe extern "C" fn acquire_entry<const PERSISTENT: bool>(
    addr: c_ulong,
    size: usize,
    _priv: *mut c_void,
    _name: *mut c_char,
    client_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: ib_core calls a client's operations only while the client is registered.
    let state = unsafe { globals() };
    acquire(state, kind::<PERSISTENT>(), addr, size, client_context)
}

/// ib_core's `get_pages`.
///
/// # Safety
///
/// Called by ib_core only; `client_context` is resolved through the registry, never trusted.
unsafe extern "C" fn get_pages<const PERSISTENT: bool>(
    addr: c_ulong,
    size: usize,
    _write: c_int,
    _force: c_int,
    _sg_head: *mut c_void,
    client_context: *mut c_void,
    core_context: u64,
) -> c_int {
    if client_context as usize == NO_MEMORY {
        return errno(ENOMEM);
    }
    // SAFETY: ib_core calls a client's operations only while the client is registered.
    let state = unsafe { globals() };
    let Some(ctx) = lookup::<PERSISTENT>(state.registry(), client_context, "get_pages") else {
        return errno(EINVAL);
    };
    if ctx.addr != addr || ctx.size != size as u64 {
        pr_err!(
            "get_pages {:#x} (+{:#x}) does not match acquire {:#x} (+{:#x})\n",
            addr,
            size,
            ctx.addr,
            ctx.size
        );
        count(ctx.kind, Counter::ErrRefusedContext);
        return errno(EINVAL);
    }
    match ctx.get_pages(state, core_context) {
        Ok(()) => 0,
        Err(e) => errno(e),
    }
}

/// ib_core's `dma_map`.
///
/// # Safety
///
/// `sg_head`, `dma_device` and `nmap` must be NULL or valid (ib_core's contract), and stay
/// valid until ib_core unmaps or releases the registration.
unsafe extern "C" fn dma_map<const PERSISTENT: bool>(
    sg_head: *mut c_void,
    client_context: *mut c_void,
    dma_device: *mut c_void,
    _dmasync: c_int,
    nmap: *mut c_int,
) -> c_int {
    // SAFETY: ib_core calls a client's operations only while the client is registered.
    let state = unsafe { globals() };
    let Some(ctx) = lookup::<PERSISTENT>(state.registry(), client_context, "dma_map") else {
        return errno(EINVAL);
    };
    // SAFETY: ib_core passes its DMA device (or NULL, handled by the helper).
    let peer = unsafe { crate::glue::dev_to_pci(dma_device) };
    if peer.is_null() || sg_head.is_null() || nmap.is_null() {
        pr_err!(
            "dma_map {:#x} (+{:#x}): the DMA device is not a PCI device\n",
            ctx.va,
            ctx.len
        );
        count(ctx.kind, Counter::ErrMapping);
        return errno(EINVAL);
    }
    // SAFETY: ib_core's device and sg_table for this registration stay valid until it
    // unmaps or releases it.
    match unsafe { ctx.dma_map(peer, sg_head) } {
        Ok(n) => {
            // SAFETY: checked non-NULL; ib_core's out-parameter.
            unsafe { *nmap = n };
            crate::dbg_log!("dma_map {:#x} (+{:#x}): {} entries\n", ctx.va, ctx.len, n);
            0
        }
        Err(e) => errno(e),
    }
}

/// ib_core's `dma_unmap`.
///
/// # Safety
///
/// Called by ib_core only; `client_context` is resolved through the registry.
unsafe extern "C" fn dma_unmap<const PERSISTENT: bool>(
    _sg_head: *mut c_void,
    client_context: *mut c_void,
    _dma_device: *mut c_void,
) -> c_int {
    // SAFETY: ib_core calls a client's operations only while the client is registered.
    let state = unsafe { globals() };
    let Some(ctx) = lookup::<PERSISTENT>(state.registry(), client_context, "dma_unmap") else {
        return errno(EINVAL);
    };
    match ctx.dma_unmap() {
        Ok(()) => 0,
        Err(e) => errno(e),
    }
}

/// ib_core's `put_pages`.
///
/// # Safety
///
/// Called by ib_core only; `client_context` is resolved through the registry.
unsafe extern "C" fn put_pages<const PERSISTENT: bool>(
    _sg_head: *mut c_void,
    client_context: *mut c_void,
) {
    // SAFETY: ib_core calls a client's operations only while the client is registered.
    let state = unsafe { globals() };
    if let Some(ctx) = lookup::<PERSISTENT>(state.registry(), client_context, "put_pages") {
        ctx.put_pages(state);
    }
}

/// ib_core's `get_page_size`: GPU pages are 64 KiB.
///
/// # Safety
///
/// No requirement: the context is not used.
unsafe extern "C" fn get_page_size(_client_context: *mut c_void) -> c_ulong {
    GPU_PAGE_SIZE as c_ulong
}

/// ib_core's `release`: the last call for a registration.
///
/// # Safety
///
/// Called by ib_core only; `client_context` is resolved through the registry.
unsafe extern "C" fn release<const PERSISTENT: bool>(client_context: *mut c_void) {
    if client_context as usize == NO_MEMORY {
        return;
    }
    // SAFETY: ib_core calls a client's operations only while the client is registered.
    let state = unsafe { globals() };
    let Some(ctx) = state.registry().remove(client_context as usize) else {
        refuse(kind::<PERSISTENT>(), client_context, "release");
        return;
    };
    ctx.release(state);
    crate::dbg_log!("release {:#x} (+{:#x})\n", ctx.addr, ctx.size);
    // The module reference goes with the last reference to the context, which NVIDIA's free
    // callback may still hold.
    drop(ctx);
}

/// Operations of the invalidating client ("nv_mem").
pub(crate) const INVALIDATING: ClientOps = ops::<false>();

/// Operations of the persistent client ("nv_mem_nc").
pub(crate) const PERSISTENT: ClientOps = ops::<true>();

/// One client's operations: the same code, counted per client.
const fn ops<const PERSISTENT: bool>() -> ClientOps {
    ClientOps {
        acquire: acquire_entry::<PERSISTENT>,
        get_pages: get_pages::<PERSISTENT>,
        dma_map: dma_map::<PERSISTENT>,
        dma_unmap: dma_unmap::<PERSISTENT>,
        put_pages: put_pages::<PERSISTENT>,
        get_page_size,
        release: release::<PERSISTENT>,
    }
}
