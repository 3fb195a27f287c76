// SPDX-License-Identifier: GPL-2.0

//! References on this module held by live registrations.

extern "C" {
    fn nvpm_module_get();
    fn nvpm_module_put();
}

/// Takes a reference for a new registration (the module is live: we are running its code).
pub(crate) fn get() {
    // SAFETY: takes a reference on this module, which is loaded.
    unsafe { nvpm_module_get() }
}

/// Drops the reference of a released registration.
pub(crate) fn put() {
    // SAFETY: balances a `get` made when the registration was acquired.
    unsafe { nvpm_module_put() }
}
