// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: debugfs control files under
 * /sys/kernel/debug/fake_ib_core/ (ctl, regs, clients, dma_buf, stats);
 * specified in ../INTERFACE.md.
 */
#include "fake_ib_core.h"

#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/kernel.h>
#include <linux/miscdevice.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#define FAKE_CTL_MAX 256
#define FAKE_CTL_ARGS 16

static struct dentry *fake_dir;

static DEFINE_MUTEX(fake_dma_buf_lock);
static u8 fake_dma_buf[FAKE_DMA_BUF_SIZE];

void fake_dma_buf_store(const void *data, size_t len)
{
	len = min_t(size_t, len, FAKE_DMA_BUF_SIZE);
	mutex_lock(&fake_dma_buf_lock);
	memset(fake_dma_buf, 0, sizeof(fake_dma_buf));
	memcpy(fake_dma_buf, data, len);
	mutex_unlock(&fake_dma_buf_lock);
}

void fake_dma_buf_load(void *data, size_t len)
{
	len = min_t(size_t, len, FAKE_DMA_BUF_SIZE);
	mutex_lock(&fake_dma_buf_lock);
	memcpy(data, fake_dma_buf, len);
	mutex_unlock(&fake_dma_buf_lock);
}

/* ---- ctl ---- */

static int fake_parse_ul(const char *what, const char *s, unsigned long *v)
{
	int ret = kstrtoul(s, 0, v);

	if (ret)
		pr_err("ctl: bad %s '%s'\n", what, s);
	return ret;
}

static int fake_parse_u64(const char *what, const char *s, u64 *v)
{
	int ret = kstrtou64(s, 0, v);

	if (ret)
		pr_err("ctl: bad %s '%s'\n", what, s);
	return ret;
}

static int fake_cmd_reg(int argc, char **argv)
{
	unsigned long id;
	u64 addr, len;
	bool ro = false, cq = false;
	int i, ret;

	if (argc < 5) {
		pr_err("ctl: usage: reg <id> <dev> <addr> <len> [ro] [cq]\n");
		return -EINVAL;
	}
	ret = fake_parse_ul("id", argv[1], &id);
	if (!ret)
		ret = fake_parse_u64("addr", argv[3], &addr);
	if (!ret)
		ret = fake_parse_u64("len", argv[4], &len);
	if (ret)
		return ret;
	for (i = 5; i < argc; i++) {
		if (!strcmp(argv[i], "ro")) {
			ro = true;
		} else if (!strcmp(argv[i], "cq")) {
			cq = true;
		} else {
			pr_err("ctl: reg: unknown flag '%s'\n", argv[i]);
			return -EINVAL;
		}
	}
	return fake_mr_reg(id, argv[2], addr, len, ro, cq);
}

static int fake_cmd_rw(int argc, char **argv, bool write)
{
	unsigned long id;
	u64 off, len;
	int ret;

	if (argc != 4) {
		pr_err("ctl: usage: %s <id> <offset> <len>\n", argv[0]);
		return -EINVAL;
	}
	ret = fake_parse_ul("id", argv[1], &id);
	if (!ret)
		ret = fake_parse_u64("offset", argv[2], &off);
	if (!ret)
		ret = fake_parse_u64("len", argv[3], &len);
	if (ret)
		return ret;
	return write ? fake_mr_write(id, off, len) : fake_mr_read(id, off, len);
}

/* bench <tag> <dev> <addr> <len> <iterations> | bench clear */
static int fake_cmd_bench(int argc, char **argv)
{
	unsigned long iters;
	u64 addr, len;
	int ret;

	if (argc == 2 && !strcmp(argv[1], "clear")) {
		fake_bench_clear();
		return 0;
	}
	if (argc != 6) {
		pr_err("ctl: usage: bench <tag> <dev> <addr> <len> <iterations> | bench clear\n");
		return -EINVAL;
	}
	ret = fake_parse_u64("addr", argv[3], &addr);
	if (!ret)
		ret = fake_parse_u64("len", argv[4], &len);
	if (!ret)
		ret = fake_parse_ul("iterations", argv[5], &iters);
	if (ret)
		return ret;
	if (!iters || !len) {
		pr_err("ctl: bench: zero length or iterations\n");
		return -EINVAL;
	}
	return fake_bench(argv[1], argv[2], addr, len, iters);
}

/* reg-many <first id> <count> <dev> <addr> <len>: count registrations of one range. */
/* stress <race> <iterations> <jitter_us> [dev] | stress clear */
static int fake_cmd_stress(int argc, char **argv)
{
	unsigned long iters, jitter;

	if (argc == 2 && !strcmp(argv[1], "clear")) {
		fake_stress_clear();
		return 0;
	}
	if (argc < 4 || argc > 5 || fake_parse_ul("iterations", argv[2], &iters) ||
	    fake_parse_ul("jitter", argv[3], &jitter) || jitter > 100000) {
		pr_err("ctl: usage: stress <race> <iterations> <jitter_us <= 100000> [dev] | stress clear\n");
		return -EINVAL;
	}
	return fake_stress(argv[1], iters, jitter, argc == 5 ? argv[4] : "edu0");
}

static int fake_cmd_reg_many(int argc, char **argv)
{
	unsigned long first, count, i;
	u64 addr, len;
	int ret;

	if (argc != 6) {
		pr_err("ctl: usage: reg-many <first id> <count> <dev> <addr> <len>\n");
		return -EINVAL;
	}
	ret = fake_parse_ul("id", argv[1], &first);
	if (!ret)
		ret = fake_parse_ul("count", argv[2], &count);
	if (!ret)
		ret = fake_parse_u64("addr", argv[4], &addr);
	if (!ret)
		ret = fake_parse_u64("len", argv[5], &len);
	if (ret)
		return ret;
	for (i = 0; i < count; i++) {
		ret = fake_mr_reg(first + i, argv[3], addr, len, false, false);
		if (ret)
			return ret;
		cond_resched();
	}
	return 0;
}

static int fake_ctl_exec(int argc, char **argv)
{
	unsigned long id;
	int ret;

	if (!strcmp(argv[0], "reg"))
		return fake_cmd_reg(argc, argv);
	if (!strcmp(argv[0], "dereg")) {
		bool worker = argc == 3 && !strcmp(argv[2], "worker");

		if (argc != 2 && !worker) {
			pr_err("ctl: usage: dereg <id> [worker]\n");
			return -EINVAL;
		}
		ret = fake_parse_ul("id", argv[1], &id);
		return ret ? ret : fake_mr_dereg(id, worker);
	}
	if (!strcmp(argv[0], "inject")) {
		unsigned long count = 1;

		if (argc == 2 && !strcmp(argv[1], "clear")) {
			fake_inject_clear();
			return 0;
		}
		if (argc != 3 && argc != 4) {
			pr_err("ctl: usage: inject <point> sleep:<ms>|<-errno> [count] | inject clear\n");
			return -EINVAL;
		}
		if (argc == 4) {
			ret = fake_parse_ul("count", argv[3], &count);
			if (ret)
				return ret;
			if (!count || count > UINT_MAX) {
				pr_err("ctl: inject: bad count %lu\n", count);
				return -EINVAL;
			}
		}
		return fake_inject_set(argv[1], argv[2], count);
	}
	if (!strcmp(argv[0], "bench"))
		return fake_cmd_bench(argc, argv);
	if (!strcmp(argv[0], "call"))
		return fake_calls(argc, argv);
	if (!strcmp(argv[0], "stress"))
		return fake_cmd_stress(argc, argv);
	if (!strcmp(argv[0], "reg-many"))
		return fake_cmd_reg_many(argc, argv);
	if (!strcmp(argv[0], "dereg-many")) {
		unsigned long first, count, i;

		if (argc != 3 || fake_parse_ul("id", argv[1], &first) ||
		    fake_parse_ul("count", argv[2], &count)) {
			pr_err("ctl: usage: dereg-many <first id> <count>\n");
			return -EINVAL;
		}
		for (i = 0; i < count; i++) {
			ret = fake_mr_dereg(first + i, false);
			if (ret)
				return ret;
			cond_resched();
		}
		return 0;
	}
	if (!strcmp(argv[0], "read"))
		return fake_cmd_rw(argc, argv, false);
	if (!strcmp(argv[0], "write"))
		return fake_cmd_rw(argc, argv, true);
	if (!strcmp(argv[0], "selftest")) {
		if (argc > 2) {
			pr_err("ctl: usage: selftest [dev]\n");
			return -EINVAL;
		}
		return fake_nic_selftest(argc == 2 ? argv[1] : NULL);
	}
	if (!strcmp(argv[0], "canary")) {
		if ((argc != 2 && argc != 3) || strcmp(argv[1], "dmar-fault")) {
			pr_err("ctl: usage: canary dmar-fault [dev]\n");
			return -EINVAL;
		}
		return fake_nic_canary_dmar_fault(argc == 3 ? argv[2] : NULL);
	}
	if (!strcmp(argv[0], "bogus-context")) {
		u64 value;

		if (argc != 3) {
			pr_err("ctl: usage: bogus-context <client> <value>\n");
			return -EINVAL;
		}
		ret = fake_parse_u64("value", argv[2], &value);
		return ret ? ret : fake_client_poke_bogus(argv[1], value);
	}
	pr_err("ctl: unknown command '%s'\n", argv[0]);
	return -EINVAL;
}

static ssize_t fake_ctl_write(struct file *file, const char __user *ubuf,
			      size_t count, loff_t *ppos)
{
	char buf[FAKE_CTL_MAX];
	char *argv[FAKE_CTL_ARGS];
	char *cur, *tok;
	int argc = 0, ret;

	if (count >= sizeof(buf)) {
		pr_err("ctl: command too long\n");
		return -EINVAL;
	}
	if (copy_from_user(buf, ubuf, count))
		return -EFAULT;
	buf[count] = '\0';

	cur = buf;
	while ((tok = strsep(&cur, " \t\n"))) {
		if (!*tok)
			continue;
		if (argc == FAKE_CTL_ARGS) {
			pr_err("ctl: too many words\n");
			return -EINVAL;
		}
		argv[argc++] = tok;
	}
	if (!argc) {
		pr_err("ctl: empty command\n");
		return -EINVAL;
	}

	ret = fake_ctl_exec(argc, argv);
	return ret ? ret : count;
}

static const struct file_operations fake_ctl_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = fake_ctl_write,
	.llseek = noop_llseek,
};

/* ---- dma_buf ---- */

static ssize_t fake_dma_buf_read(struct file *file, char __user *ubuf,
				 size_t count, loff_t *ppos)
{
	ssize_t ret;

	mutex_lock(&fake_dma_buf_lock);
	ret = simple_read_from_buffer(ubuf, count, ppos, fake_dma_buf,
				      sizeof(fake_dma_buf));
	mutex_unlock(&fake_dma_buf_lock);
	return ret;
}

static ssize_t fake_dma_buf_write(struct file *file, const char __user *ubuf,
				  size_t count, loff_t *ppos)
{
	ssize_t ret;

	mutex_lock(&fake_dma_buf_lock);
	ret = simple_write_to_buffer(fake_dma_buf, sizeof(fake_dma_buf), ppos,
				     ubuf, count);
	mutex_unlock(&fake_dma_buf_lock);
	return ret;
}

static const struct file_operations fake_dma_buf_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = fake_dma_buf_read,
	.write = fake_dma_buf_write,
	.llseek = default_llseek,
};

/* ---- read-only views ---- */

static int fake_regs_f_show(struct seq_file *m, void *unused)
{
	fake_regs_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fake_regs_f);

static int fake_clients_f_show(struct seq_file *m, void *unused)
{
	fake_clients_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fake_clients_f);

static int fake_stats_f_show(struct seq_file *m, void *unused)
{
	seq_printf(m, "regs %d\n", atomic_read(&fake_stat_regs));
	seq_printf(m, "invalidations %d\n", atomic_read(&fake_stat_invalidations));
	seq_printf(m, "violations %d\n", atomic_read(&fake_violations));
	seq_printf(m, "unmaps_in_invalidate %d\n",
		   atomic_read(&fake_stat_unmaps_in_invalidate));
	seq_printf(m, "core_version %d\n", fake_core_version);
	seq_printf(m, "deadlocks %d\n", atomic_read(&fake_stat_deadlocks));
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fake_stats_f);

static int fake_bench_f_show(struct seq_file *m, void *unused)
{
	fake_bench_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fake_bench_f);

static int fake_calls_f_show(struct seq_file *m, void *unused)
{
	fake_calls_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fake_calls_f);

static int fake_stress_f_show(struct seq_file *m, void *unused)
{
	fake_stress_show(m);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fake_stress_f);

/*
 * ctl and dma_buf again as misc devices, /dev/fake_ib_core_ctl and /dev/fake_ib_core_dma_buf:
 * under kernel lockdown (Secure Boot, tests/secureboot/) debugfs refuses to open any file that
 * can be written, so the harness (tests/vm/lib.py, lockdown_ctl) bind-mounts these nodes over
 * the debugfs files and the scenarios stay as they are.
 */
static struct miscdevice fake_ctl_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "fake_ib_core_ctl",
	.fops = &fake_ctl_fops,
	.mode = 0200,
};

static struct miscdevice fake_dma_buf_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "fake_ib_core_dma_buf",
	.fops = &fake_dma_buf_fops,
	.mode = 0600,
};

static bool fake_ctl_misc_on, fake_dma_buf_misc_on;

int fake_debugfs_init(void)
{
	fake_dir = debugfs_create_dir("fake_ib_core", NULL);
	if (IS_ERR(fake_dir)) {
		pr_err("cannot create the debugfs directory (%ld)\n",
		       PTR_ERR(fake_dir));
		return PTR_ERR(fake_dir);
	}
	debugfs_create_file("ctl", 0200, fake_dir, NULL, &fake_ctl_fops);
	debugfs_create_file("regs", 0444, fake_dir, NULL, &fake_regs_f_fops);
	debugfs_create_file("clients", 0444, fake_dir, NULL, &fake_clients_f_fops);
	debugfs_create_file("dma_buf", 0644, fake_dir, NULL, &fake_dma_buf_fops);
	debugfs_create_file("stats", 0444, fake_dir, NULL, &fake_stats_f_fops);
	debugfs_create_file("bench", 0444, fake_dir, NULL, &fake_bench_f_fops);
	debugfs_create_file("calls", 0444, fake_dir, NULL, &fake_calls_f_fops);
	debugfs_create_file("stress", 0444, fake_dir, NULL, &fake_stress_f_fops);
	fake_ctl_misc_on = !misc_register(&fake_ctl_misc);
	fake_dma_buf_misc_on = !misc_register(&fake_dma_buf_misc);
	if (!fake_ctl_misc_on || !fake_dma_buf_misc_on)
		pr_warn("cannot register the misc devices: under lockdown ctl cannot be written\n");
	return 0;
}

void fake_debugfs_exit(void)
{
	if (fake_ctl_misc_on)
		misc_deregister(&fake_ctl_misc);
	if (fake_dma_buf_misc_on)
		misc_deregister(&fake_dma_buf_misc);
	fake_ctl_misc_on = fake_dma_buf_misc_on = false;
	debugfs_remove_recursive(fake_dir);
	fake_dir = NULL;
}
