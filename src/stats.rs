// SPDX-License-Identifier: GPL-2.0

//! Per-client counters, read-only under `/sys/module/nv_peer_mem/stats/<client>/`.
//!
//! Plain atomics, never a lock: the hot path pays one atomic add per event. The files are made
//! by `stats_sysfs.c`, which asks [`nvpm_stats_counter_name`] for their names and
//! [`nvpm_stats_value`] for their values, so this enum is the only list of counters.

use core::ffi::{c_char, c_int};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;

use crate::client_kind::ClientKind;
use crate::peer_mem::PeerMemoryClientEx;

/// What is counted. The discriminant is the counter's index in [`ClientStats`].
#[derive(Clone, Copy)]
pub(crate) enum Counter {
    /// Gauge: registrations pinned now (from `get_pages` until the pin is gone).
    LiveRegistrations,
    /// Gauge: bytes of GPU memory pinned by those registrations.
    PinnedBytes,
    /// `get_pages` that pinned.
    Registrations,
    /// `put_pages` (or `release`) that ended a pinned registration.
    Deregistrations,
    /// Free callbacks that invalidated a mapped registration through ib_core.
    Invalidations,
    /// `acquire` declined the range: not GPU memory of the calling process.
    ErrNotMine,
    /// NVIDIA refused to pin: EINVAL, ENOMEM (BAR1 exhausted), EOPNOTSUPP/ENOTSUPP, EIO, other.
    ErrNvidiaEinval,
    ErrNvidiaEnomem,
    ErrNvidiaEopnotsupp,
    ErrNvidiaEio,
    ErrNvidiaOther,
    /// The GPU memory was freed while it was being registered.
    ErrFreedDuringRegistration,
    /// `dma_map` failed (NVIDIA's mapping, its check, or the sg list).
    ErrMapping,
    /// Our own allocations failed.
    ErrAlloc,
    /// ib_core passed an unknown context, another range than `acquire`'s, or a call out of order.
    ErrRefusedContext,
}

const COUNTERS: usize = Counter::ErrRefusedContext as usize + 1;

/// The sysfs file names, in [`Counter`] order.
const NAMES: [&[u8]; COUNTERS] = [
    b"live_registrations\0",
    b"pinned_bytes\0",
    b"registrations\0",
    b"deregistrations\0",
    b"invalidations\0",
    b"err_not_mine\0",
    b"err_nvidia_einval\0",
    b"err_nvidia_enomem\0",
    b"err_nvidia_eopnotsupp\0",
    b"err_nvidia_eio\0",
    b"err_nvidia_other\0",
    b"err_freed_during_registration\0",
    b"err_mapping\0",
    b"err_alloc\0",
    b"err_refused_context\0",
];

struct ClientStats([AtomicU64; COUNTERS]);

impl ClientStats {
    const fn new() -> Self {
        Self([const { AtomicU64::new(0) }; COUNTERS])
    }
}

/// Indexed by [`client_index`].
static STATS: [ClientStats; 2] = [ClientStats::new(), ClientStats::new()];

pub(crate) const fn client_index(kind: ClientKind) -> usize {
    match kind {
        ClientKind::Invalidating => 0,
        ClientKind::Persistent => 1,
    }
}

fn counter(kind: ClientKind, c: Counter) -> &'static AtomicU64 {
    &STATS[client_index(kind)].0[c as usize]
}

/// Counts one event.
pub(crate) fn count(kind: ClientKind, c: Counter) {
    counter(kind, c).fetch_add(1, Ordering::Relaxed);
}

/// Counts NVIDIA's refusal to pin, by errno.
pub(crate) fn count_nvidia_error(kind: ClientKind, e: Error) {
    let c = if e == EINVAL {
        Counter::ErrNvidiaEinval
    } else if e == ENOMEM {
        Counter::ErrNvidiaEnomem
    } else if e == crate::compat::eopnotsupp() || e == crate::compat::enotsupp() {
        Counter::ErrNvidiaEopnotsupp
    } else if e == EIO {
        Counter::ErrNvidiaEio
    } else {
        Counter::ErrNvidiaOther
    };
    count(kind, c);
}

/// One pinned registration in the gauges: counted while it lives, uncounted when dropped,
/// whichever path (put_pages, the free callback, an error) lets the pin go.
pub(crate) struct Held {
    kind: ClientKind,
    bytes: u64,
}

impl Held {
    pub(crate) fn new(kind: ClientKind, bytes: u64) -> Self {
        counter(kind, Counter::LiveRegistrations).fetch_add(1, Ordering::Relaxed);
        counter(kind, Counter::PinnedBytes).fetch_add(bytes, Ordering::Relaxed);
        Self { kind, bytes }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        counter(self.kind, Counter::LiveRegistrations).fetch_sub(1, Ordering::Relaxed);
        counter(self.kind, Counter::PinnedBytes).fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// The name of counter `index`, or NULL past the last one (called by `stats_sysfs.c`).
#[no_mangle]
pub(crate) extern "C" fn nvpm_stats_counter_name(index: c_int) -> *const c_char {
    usize::try_from(index)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or(core::ptr::null(), |n| n.as_ptr().cast())
}

/// The value of counter `index` of client `client` (0: invalidating, 1: persistent), 0 when
/// out of range (called by `stats_sysfs.c`).
#[no_mangle]
pub(crate) extern "C" fn nvpm_stats_value(client: c_int, index: c_int) -> u64 {
    let (Ok(client), Ok(index)) = (usize::try_from(client), usize::try_from(index)) else {
        return 0;
    };
    STATS
        .get(client)
        .and_then(|s| s.0.get(index))
        .map_or(0, |v| v.load(Ordering::Relaxed))
}

/// The `stats` directory; removed on drop.
pub(crate) struct StatsDir(());

impl StatsDir {
    pub(crate) fn create() -> Result<Self> {
        // SAFETY: called once from module init; undone by `Drop`.
        kernel::error::to_result(unsafe { crate::glue::sysfs_stats_create() })?;
        Ok(Self(()))
    }

    /// Adds `stats/<name>/` for the client of `kind`.
    pub(crate) fn add_client(&self, kind: ClientKind, client: &PeerMemoryClientEx) -> Result {
        // SAFETY: the directory exists (`self`); the name is NUL-terminated and copied by sysfs.
        kernel::error::to_result(unsafe {
            crate::glue::sysfs_stats_add_client(client_index(kind) as c_int, client.name_ptr())
        })
    }
}

impl Drop for StatsDir {
    fn drop(&mut self) {
        // SAFETY: removes what `create` and `add_client` made; no reader outlives it (kernfs
        // drains active readers).
        unsafe { crate::glue::sysfs_stats_destroy() };
    }
}
