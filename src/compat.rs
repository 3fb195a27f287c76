// SPDX-License-Identifier: GPL-2.0

//! What differs between the kernel lines this crate builds on (6.12 LTS and 7.x), in one place.
//! The other difference, `module!`'s `author`/`authors`, is a `cfg` set by `Kbuild`.

use kernel::prelude::*;

/// `EOPNOTSUPP`, which 6.12's `kernel::error::code` lacks.
pub(crate) fn eopnotsupp() -> Error {
    // Linux's errno numbers are ABI: EOPNOTSUPP is 95 on every architecture we build for.
    Error::from_errno(-95)
}
