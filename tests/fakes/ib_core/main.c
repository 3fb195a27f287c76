// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: module entry points and parameters.
 *
 * Pretends to be MLNX_OFED's ib_core for the PeerDirect API and drives peer
 * memory clients the way MLNX_OFED 5.x (or 4.x, core_version=4) does, with
 * QEMU "edu" PCI devices standing in for RDMA NICs.
 */
#include "fake_ib_core.h"

#include <linux/module.h>
#include <linux/moduleparam.h>

int fake_core_version = 5;
module_param_named(core_version, fake_core_version, int, 0444);
MODULE_PARM_DESC(core_version,
		 "MLNX_OFED core behaviour to imitate: 5 (default) or 4");

atomic_t fake_violations = ATOMIC_INIT(0);

static int __init fake_ib_core_init(void)
{
	int ret;

	if (fake_core_version != 4 && fake_core_version != 5) {
		pr_err("core_version must be 4 or 5, not %d\n", fake_core_version);
		return -EINVAL;
	}

	ret = fake_peer_init();
	if (ret)
		return ret;
	ret = fake_nic_init();
	if (ret)
		goto err_peer;
	ret = fake_debugfs_init();
	if (ret)
		goto err_nic;

	pr_info("loaded (core_version=%d)\n", fake_core_version);
	return 0;

err_nic:
	fake_nic_exit();
err_peer:
	fake_peer_exit();
	return ret;
}

static void __exit fake_ib_core_exit(void)
{
	/* No more commands; then nothing can create registrations. */
	fake_debugfs_exit();
	fake_mr_exit();
	fake_nic_exit();
	fake_peer_exit();
	fake_sysfs_exit();
	pr_info("unloaded\n");
}

module_init(fake_ib_core_init);
module_exit(fake_ib_core_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Test double of MLNX_OFED ib_core (PeerDirect API) with an edu-based fake NIC");
