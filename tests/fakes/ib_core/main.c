// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: module entry points and parameters.
 *
 * Pretends to be MLNX_OFED's ib_core for the PeerDirect API and drives peer
 * memory clients the way MLNX_OFED 5.x/24.x (core_version=5) or 4.9 LTS
 * (core_version=4) does, with QEMU "edu" PCI devices standing in for NICs.
 * See ../INTERFACE.md.
 */
#include "fake_ib_core.h"

#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/version.h>

int fake_core_version = 5;
module_param_named(core_version, fake_core_version, int, 0444);
MODULE_PARM_DESC(core_version,
		 "MLNX_OFED core to imitate: 5 (5.x/24.x, default) or 4 (4.9 LTS)");

static int fake_memory_peers = -1;
module_param_named(memory_peers, fake_memory_peers, int, 0444);
MODULE_PARM_DESC(memory_peers,
		 "/sys/kernel/mm/memory_peers: -1 auto (24.x: only before 6.6; 4.9: always), 0 absent, 1 present");

atomic_t fake_violations = ATOMIC_INIT(0);
atomic_t fake_stat_deadlocks = ATOMIC_INIT(0);

/*
 * 24.07 creates memory_peers only under HAVE_MM_KOBJ_EXPORTED
 * (backports/0019-...peer_mem.c.patch; compat/config/rdma.m4 checks that
 * mm_kobj is exported, which upstream stopped in 6.6).  4.9 and 5.8 create
 * it unconditionally.
 */
bool fake_memory_peers_enabled(void)
{
	if (fake_memory_peers >= 0)
		return fake_memory_peers;
	if (fake_v4())
		return true;
	return LINUX_VERSION_CODE < KERNEL_VERSION(6, 6, 0);
}

static int __init fake_ib_core_init(void)
{
	int ret;

	if (fake_core_version != 4 && fake_core_version != 5) {
		pr_err("core_version must be 4 or 5, not %d\n", fake_core_version);
		return -EINVAL;
	}
	if (fake_memory_peers < -1 || fake_memory_peers > 1) {
		pr_err("memory_peers must be -1, 0 or 1, not %d\n", fake_memory_peers);
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

	pr_info("loaded (core_version=%d memory_peers=%d)\n", fake_core_version,
		fake_memory_peers_enabled());
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
	fake_bench_exit();
	fake_stress_exit();
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
