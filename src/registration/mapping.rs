// SPDX-License-Identifier: GPL-2.0

//! DMA-mapping a registration's pinned pages for the NIC (ib_core's `dma_map` and `dma_unmap`),
//! under the rules in `context.rs`.

use core::ffi::{c_int, c_void};
use kernel::prelude::*;
use kernel::sync::Arc;

use super::{Context, Mapping, Phase};
use crate::nv_p2p::{DmaMapping, GPU_PAGE_SIZE};
use crate::sg::SgCopy;
use crate::stats::{count, Counter};

impl Context {
    /// Maps the pinned pages for `peer` and gives ib_core's `core_sgt` the sg list (ib_core's
    /// `dma_map`). Returns the number of entries.
    ///
    /// # Safety
    ///
    /// `peer` must be a valid PCI device and `core_sgt` ib_core's empty table for this
    /// registration; the device must outlive the mapping.
    pub(crate) unsafe fn dma_map(
        self: &Arc<Self>,
        peer: *mut c_void,
        core_sgt: *mut c_void,
    ) -> Result<c_int> {
        let pin = {
            let mut phase = self.phase.lock();
            match core::mem::replace(&mut *phase, Phase::Mapping) {
                Phase::Pinned(pin) => pin,
                other => {
                    let err = if matches!(other, Phase::Revoked(_)) {
                        count(self.kind, Counter::ErrFreedDuringRegistration);
                        EFAULT
                    } else {
                        count(self.kind, Counter::ErrRefusedContext);
                        pr_err!(
                            "dma_map for va {:#x} in phase {}: refused\n",
                            self.va,
                            other.name()
                        );
                        EINVAL
                    };
                    *phase = other;
                    return Err(err);
                }
            }
        };
        // SAFETY: `peer` is valid (caller); the table was live when the phase said `Pinned`.
        let mapped = unsafe { DmaMapping::map(peer, &pin.table) };
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Revoked(_)) {
            drop(phase);
            if let Ok(dma) = mapped {
                dma.free_revoked();
            }
            pin.table.free_revoked();
            return Err(self.freed_during_registration());
        }
        // One log line per failure: `validate` names what is wrong with NVIDIA's answer itself;
        // a failing NVIDIA call or sg list gets the line below.
        let mut logged = false;
        let made = mapped.and_then(|dma| {
            if let Err(e) = dma.validate(&pin.table) {
                logged = true;
                dma.unmap(&pin.table);
                return Err(e);
            }
            // SAFETY: `core_sgt` is ib_core's table for this registration (caller).
            let sg = unsafe {
                SgCopy::create(
                    core_sgt,
                    dma.dma_addresses(),
                    GPU_PAGE_SIZE,
                    crate::params::coalesce_sg(),
                )
            };
            match sg {
                Ok(sg) => Ok(Mapping {
                    dma,
                    sg,
                    // SAFETY: `peer` is a valid PCI device (caller).
                    nic: unsafe { crate::glue::pci_bdf(peer) },
                }),
                Err(e) => {
                    dma.unmap(&pin.table);
                    Err(e)
                }
            }
        });
        match made {
            Ok(mapping) => {
                let n = mapping.sg.nents();
                *phase = Phase::Mapped(pin, mapping);
                Ok(n)
            }
            Err(e) => {
                *phase = Phase::Pinned(pin);
                count(self.kind, Counter::ErrMapping);
                if !logged {
                    pr_err!(
                        "DMA-mapping GPU memory va={:#x} len={:#x} failed: {:?}\n",
                        self.va,
                        self.len,
                        e
                    );
                }
                Err(e)
            }
        }
    }

    /// Unmaps (ib_core's `dma_unmap`; ib_core is done with the sg list). Refused, with
    /// nothing changed, where nothing is mapped: no core unmaps what it did not map.
    pub(crate) fn dma_unmap(&self) -> Result {
        let mut phase = self.phase.lock();
        match core::mem::replace(&mut *phase, Phase::Acquired) {
            Phase::Mapped(pin, mapping) => {
                mapping.dma.unmap(&pin.table);
                drop(mapping.sg);
                *phase = Phase::Pinned(pin);
            }
            // After the free callback: only the sg list is left, and ib_core hands it back.
            Phase::Revoked(_) => *phase = Phase::Revoked(None),
            other => {
                count(self.kind, Counter::ErrRefusedContext);
                pr_err!(
                    "dma_unmap for va {:#x} in phase {}: refused\n",
                    self.va,
                    other.name()
                );
                *phase = other;
                return Err(EINVAL);
            }
        }
        Ok(())
    }
}
