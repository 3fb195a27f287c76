/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The NVIDIA peer-to-peer ABI as exported by nvidia.ko, declared from the
 * layout description in shared/REFERENCE.md section 2 and checked against
 * NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv-p2p.h (515.43.04,
 * 535.43.02, 570.211.01, 580.65.06, 595.45.04). Only the test double uses
 * this header; the module under test declares the ABI on its own.
 */
#ifndef FAKE_NVIDIA_NV_P2P_ABI_H
#define FAKE_NVIDIA_NV_P2P_ABI_H

#include <linux/types.h>

#ifndef FNV_GEN
#error "FNV_GEN (470, 515, 535 or 580) comes from the Kbuild FLAVOUR"
#endif

struct pci_dev;

/*
 * A version word is (major << 16) | minor. nv-p2p.h of 580.65.06 and later
 * moved the page table to 0x00020000 and appended "flags"; 515-575 have
 * 0x00010002. No public source shows the pre-515 value: r470 keeps
 * 0x00010002 (the layout with gpu_uuid).
 */
#if FNV_GEN >= 580
#define NVIDIA_P2P_PAGE_TABLE_VERSION	0x00020000u
#else
#define NVIDIA_P2P_PAGE_TABLE_VERSION	0x00010002u
#endif
#define NVIDIA_P2P_DMA_MAPPING_VERSION	0x00020003u

/* nv-p2p.h (580+): page table flag bit 0 = memory is CPU-cacheable. */
#define NVIDIA_P2P_PAGE_TABLE_FLAGS_CPU_CACHEABLE	0x1u

/* nv-p2p.h (570+): flags of nvidia_p2p_get_pages_persistent(). */
#define NVIDIA_P2P_FLAGS_DEFAULT		0u
#define NVIDIA_P2P_FLAGS_FORCE_BAR1_MAPPING	1u

enum nvidia_p2p_page_size_type {
	NVIDIA_P2P_PAGE_SIZE_4KB = 0,
	NVIDIA_P2P_PAGE_SIZE_64KB = 1,
	NVIDIA_P2P_PAGE_SIZE_128KB = 2,
	NVIDIA_P2P_PAGE_SIZE_COUNT
};

struct nvidia_p2p_page {
	u64 physical_address;
	union {
		struct {
			u32 wreqmb_h;
			u32 rreqmb_h;
			u32 rreqmb_0;
			u32 reserved[3];
		} fermi;
	} registers;
};

struct nvidia_p2p_page_table {
	u32 version;
	u32 page_size;			/* enum nvidia_p2p_page_size_type */
	struct nvidia_p2p_page **pages;
	u32 entries;
	u8 *gpu_uuid;			/* 16 bytes */
#if FNV_GEN >= 580
	u32 flags;			/* NVIDIA_P2P_PAGE_TABLE_FLAGS_* */
#endif
};

struct nvidia_p2p_dma_mapping {
	u32 version;
	enum nvidia_p2p_page_size_type page_size_type;
	u32 entries;
	u64 *dma_addresses;
	void *private;
	struct pci_dev *pci_dev;
};

int nvidia_p2p_get_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 u64 length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data);
int nvidia_p2p_put_pages(u64 p2p_token, u32 va_space, u64 virtual_address,
			 struct nvidia_p2p_page_table *page_table);
int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping);
int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping);
int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping);

#if FNV_GEN >= 535
int nvidia_p2p_get_pages_persistent(u64 virtual_address, u64 length,
				    struct nvidia_p2p_page_table **page_table,
				    u32 flags);
int nvidia_p2p_put_pages_persistent(u64 virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    u32 flags);
#endif

#if FNV_GEN == 515
extern int nvidia_p2p_cap_persistent_pages;
#endif

#endif /* FAKE_NVIDIA_NV_P2P_ABI_H */
