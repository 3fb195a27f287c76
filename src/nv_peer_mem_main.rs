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

use client_kind::ClientKind;
use globals::Published;
use nv_p2p::PersistentSupport;
use peer_mem::Registration;
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

struct NvPeerMem {
    /// `/sys/kernel/debug/nv_peer_mem/registrations`; goes before the clients.
    view: Option<registrations_view::View>,
    /// `/sys/module/nv_peer_mem/stats/`.
    stats: StatsDir,
    /// "nv_mem": invalidating, or persistent with `persistent_api_support=1`.
    main: Option<Registration>,
    /// "nv_mem_nc", where nvidia.ko supports persistent pages.
    nc: Option<Registration>,
    /// The state the entry points reach; dropped after the clients are unregistered.
    _globals: Published,
}

impl kernel::Module for NvPeerMem {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        peer_modules::refuse_beside_nvidia_peermem()?;
        let persistent = PersistentSupport::probe();
        let has_persistent = persistent.available();
        let globals = Published::new(persistent, params::persistent_only())?;
        let persistent_only = globals.persistent_only();
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
        let (main, main_kind) = clients::nv_mem(persistent_only, legacy);
        this.stats.add_client(main_kind, main)?;
        this.main = Some(Registration::register(
            main,
            main_kind == ClientKind::Invalidating,
        )?);
        // With persistent_api_support=1, nv_mem itself is the persistent client.
        if !persistent_only {
            if has_persistent {
                this.stats
                    .add_client(ClientKind::Persistent, &clients::NV_MEM_NC)?;
                this.nc = Some(Registration::register(&clients::NV_MEM_NC, false)?);
            } else {
                pr_info!("nvidia.ko offers no persistent pages: client nv_mem_nc not registered\n");
            }
        }
        this.view = Some(registrations_view::View::create());
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
        Ok(this)
    }
}

impl Drop for NvPeerMem {
    fn drop(&mut self) {
        drop(self.view.take());
        // Unregistering waits until ib_core has released every registration of the client.
        drop(self.nc.take());
        drop(self.main.take());
        // Nothing can call in any more: `_globals` is taken back and freed after this.
    }
}
