// SPDX-License-Identifier: GPL-2.0

//! Module parameters, declared in `glue.c` so that they appear (and `enable_dbg` can be
//! changed) under `/sys/module/nv_peer_mem/parameters/` like those of the C module.

pub(crate) fn debug_enabled() -> bool {
    crate::glue::param_enable_dbg() != 0
}

/// Register "nv_mem" in the legacy form MLNX_OFED 4.9 understands.
pub(crate) fn legacy_peerdirect() -> bool {
    crate::glue::param_peerdirect_support() == 1
}

/// Register a single persistent client named "nv_mem".
pub(crate) fn persistent_only() -> bool {
    crate::glue::param_persistent_api_support() == 1
}

/// Pin and unpin in `acquire` only to probe, and pin again in `get_pages` (the C modules' way),
/// instead of keeping `acquire`'s pin for the registration.
pub(crate) fn probe_then_pin() -> bool {
    crate::glue::param_probe_then_pin() == 1
}

/// Merge DMA-contiguous pages into one sg entry. Auto (-1) means on, except in legacy mode:
/// MLNX_OFED 4.9 counts registered bytes as entries times the page size.
pub(crate) fn coalesce_sg() -> bool {
    match crate::glue::param_coalesce_sg() {
        0 => false,
        1 => true,
        _ => !legacy_peerdirect(),
    }
}

/// `pr_info!` only while `enable_dbg` is set.
#[macro_export]
macro_rules! dbg_log {
    ($($arg:tt)*) => {
        if $crate::params::debug_enabled() {
            ::kernel::pr_info!($($arg)*);
        }
    };
}
