// SPDX-License-Identifier: GPL-2.0

//! The module's state that its C entry points reach: the client operations ib_core calls
//! (`client_ops.rs`), NVIDIA's free callback (`registration/revoke.rs`) and the debugfs view
//! (`registrations_view.rs`). Module init publishes it before it registers a client or makes
//! the view; exit takes it back after the view is gone and every client is unregistered.
//!
//! Only the entry points fetch it ([`globals`]); the code they call is handed what it needs.

use core::ptr::null_mut;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;

use crate::nv_p2p::PersistentSupport;
use crate::registry::Registry;

/// State the C entry points reach.
///
/// # Invariants
///
/// `persistent_only` is set only where `persistent` is available.
#[pin_data]
pub(crate) struct Globals {
    #[pin]
    registry: Registry,
    persistent: PersistentSupport,
    persistent_only: bool,
}

impl Globals {
    /// The live registrations, by the id ib_core and NVIDIA call in with.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// What nvidia.ko offers for pins without a free callback.
    pub(crate) fn persistent(&self) -> &PersistentSupport {
        &self.persistent
    }

    /// `persistent_api_support=1` took effect: "nv_mem" is the persistent client.
    pub(crate) fn persistent_only(&self) -> bool {
        self.persistent_only
    }
}

/// The published state, or null while there is none.
static GLOBALS: AtomicPtr<Globals> = AtomicPtr::new(null_mut());

/// The owner of the published state: dropping it takes the state back, then frees it.
///
/// # Invariants
///
/// `GLOBALS` points to the `Globals` in `self.0`, which is pinned and so stays where it is,
/// from the creation of `self` until its drop.
pub(crate) struct Published(Pin<KBox<Globals>>);

impl Published {
    /// Makes the state and publishes it. `persistent_only` (the parameter asking for it) takes
    /// effect only where `persistent` is available. Fails with EBUSY while another is published.
    pub(crate) fn new(persistent: PersistentSupport, persistent_only: bool) -> Result<Self> {
        let persistent_only = persistent_only && persistent.available();
        let registry =
            Registry::new().inspect_err(|e| pr_err!("no memory for the registry: {:?}\n", e))?;
        // INVARIANT: `persistent_only` was and-ed with `persistent.available()` above.
        let globals = KBox::pin_init(
            pin_init!(Globals {
                registry <- registry,
                persistent,
                persistent_only,
            }),
            GFP_KERNEL,
        )
        .inspect_err(|e| pr_err!("no memory for the module's state: {:?}\n", e))?;
        let ptr = core::ptr::from_ref::<Globals>(&globals).cast_mut();
        // INVARIANT: from here until `drop`, `GLOBALS` points to the pinned box `Self` owns.
        GLOBALS
            .compare_exchange(null_mut(), ptr, Ordering::Release, Ordering::Relaxed)
            .map_err(|_| EBUSY)?;
        Ok(Self(globals))
    }

    /// Whether "nv_mem" is the persistent client.
    pub(crate) fn persistent_only(&self) -> bool {
        self.0.persistent_only()
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        // The box is freed after this, once no entry point can run (`globals`).
        GLOBALS.store(null_mut(), Ordering::Release);
    }
}

/// The published state, for the module's C entry points.
///
/// # Safety
///
/// The caller must be one of those entry points, and use the reference only until it returns:
/// a client operation ib_core calls while the client is registered, NVIDIA's free callback for
/// an armed pin (whose context, kept by the registry until the callback, holds a reference on
/// this module), or the debugfs view's `show`. Module exit removes the view (waiting for
/// readers) and unregisters every client (waiting until ib_core has released their
/// registrations) before it drops the [`Published`] state.
pub(crate) unsafe fn globals() -> &'static Globals {
    let g = GLOBALS.load(Ordering::Acquire);
    // SAFETY: the caller runs while the state is published, so by `Published`'s invariant `g`
    // points to its pinned `Globals`, which lives until after the caller returns.
    unsafe { &*g }
}
