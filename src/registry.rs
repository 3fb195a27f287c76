// SPDX-License-Identifier: GPL-2.0

//! The live registrations, by the id ib_core knows them as (its `client_context`).

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::xarray::{AllocKind, XArray};

use crate::context::Context;

#[pin_data]
pub(crate) struct Registry {
    #[pin]
    contexts: XArray<Arc<Context>>,
    /// Ids are never reused, so a stale id from ib_core cannot reach a newer registration.
    next_id: AtomicUsize,
}

impl Registry {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            contexts <- XArray::new(AllocKind::Alloc),
            next_id: AtomicUsize::new(1),
        })
    }

    pub(crate) fn insert(&self, ctx: Arc<Context>) -> Result<usize> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.contexts.lock().store(id, ctx, GFP_KERNEL)?;
        Ok(id)
    }

    pub(crate) fn get(&self, id: usize) -> Option<Arc<Context>> {
        self.contexts.lock().get(id).map(Arc::from)
    }

    pub(crate) fn remove(&self, id: usize) -> Option<Arc<Context>> {
        self.contexts.lock().remove(id)
    }
}
