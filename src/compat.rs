// SPDX-License-Identifier: GPL-2.0

//! What differs between the kernel lines this crate builds on (6.12 LTS and 7.x), in one place.
//! The other difference, `module!`'s `author`/`authors`, is a `cfg` set by `Kbuild`.
//!
//! # When 6.12 support is dropped
//!
//! What goes:
//! - this file's [`eopnotsupp`] and [`enotsupp`] (7.x's `kernel::error::code` has both);
//! - the `nvpm_module_authors` cfg (`Kbuild`, `nv_peer_mem_main.rs`): `authors` only;
//! - C glue that 7.3's kernel crate replaces: the debugfs file (`debugfs_view.c`, by
//!   `kernel::debugfs::Dir`), `nvpm_dev_to_pci` (by `pci::Device`'s
//!   `TryFrom<&device::Device>`), `nvpm_current_tgid` (by `Task::tgid()`) and `nvpm_now_ns`
//!   (by `time::Instant`).
//!
//! What stays C, and why (7.3's kernel crate has no safe way to say it):
//! - the module parameters: `module!` parameters are read-only and absent from sysfs, and
//!   `enable_dbg`, `probe_then_pin` and `coalesce_sg` are changed at run time, each through a
//!   setter that refuses a bad value with a log line;
//! - the sysfs counters (`stats_sysfs.c`): a kobject with attribute files under
//!   `/sys/module/nv_peer_mem/`, which the kernel crate does not build;
//! - the sg entries (`glue.c`'s `nvpm_sg_*`): each entry's DMA address is a BAR address NVIDIA
//!   mapped, with no `struct page` behind it, which the kernel crate's scatterlist types cannot
//!   describe;
//! - the weak references to nvidia.ko's optional symbols (`nvidia_p2p_get_pages_persistent`
//!   and friends, absent before R535): Rust has no stable weak linkage.

use kernel::bindings;
use kernel::prelude::*;

/// `EOPNOTSUPP`, which 6.12's `kernel::error::code` lacks.
pub(crate) fn eopnotsupp() -> Error {
    // The number comes from the kernel's own `errno.h`, through `bindings`, on either line.
    Error::from_errno(-(bindings::EOPNOTSUPP as i32))
}

/// `ENOTSUPP` (524), the kernel-internal "not supported" that NVIDIA's P2P calls return; 6.12's
/// `kernel::error::code` lacks it too.
pub(crate) fn enotsupp() -> Error {
    Error::from_errno(-(bindings::ENOTSUPP as i32))
}
