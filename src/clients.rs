// SPDX-License-Identifier: GPL-2.0

//! The PeerDirect clients the module can register with ib_core, which of them is "nv_mem", and
//! the set it registers at load.

use kernel::prelude::*;

use crate::client_kind::ClientKind;
use crate::client_ops;
use crate::peer_mem::{PeerMemoryClientEx, Registration};
use crate::stats::StatsDir;

/// The version ib_core shows in `/sys/kernel/mm/memory_peers/<client>/version`.
pub(crate) const VERSION: &str = "1.4.0";

pub(crate) static NV_MEM: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem", VERSION, &client_ops::INVALIDATING, true);
pub(crate) static NV_MEM_LEGACY: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem", VERSION, &client_ops::INVALIDATING, false);
pub(crate) static NV_MEM_PERSISTENT: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem", VERSION, &client_ops::PERSISTENT, false);

/// "nv_mem_nc", the persistent client beside an invalidating "nv_mem".
pub(crate) static NV_MEM_NC: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem_nc", VERSION, &client_ops::PERSISTENT, false);

/// The client to register as "nv_mem", and its kind: the persistent one with
/// `persistent_api_support=1` in effect (`persistent_only`), else the invalidating one, in the
/// form MLNX_OFED 4.9 understands when `legacy`.
pub(crate) fn nv_mem(
    persistent_only: bool,
    legacy: bool,
) -> (&'static PeerMemoryClientEx, ClientKind) {
    if persistent_only {
        (&NV_MEM_PERSISTENT, ClientKind::Persistent)
    } else if legacy {
        (&NV_MEM_LEGACY, ClientKind::Invalidating)
    } else {
        (&NV_MEM, ClientKind::Invalidating)
    }
}

/// The clients registered with ib_core while the module is loaded, each with its counters.
///
/// # Invariants
///
/// `nc` is registered only beside an invalidating `main` (never with `persistent_api_support=1`
/// in effect, which makes `main` itself the persistent client).
pub(crate) struct Registered {
    /// "nv_mem_nc", where nvidia.ko supports persistent pages. Declared first: unregistered
    /// first.
    _nc: Option<Registration>,
    /// "nv_mem": invalidating, or persistent with `persistent_api_support=1`.
    _main: Registration,
}

impl Registered {
    /// Registers "nv_mem" (see [`nv_mem`]) and, unless it is the persistent client itself,
    /// "nv_mem_nc" where nvidia.ko has persistent pages (`has_persistent`); adds each one's
    /// counters to `stats` first. A failure unregisters what was registered (drop).
    pub(crate) fn register(
        stats: &StatsDir,
        persistent_only: bool,
        has_persistent: bool,
        legacy: bool,
    ) -> Result<Self> {
        let (main, main_kind) = nv_mem(persistent_only, legacy);
        stats.add_client(main_kind, main)?;
        let main = Registration::register(main, main_kind == ClientKind::Invalidating)?;
        let nc = if persistent_only {
            None
        } else if has_persistent {
            stats.add_client(ClientKind::Persistent, &NV_MEM_NC)?;
            Some(Registration::register(&NV_MEM_NC, false)?)
        } else {
            pr_info!("nvidia.ko offers no persistent pages: client nv_mem_nc not registered\n");
            None
        };
        // INVARIANT: `nc` is `None` when `persistent_only`.
        Ok(Self {
            _nc: nc,
            _main: main,
        })
    }
}
