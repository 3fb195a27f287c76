// SPDX-License-Identifier: GPL-2.0

//! The PeerDirect clients the module can register with ib_core, and which of them is "nv_mem".

use crate::client_kind::ClientKind;
use crate::client_ops;
use crate::peer_mem::PeerMemoryClientEx;

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
