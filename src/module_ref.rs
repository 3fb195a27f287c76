// SPDX-License-Identifier: GPL-2.0

//! References on this module held by live registration contexts.

/// One reference on this module, dropped with its owner.
///
/// Every [`crate::registration::Context`] holds one, so `rmmod` fails with EBUSY not only while
/// ib_core holds a registration but also while NVIDIA's free callback still holds a context
/// that ib_core has already released (the callback runs our code until it returns).
pub(crate) struct ModuleRef(());

impl ModuleRef {
    /// Takes a reference (the module is live: we are running its code).
    pub(crate) fn take() -> Self {
        crate::glue::module_get();
        Self(())
    }
}

impl Drop for ModuleRef {
    fn drop(&mut self) {
        // SAFETY: balances the reference taken in `take`.
        unsafe { crate::glue::module_put() };
    }
}
