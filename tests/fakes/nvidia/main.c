// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: module entry points and shared state.
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/module.h>
#include <linux/pci.h>

#include "fake_nvidia.h"

/* Protects GPUs, buffers, tables, mappings and fnv_stats. */
DEFINE_MUTEX(fnv_lock);
LIST_HEAD(fnv_gpus);
LIST_HEAD(fnv_buffers);
LIST_HEAD(fnv_tables);
LIST_HEAD(fnv_mappings);
struct fnv_stats fnv_stats;
atomic_long_t fnv_violations = ATOMIC_LONG_INIT(0);

/*
 * nv-p2p.h (515-595): persistent pins are not supported on MIG-enabled
 * devices and vGPU; RM answers NV_ERR_NOT_SUPPORTED, i.e. -ENOTSUPP.
 */
int fnv_mig;
module_param_named(mig, fnv_mig, int, 0644);
MODULE_PARM_DESC(mig, "1: behave as a MIG/vGPU GPU, persistent pins fail with -ENOTSUPP (default 0)");

/* Not in the real driver, whose waits for its API lock are unbounded. */
unsigned int fnv_deadlock_timeout = 30;
module_param_named(deadlock_timeout, fnv_deadlock_timeout, uint, 0644);
MODULE_PARM_DESC(deadlock_timeout, "seconds a call waits for the API lock before it reports a deadlock and fails with -EDEADLK (default 30)");

static int __init fnv_init(void)
{
	int ret;

	fnv_debugfs_init();

	ret = pci_register_driver(&fnv_pci_driver);
	if (ret) {
		pr_err("cannot register the PCI driver: %d\n", ret);
		fnv_debugfs_exit();
		return ret;
	}

	pr_info("test double loaded, flavour %s\n", FNV_FLAVOUR_NAME);
	return 0;
}

static void __exit fnv_exit(void)
{
	/* Waits for control writers still running (and their callbacks). */
	fnv_debugfs_exit();
	/*
	 * No client can be loaded any more (it would hold a reference on us),
	 * so leftovers are leaks: report them, never call their callbacks.
	 */
	fnv_p2p_teardown();
	fnv_buffers_teardown();
	pci_unregister_driver(&fnv_pci_driver);
	fnv_gpus_free_all();
	pr_info("test double unloaded, %ld violations\n",
		atomic_long_read(&fnv_violations));
}

module_init(fnv_init);
module_exit(fnv_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test double of NVIDIA's nvidia.ko P2P API (GPU memory on QEMU ivshmem BARs), flavour " FNV_FLAVOUR_NAME);
