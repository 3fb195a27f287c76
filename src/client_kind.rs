// SPDX-License-Identifier: GPL-2.0

//! The two clients the module registers with ib_core, as every registration and counter names
//! them.

/// Which client a registration belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientKind {
    /// "nv_mem": pins with a free callback and invalidates through ib_core.
    Invalidating,
    /// "nv_mem_nc" (or "nv_mem" with persistent_api_support=1): pins that never go away.
    Persistent,
}
