// SPDX-License-Identifier: GPL-2.0

//! nv_peer_mem: lets RDMA NICs register and DMA to NVIDIA GPU memory (GPUDirect RDMA) by
//! connecting MLNX_OFED's PeerDirect API in `ib_core` to the P2P API of `nvidia.ko`.

use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;

mod client_kind;
mod client_ops;
mod compat;
mod context;
mod mapping;
mod module_ref;
mod nv_p2p;
mod params;
mod peer_mem;
mod pinning;
mod registration;
mod registrations_view;
mod registry;
mod revoke;
mod sg;
mod slots;
mod stats;

use client_kind::ClientKind;
use nv_p2p::PersistentSupport;
use peer_mem::{PeerMemoryClientEx, Registration};
use registry::Registry;
use stats::StatsDir;

// The `module!` macro took one `author` before Linux 6.13-ish and a list of `authors` since;
// Kbuild tells which (`nvpm_module_authors`).
#[cfg(nvpm_module_authors)]
module! {
    type: NvPeerMem,
    name: "nv_peer_mem",
    authors: ["nv_peer_mem in Rust developers"],
    description: "NVIDIA GPU memory plug-in for MLNX_OFED PeerDirect (GPUDirect RDMA)",
    license: "GPL",
}

#[cfg(not(nvpm_module_authors))]
module! {
    type: NvPeerMem,
    name: "nv_peer_mem",
    author: "nv_peer_mem in Rust developers",
    description: "NVIDIA GPU memory plug-in for MLNX_OFED PeerDirect (GPUDirect RDMA)",
    license: "GPL",
}

/// The version ib_core shows in `/sys/kernel/mm/memory_peers/<client>/version`.
const VERSION: &str = "1.4.0";

static NV_MEM: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem", VERSION, &client_ops::INVALIDATING, true);
static NV_MEM_LEGACY: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem", VERSION, &client_ops::INVALIDATING, false);
static NV_MEM_NC: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem_nc", VERSION, &client_ops::PERSISTENT, false);
static NV_MEM_PERSISTENT: PeerMemoryClientEx =
    PeerMemoryClientEx::new("nv_mem", VERSION, &client_ops::PERSISTENT, false);

/// State the C entry points reach: lives from before the first client registration until
/// after the last client is unregistered.
#[pin_data]
struct Globals {
    #[pin]
    registry: Registry,
    persistent: PersistentSupport,
    /// `persistent_api_support=1` took effect: "nv_mem" is the persistent client.
    persistent_only: bool,
}

static GLOBALS: AtomicPtr<Globals> = AtomicPtr::new(core::ptr::null_mut());

/// The module's state, for entry points called by ib_core or NVIDIA.
fn globals() -> &'static Globals {
    let g = GLOBALS.load(Ordering::Acquire);
    // SAFETY: entry points only run while a client is registered, i.e. between `init` storing
    // the pointer and `Drop` unregistering every client before freeing it.
    unsafe { &*g }
}

/// Whether "nv_mem" is the persistent client (`persistent_api_support=1`).
fn persistent_only() -> bool {
    globals().persistent_only
}

struct NvPeerMem {
    /// `/sys/kernel/debug/nv_peer_mem/registrations`; goes before the clients.
    view: Option<registrations_view::View>,
    /// `/sys/module/nv_peer_mem/stats/`.
    stats: StatsDir,
    /// "nv_mem": invalidating, or persistent with `persistent_api_support=1`.
    main: Option<Registration>,
    /// "nv_mem_nc", where nvidia.ko supports persistent pages.
    nc: Option<Registration>,
    // Owns what `GLOBALS` points to; dropped after the clients are unregistered.
    _globals: Pin<KBox<Globals>>,
}

impl kernel::Module for NvPeerMem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let persistent = PersistentSupport::probe();
        let has_persistent = persistent.available();
        let persistent_only = params::persistent_only() && has_persistent;
        let registry =
            Registry::new().inspect_err(|e| pr_err!("no memory for the registry: {:?}\n", e))?;
        let globals = KBox::pin_init(
            pin_init!(Globals {
                registry <- registry,
                persistent,
                persistent_only,
            }),
            GFP_KERNEL,
        )
        .inspect_err(|e| pr_err!("no memory for the module's state: {:?}\n", e))?;
        GLOBALS.store(
            core::ptr::from_ref::<Globals>(&globals).cast_mut(),
            Ordering::Release,
        );
        let mut this = Self {
            view: None,
            stats: StatsDir::create()?,
            main: None,
            nc: None,
            _globals: globals,
        };

        if params::persistent_only() && !has_persistent {
            pr_warn!("persistent_api_support=1 but nvidia.ko offers no persistent pages: registering the invalidating nv_mem instead\n");
        }
        let legacy = params::legacy_peerdirect();
        let (main, main_kind) = if persistent_only {
            (&NV_MEM_PERSISTENT, ClientKind::Persistent)
        } else if legacy {
            (&NV_MEM_LEGACY, ClientKind::Invalidating)
        } else {
            (&NV_MEM, ClientKind::Invalidating)
        };
        this.stats.add_client(main_kind, main)?;
        this.main = Some(Registration::register(
            main,
            main_kind == ClientKind::Invalidating,
        )?);
        // With persistent_api_support=1, nv_mem itself is the persistent client.
        if !persistent_only {
            if has_persistent {
                this.stats.add_client(ClientKind::Persistent, &NV_MEM_NC)?;
                this.nc = Some(Registration::register(&NV_MEM_NC, false)?);
            } else {
                pr_info!("nvidia.ko offers no persistent pages: client nv_mem_nc not registered\n");
            }
        }
        this.view = Some(registrations_view::View::create());
        pr_info!(
            "loaded, version {} ({} PeerDirect registration{})\n",
            VERSION,
            if legacy {
                "legacy"
            } else {
                "extended; MLNX_OFED 4.9 needs peerdirect_support=1"
            },
            if persistent_only {
                ", persistent nv_mem"
            } else {
                ""
            }
        );
        Ok(this)
    }
}

impl Drop for NvPeerMem {
    fn drop(&mut self) {
        drop(self.view.take());
        // Unregistering waits until ib_core has released every registration of the client.
        drop(self.nc.take());
        drop(self.main.take());
        // Nothing can call in any more; `globals` is freed after this.
        GLOBALS.store(core::ptr::null_mut(), Ordering::Release);
    }
}
