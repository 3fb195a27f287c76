// SPDX-License-Identifier: GPL-2.0

//! nv_peer_mem: lets RDMA NICs register and DMA to NVIDIA GPU memory (GPUDirect RDMA) by
//! connecting MLNX_OFED's PeerDirect API in `ib_core` to the P2P API of `nvidia.ko`.

use kernel::prelude::*;

mod client_kind;
mod client_ops;
mod clients;
mod compat;
mod globals;
mod glue;
mod module_ref;
mod nv_p2p;
mod params;
mod peer_mem;
mod peer_modules;
mod registration;
mod registrations_view;
mod registry;
mod sg;
mod slots;
mod stats;

use clients::Registered;
use globals::Published;
use nv_p2p::PersistentSupport;
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

/// The loaded module. Fields drop in order: the view first, then the clients (unregistering
/// waits until ib_core has released every registration of a client), the counters, and last
/// the state the entry points reach, when nothing can call in any more.
struct NvPeerMem {
    /// `/sys/kernel/debug/nv_peer_mem/registrations`.
    _view: registrations_view::View,
    _clients: Registered,
    /// `/sys/module/nv_peer_mem/stats/`.
    _stats: StatsDir,
    _globals: Published,
}

impl kernel::Module for NvPeerMem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        peer_modules::refuse_beside_nvidia_peermem()?;
        let persistent = PersistentSupport::probe();
        let has_persistent = persistent.available();
        if params::persistent_only() && !has_persistent {
            pr_warn!("persistent_api_support=1 but nvidia.ko offers no persistent pages: registering the invalidating nv_mem instead\n");
        }
        let globals = Published::new(persistent, params::persistent_only())?;
        let persistent_only = globals.persistent_only();
        let stats = StatsDir::create()?;
        let legacy = params::legacy_peerdirect();
        let clients = Registered::register(&stats, persistent_only, has_persistent, legacy)?;
        let view = registrations_view::View::create();
        pr_info!(
            "loaded, version {} ({} PeerDirect registration{})\n",
            clients::VERSION,
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
        Ok(Self {
            _view: view,
            _clients: clients,
            _stats: stats,
            _globals: globals,
        })
    }
}
