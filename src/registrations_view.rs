// SPDX-License-Identifier: GPL-2.0

//! The live registration view, `/sys/kernel/debug/nv_peer_mem/registrations` (root only, made
//! by `debugfs_view.c`): one line per registration. It shows GPU virtual addresses, which are
//! user-space addresses, and PCI addresses; never a kernel pointer.

use core::ffi::{c_int, c_void};
use core::fmt::Write;
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::client_kind::ClientKind;
use crate::globals::globals;
use crate::registration::{Context, Phase};

/// Writes into the seq_file being shown.
struct SeqWriter(*mut c_void);

impl Write for SeqWriter {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        // SAFETY: `self.0` is the seq_file of the `show` call in progress; `s` is valid for
        // `s.len()` bytes, which seq_write copies.
        unsafe { crate::glue::seq_write(self.0, s.as_bytes()) };
        Ok(())
    }
}

/// The client name a registration of `kind` is under.
fn client_name(kind: ClientKind, persistent_only: bool) -> &'static str {
    match kind {
        ClientKind::Invalidating => "nv_mem",
        ClientKind::Persistent if persistent_only => "nv_mem",
        ClientKind::Persistent => "nv_mem_nc",
    }
}

/// A PCI address packed by `nvpm_pci_bdf`, as `DDDD:BB:DD.F`.
struct Bdf(u32);

impl core::fmt::Display for Bdf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            b >> 16,
            (b >> 8) & 0xff,
            (b >> 3) & 0x1f,
            b & 7
        )
    }
}

fn show(w: &mut SeqWriter, contexts: &[Arc<Context>], persistent_only: bool) -> core::fmt::Result {
    writeln!(w, "id client range size phase nic sg_entries age_ms bytes")?;
    let now = crate::glue::now_ns();
    for ctx in contexts.iter() {
        let (phase, nic, entries, bytes) = {
            let phase = ctx.phase.lock();
            let (nic, entries) = match &*phase {
                Phase::Mapped(_, m) => (Some(Bdf(m.nic)), m.sg.nents()),
                _ => (None, 0),
            };
            (phase.name(), nic, entries, ctx.held_bytes(&phase))
        };
        write!(
            w,
            "{} {} {:#x}-{:#x} {} {} ",
            ctx.id,
            client_name(ctx.kind, persistent_only),
            ctx.addr,
            ctx.addr.wrapping_add(ctx.size),
            ctx.size,
            phase
        )?;
        match nic {
            Some(bdf) => write!(w, "{bdf}")?,
            None => write!(w, "-")?,
        }
        writeln!(
            w,
            " {} {} {}",
            entries,
            now.saturating_sub(ctx.created_ns) / 1_000_000,
            bytes
        )?;
    }
    Ok(())
}

/// A registry slot's share of its XArray node, which holds 64 (`registry.rs`).
fn slot_bytes() -> usize {
    crate::glue::slots_entry_bytes()
}

/// Bytes the allocator gives for an allocation of `size` (its kmalloc size class).
fn alloc_bytes(size: usize) -> usize {
    crate::glue::alloc_bytes(size)
}

impl Context {
    /// Bytes this module holds for the registration in `phase`: the context, its registry
    /// slot and the sg list, as the allocator gives them (each object's size class; NVIDIA's
    /// page table and mapping are not ours). `make bench` checks it against the slab caches'
    /// growth over 10 000 registrations (Documentation/performance.md).
    pub(crate) fn held_bytes(&self, phase: &Phase) -> usize {
        // The context's `Arc` allocation (a refcount beside the context) and its registry slot.
        let mut bytes = alloc_bytes(core::mem::size_of::<Self>() + core::mem::size_of::<usize>())
            + slot_bytes();
        match phase {
            Phase::Mapped(_, m) => bytes += m.sg.bytes(),
            Phase::Revoked(Some(sg)) => bytes += sg.bytes(),
            _ => {}
        }
        bytes
    }
}

/// Called by `debugfs_view.c` to fill the file.
///
/// # Safety
///
/// `m` must be the seq_file of a `show` call in progress, made while the module's clients are
/// registered (the file exists only then: [`View`]).
#[no_mangle]
pub(crate) unsafe extern "C" fn nvpm_registrations_show(m: *mut c_void) -> c_int {
    // SAFETY: the file exists only while the module's clients are registered, and its removal
    // waits for this call to return.
    let state = unsafe { globals() };
    match state.registry().snapshot() {
        Ok(contexts) => {
            let _ = show(&mut SeqWriter(m), &contexts, state.persistent_only());
            0
        }
        Err(e) => {
            pr_warn!("registrations view: no memory to list the registrations\n");
            e.to_errno()
        }
    }
}

/// The debugfs file; removed (waiting for readers) on drop.
pub(crate) struct View(());

impl View {
    /// Creates the file; failures are not errors (debugfs may be off).
    pub(crate) fn create() -> Self {
        // SAFETY: called once from module init, after the registry exists.
        unsafe { crate::glue::debugfs_create() };
        Self(())
    }
}

impl Drop for View {
    fn drop(&mut self) {
        // SAFETY: removes what `create` made and waits for readers in flight.
        unsafe { crate::glue::debugfs_destroy() };
    }
}
