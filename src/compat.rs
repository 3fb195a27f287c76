// SPDX-License-Identifier: GPL-2.0

//! What differs between the kernel lines this crate builds on (6.12 LTS and 7.x), in one place.
//! The other difference, `module!`'s `author`/`authors`, is a `cfg` set by `Kbuild`.

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
