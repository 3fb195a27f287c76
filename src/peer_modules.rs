// SPDX-License-Identifier: GPL-2.0

//! The other peer client modules nv_peer_mem must not run beside.

use core::ffi::CStr;
use kernel::error::code::EBUSY;
use kernel::prelude::*;

/// NVIDIA's own peer client module (the driver's `nvidia-peermem`), which registers a
/// PeerDirect client named "nv_mem" with ib_core, as nv_peer_mem does.
const NVIDIA_PEERMEM: &CStr = c"nvidia_peermem";

/// Refuses the load while nvidia_peermem is loaded.
///
/// ib_core would hold two clients named "nv_mem" and give each registration of GPU memory to
/// whichever it asks first: which module pins it, and which counters and invalidation path
/// apply, would depend on the order the two were loaded in. The other way round (nvidia_peermem
/// loaded after nv_peer_mem) is outside this module's reach: the service and the doctor report
/// it.
pub(crate) fn refuse_beside_nvidia_peermem() -> Result {
    if crate::glue::module_loaded(NVIDIA_PEERMEM) {
        pr_err!("nvidia_peermem is loaded and registers nv_mem with ib_core too: not loading beside it (EBUSY); unload it first (rmmod nvidia_peermem), or keep it and leave nv_peer_mem out\n");
        return Err(EBUSY);
    }
    Ok(())
}
