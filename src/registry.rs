// SPDX-License-Identifier: GPL-2.0

//! The live registrations, by id. The id is what ib_core holds as `client_context` and what
//! NVIDIA passes back to our free callback: never a pointer, so a stale or foreign value is
//! refused instead of dereferenced.
//!
//! Two maps hold references: `contexts` for ib_core (from `acquire` to `release`) and `armed`
//! for NVIDIA (from arming a pin's free callback until the callback runs, or until the pin was
//! released from the process that made it, after which NVIDIA never calls back). A callback
//! that finds no armed entry does nothing.

use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::new_mutex;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNode};
use kernel::sync::{Arc, Mutex};

use crate::registration::Context;

#[pin_data]
pub(crate) struct Registry {
    #[pin]
    contexts: Mutex<RBTree<usize, Arc<Context>>>,
    #[pin]
    armed: Mutex<RBTree<usize, Arc<Context>>>,
    /// Ids are never reused, so a stale id cannot reach a newer registration.
    next_id: AtomicUsize,
}

impl Registry {
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            contexts <- new_mutex!(RBTree::new()),
            armed <- new_mutex!(RBTree::new()),
            next_id: AtomicUsize::new(1),
        })
    }

    pub(crate) fn new_id(&self) -> usize {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn insert(&self, ctx: Arc<Context>) -> Result {
        let node = RBTreeNode::new(ctx.id, ctx, GFP_KERNEL)?;
        self.contexts.lock().insert(node);
        Ok(())
    }

    pub(crate) fn get(&self, id: usize) -> Option<Arc<Context>> {
        self.contexts.lock().get(&id).cloned()
    }

    /// The live registrations, in id order, for the registration view.
    pub(crate) fn snapshot(&self) -> Result<KVec<Arc<Context>>> {
        let contexts = self.contexts.lock();
        let mut out = KVec::new();
        for (_, ctx) in contexts.iter() {
            out.push(ctx.clone(), GFP_KERNEL)?;
        }
        Ok(out)
    }

    pub(crate) fn remove(&self, id: usize) -> Option<Arc<Context>> {
        self.contexts.lock().remove(&id)
    }

    /// Keeps `ctx` alive for NVIDIA's free callback.
    pub(crate) fn arm(&self, ctx: Arc<Context>) -> Result {
        let node = RBTreeNode::new(ctx.id, ctx, GFP_KERNEL)?;
        self.armed.lock().insert(node);
        Ok(())
    }

    /// Drops the callback's reference; returns it to a callback that runs.
    pub(crate) fn disarm(&self, id: usize) -> Option<Arc<Context>> {
        self.armed.lock().remove(&id)
    }
}
