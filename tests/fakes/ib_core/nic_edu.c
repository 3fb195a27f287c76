// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: QEMU "edu" PCI devices (1234:11e8) as RDMA NICs.
 *
 * The edu DMA engine (QEMU hw/misc/edu.c) copies between a bus address and
 * its private 4 KiB buffer, which lives at device address 0x40000 and is
 * not reachable through MMIO:
 *   BAR0 + 0x80  source address (64 bit)
 *   BAR0 + 0x88  destination address (64 bit)
 *   BAR0 + 0x90  byte count (64 bit)
 *   BAR0 + 0x98  command: bit 0 start/busy, bit 1 direction (1: edu buffer
 *                to bus address, 0: bus address to edu buffer), bit 2 irq
 * A transfer completes about 100 ms (virtual time) after the start; the
 * registers are read-only while bit 0 is set.  QEMU 7.2 aborts the whole VM
 * on a transfer that touches or ends at the end of the buffer, so transfers
 * here stay well inside it.  A NIC-side "read" is bus address -> edu buffer
 * -> a coherent host buffer; a "write" is the reverse.
 */
#include "fake_ib_core.h"

#include <linux/delay.h>
#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/io.h>
#include <linux/iommu.h>
#include <linux/jiffies.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/string.h>

#define EDU_VENDOR_ID 0x1234
#define EDU_DEVICE_ID 0x11e8

#define EDU_REG_ID 0x00
#define EDU_REG_DMA_SRC 0x80
#define EDU_REG_DMA_DST 0x88
#define EDU_REG_DMA_CNT 0x90
#define EDU_REG_DMA_CMD 0x98
#define EDU_CMD_RUN 0x1
#define EDU_CMD_TO_BUS 0x2

#define EDU_BUF_ADDR 0x40000ULL
#define EDU_XFER_MAX 2048
#define EDU_TIMEOUT_MS 5000

struct fake_nic {
	struct list_head node;
	struct pci_dev *pdev;
	void __iomem *regs;
	char name[16];
	struct mutex lock; /* one DMA program at a time; protects buf */
	void *buf;
	dma_addr_t buf_dma;
	struct device *ibdev; /* /sys/class/infiniband/<name> */
};

static DEFINE_MUTEX(fake_nics_lock);
static LIST_HEAD(fake_nics);
static int fake_nic_count;
/*
 * /sys/class/infiniband/<name>, whose "device" link leads to the PCI function: how ib_core
 * shows RDMA devices (drivers/infiniband/core/device.c, ib_class) and how tools such as
 * ibv_devices and nv_peer_mem's doctor find the NICs.
 */
static struct class *fake_ib_class;

struct device *fake_none_dev;
static struct platform_device *fake_none_pdev;

struct fake_nic *fake_nic_get(const char *name)
{
	struct fake_nic *nic, *found = NULL;

	mutex_lock(&fake_nics_lock);
	list_for_each_entry(nic, &fake_nics, node) {
		if (!name || !name[0] || !strcmp(nic->name, name)) {
			get_device(&nic->pdev->dev);
			found = nic;
			break;
		}
	}
	mutex_unlock(&fake_nics_lock);
	return found;
}

/*
 * The NIC structure itself lives until the driver unbinds, which only
 * happens at module unload (bind attributes are suppressed), after every
 * registration is gone.
 */
void fake_nic_put(struct fake_nic *nic)
{
	put_device(&nic->pdev->dev);
}

struct device *fake_nic_device(struct fake_nic *nic)
{
	return &nic->pdev->dev;
}

const char *fake_nic_name(struct fake_nic *nic)
{
	return nic->name;
}

static int edu_wait_idle(struct fake_nic *nic)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(EDU_TIMEOUT_MS);

	while (readq(nic->regs + EDU_REG_DMA_CMD) & EDU_CMD_RUN) {
		if (time_after(jiffies, deadline))
			return -ETIMEDOUT;
		msleep(10);
	}
	return 0;
}

static int edu_xfer(struct fake_nic *nic, u64 src, u64 dst, u64 cnt, bool to_bus)
{
	int ret;

	lockdep_assert_held(&nic->lock);

	ret = edu_wait_idle(nic);
	if (ret) {
		pr_err("%s: DMA engine stuck busy\n", nic->name);
		return ret;
	}
	writeq(src, nic->regs + EDU_REG_DMA_SRC);
	writeq(dst, nic->regs + EDU_REG_DMA_DST);
	writeq(cnt, nic->regs + EDU_REG_DMA_CNT);
	writeq(EDU_CMD_RUN | (to_bus ? EDU_CMD_TO_BUS : 0),
	       nic->regs + EDU_REG_DMA_CMD);
	ret = edu_wait_idle(nic);
	if (ret)
		pr_err("%s: DMA 0x%llx -> 0x%llx (0x%llx bytes) timed out\n",
		       nic->name, src, dst, cnt);
	return ret;
}

/* Bus address of byte voff of the segment list, and how many contiguous
 * bytes follow it (merging adjacent segments). */
static int seg_find(const struct fake_seg *segs, int nsegs, u64 voff,
		    dma_addr_t *dma, u64 *avail)
{
	u64 base = 0;
	int i, j;

	for (i = 0; i < nsegs; i++) {
		if (voff < base + segs[i].len) {
			*dma = segs[i].dma + (voff - base);
			*avail = segs[i].len - (voff - base);
			for (j = i + 1; j < nsegs &&
			     segs[j].dma == segs[j - 1].dma + segs[j - 1].len; j++)
				*avail += segs[j].len;
			return 0;
		}
		base += segs[i].len;
	}
	return -EINVAL;
}

int fake_nic_read(struct fake_nic *nic, const struct fake_seg *segs, int nsegs,
		  u64 voff, void *out, size_t len)
{
	size_t done = 0;
	int ret = 0;

	if (len > FAKE_DMA_BUF_SIZE)
		return -EINVAL;

	mutex_lock(&nic->lock);
	while (done < len) {
		size_t fill = 0;

		/* Gather up to EDU_XFER_MAX bytes into the edu buffer ... */
		while (fill < EDU_XFER_MAX && done + fill < len) {
			dma_addr_t dma;
			u64 avail, piece;

			ret = seg_find(segs, nsegs, voff + done + fill, &dma, &avail);
			if (ret)
				goto out;
			piece = min3(avail, (u64)(EDU_XFER_MAX - fill),
				     (u64)(len - done - fill));
			ret = edu_xfer(nic, dma, EDU_BUF_ADDR + fill, piece, false);
			if (ret)
				goto out;
			fill += piece;
		}
		/* ... then hand it to the host buffer. */
		ret = edu_xfer(nic, EDU_BUF_ADDR, nic->buf_dma + done, fill, true);
		if (ret)
			goto out;
		done += fill;
	}
	dma_rmb();
	memcpy(out, nic->buf, len);
out:
	mutex_unlock(&nic->lock);
	return ret;
}

int fake_nic_write(struct fake_nic *nic, const struct fake_seg *segs, int nsegs,
		   u64 voff, const void *in, size_t len)
{
	size_t done = 0;
	int ret = 0;

	if (len > FAKE_DMA_BUF_SIZE)
		return -EINVAL;

	mutex_lock(&nic->lock);
	memcpy(nic->buf, in, len);
	dma_wmb();
	while (done < len) {
		size_t chunk = min_t(size_t, EDU_XFER_MAX, len - done);
		size_t fill = 0;

		ret = edu_xfer(nic, nic->buf_dma + done, EDU_BUF_ADDR, chunk, false);
		if (ret)
			goto out;
		while (fill < chunk) {
			dma_addr_t dma;
			u64 avail, piece;

			ret = seg_find(segs, nsegs, voff + done + fill, &dma, &avail);
			if (ret)
				goto out;
			piece = min_t(u64, avail, chunk - fill);
			ret = edu_xfer(nic, EDU_BUF_ADDR + fill, dma, piece, true);
			if (ret)
				goto out;
			fill += piece;
		}
		done += chunk;
	}
out:
	mutex_unlock(&nic->lock);
	return ret;
}

/* DMA a coherent buffer through the edu both ways and compare. */
int fake_nic_selftest(const char *name)
{
	const size_t size = FAKE_DMA_BUF_SIZE;
	struct fake_nic *nic;
	struct fake_seg seg;
	dma_addr_t tdma;
	u8 *target, *tmp;
	int ret = 0;
	size_t i;

	nic = fake_nic_get(name);
	if (!nic) {
		pr_err("selftest: no NIC %s\n", name && name[0] ? name : "at all");
		return -ENODEV;
	}
	tmp = kmalloc(size, GFP_KERNEL);
	target = dma_alloc_coherent(&nic->pdev->dev, size, &tdma, GFP_KERNEL);
	if (!tmp || !target) {
		ret = -ENOMEM;
		goto out;
	}
	seg.dma = tdma;
	seg.len = size;

	/* NIC reads host memory. */
	for (i = 0; i < size; i++)
		target[i] = (u8)(i * 7 + 3);
	memset(tmp, 0, size);
	ret = fake_nic_read(nic, &seg, 1, 0, tmp, size);
	if (!ret && memcmp(tmp, target, size)) {
		pr_err("selftest %s: full read returned wrong data\n", nic->name);
		ret = -EIO;
	}
	/* Unaligned part. */
	if (!ret) {
		memset(tmp, 0, size);
		ret = fake_nic_read(nic, &seg, 1, 100, tmp, 3000);
		if (!ret && memcmp(tmp, target + 100, 3000)) {
			pr_err("selftest %s: partial read returned wrong data\n",
			       nic->name);
			ret = -EIO;
		}
	}
	/* NIC writes host memory. */
	if (!ret) {
		for (i = 0; i < size; i++)
			tmp[i] = (u8)(i * 13 + 1);
		ret = fake_nic_write(nic, &seg, 1, 0, tmp, size);
		if (!ret && memcmp(tmp, target, size)) {
			pr_err("selftest %s: write stored wrong data\n", nic->name);
			ret = -EIO;
		}
	}
	if (!ret)
		pr_info("selftest %s: DMA read and write ok\n", nic->name);
	else
		pr_err("selftest %s: failed (%d)\n", nic->name, ret);
out:
	if (target)
		dma_free_coherent(&nic->pdev->dev, size, target, tdma);
	kfree(tmp);
	fake_nic_put(nic);
	return ret;
}

/*
 * The harness's own test (tests/canaries/): the NIC reads 64 bytes from a bus address its IOMMU
 * domain does not map, as a NIC would with a stale or never-mapped address in its sg list. The
 * IOMMU refuses the read and its driver reports the fault ("DMAR: DRHD: handling fault status
 * reg", "DMAR: [DMA Read NO_PASID] Request device [...] fault addr ..."), from its fault
 * interrupt, soon after the transfer. Refused where the address does translate (an identity
 * domain, or something mapped there).
 */
#define FAKE_CANARY_IOVA 0x100000ULL

int fake_nic_canary_dmar_fault(const char *name)
{
	struct iommu_domain *domain;
	struct fake_nic *nic;
	int ret;

	nic = fake_nic_get(name);
	if (!nic) {
		pr_err("canary: no NIC %s\n", name && name[0] ? name : "at all");
		return -ENODEV;
	}
	domain = iommu_get_domain_for_dev(&nic->pdev->dev);
	if (!domain || (domain->type != IOMMU_DOMAIN_DMA && domain->type != IOMMU_DOMAIN_DMA_FQ) ||
	    iommu_iova_to_phys(domain, FAKE_CANARY_IOVA)) {
		pr_err("canary: %s: bus address 0x%llx is not an untranslated one here\n", nic->name,
		       FAKE_CANARY_IOVA);
		fake_nic_put(nic);
		return -EBUSY;
	}
	pr_info("canary: %s reads 64 bytes at bus address 0x%llx, which nothing mapped\n",
		nic->name, FAKE_CANARY_IOVA);
	mutex_lock(&nic->lock);
	ret = edu_xfer(nic, FAKE_CANARY_IOVA, EDU_BUF_ADDR, 64, false);
	mutex_unlock(&nic->lock);
	fake_nic_put(nic);
	return ret;
}

static int fake_edu_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct fake_nic *nic;
	int ret;

	ret = pcim_enable_device(pdev);
	if (ret) {
		pr_err("%s: cannot enable (%d)\n", pci_name(pdev), ret);
		return ret;
	}
	nic = devm_kzalloc(&pdev->dev, sizeof(*nic), GFP_KERNEL);
	if (!nic)
		return -ENOMEM;
	nic->pdev = pdev;
	nic->regs = pcim_iomap_region(pdev, 0, KBUILD_MODNAME);
	if (IS_ERR(nic->regs)) {
		pr_err("%s: cannot map BAR 0 (%ld)\n", pci_name(pdev),
		       PTR_ERR(nic->regs));
		return PTR_ERR(nic->regs);
	}
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		pr_err("%s: no 64-bit DMA (%d)\n", pci_name(pdev), ret);
		return ret;
	}
	pci_set_master(pdev);
	nic->buf = dmam_alloc_coherent(&pdev->dev, FAKE_DMA_BUF_SIZE,
				       &nic->buf_dma, GFP_KERNEL);
	if (!nic->buf)
		return -ENOMEM;
	mutex_init(&nic->lock);

	mutex_lock(&fake_nics_lock);
	snprintf(nic->name, sizeof(nic->name), "edu%d", fake_nic_count++);
	list_add_tail(&nic->node, &fake_nics);
	mutex_unlock(&fake_nics_lock);
	pci_set_drvdata(pdev, nic);
	nic->ibdev = device_create(fake_ib_class, &pdev->dev, MKDEV(0, 0), nic, "%s", nic->name);
	if (IS_ERR(nic->ibdev)) {
		pr_err("%s: cannot create /sys/class/infiniband/%s (%ld)\n", pci_name(pdev),
		       nic->name, PTR_ERR(nic->ibdev));
		nic->ibdev = NULL;
	}

	pr_info("%s: edu at %s (id 0x%08x)\n", nic->name, pci_name(pdev),
		readl(nic->regs + EDU_REG_ID));
	return 0;
}

static void fake_edu_remove(struct pci_dev *pdev)
{
	struct fake_nic *nic = pci_get_drvdata(pdev);

	if (nic->ibdev)
		device_unregister(nic->ibdev);
	mutex_lock(&fake_nics_lock);
	list_del(&nic->node);
	mutex_unlock(&fake_nics_lock);
	mutex_lock(&nic->lock);
	edu_wait_idle(nic);
	mutex_unlock(&nic->lock);
	mutex_destroy(&nic->lock);
}

static const struct pci_device_id fake_edu_ids[] = {
	{ PCI_DEVICE(EDU_VENDOR_ID, EDU_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, fake_edu_ids);

static struct pci_driver fake_edu_driver = {
	.name = "fake_ib_core_edu",
	.id_table = fake_edu_ids,
	.probe = fake_edu_probe,
	.remove = fake_edu_remove,
	.driver = {
		.suppress_bind_attrs = true,
	},
};

int fake_nic_init(void)
{
	struct platform_device_info info = {
		.name = "fake_ib_core_none",
		.id = PLATFORM_DEVID_NONE,
		.dma_mask = DMA_BIT_MASK(64),
	};
	int ret;

	fake_none_pdev = platform_device_register_full(&info);
	if (IS_ERR(fake_none_pdev)) {
		ret = PTR_ERR(fake_none_pdev);
		pr_err("cannot create the \"none\" platform device (%d)\n", ret);
		fake_none_pdev = NULL;
		return ret;
	}
	fake_none_dev = &fake_none_pdev->dev;

	fake_ib_class = class_create("infiniband");
	if (IS_ERR(fake_ib_class)) {
		ret = PTR_ERR(fake_ib_class);
		pr_err("cannot create the infiniband class (%d)\n", ret);
		fake_ib_class = NULL;
		platform_device_unregister(fake_none_pdev);
		fake_none_pdev = NULL;
		fake_none_dev = NULL;
		return ret;
	}
	ret = pci_register_driver(&fake_edu_driver);
	if (ret) {
		pr_err("cannot register the edu driver (%d)\n", ret);
		class_destroy(fake_ib_class);
		fake_ib_class = NULL;
		platform_device_unregister(fake_none_pdev);
		fake_none_pdev = NULL;
		fake_none_dev = NULL;
	}
	return ret;
}

void fake_nic_exit(void)
{
	pci_unregister_driver(&fake_edu_driver);
	class_destroy(fake_ib_class);
	fake_ib_class = NULL;
	platform_device_unregister(fake_none_pdev);
	fake_none_pdev = NULL;
	fake_none_dev = NULL;
}
