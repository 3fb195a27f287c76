// SPDX-License-Identifier: GPL-2.0

//! The live registrations, by the id ib_core knows them as (its `client_context`).

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::sync::{Arc, Mutex};

use crate::context::Context;

#[pin_data]
pub(crate) struct Registry {
    #[pin]
    contexts: Mutex<RBTree<usize, Arc<Context>>>,
    /// Ids are never reused, so a stale id from ib_core cannot reach a newer registration.
    next_id: AtomicUsize,
}

impl Registry {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            contexts <- new_mutex!(RBTree::new()),
            next_id: AtomicUsize::new(1),
        })
    }

    pub(crate) fn insert(&self, ctx: Arc<Context>) -> Result<usize> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let node = RBTreeNode::new(id, ctx, GFP_KERNEL)?;
        self.contexts.lock().insert(node);
        Ok(id)
    }

    pub(crate) fn get(&self, id: usize) -> Option<Arc<Context>> {
        self.contexts.lock().get(&id).cloned()
    }

    pub(crate) fn remove(&self, id: usize) -> Option<Arc<Context>> {
        self.contexts.lock().remove(&id)
    }
}
