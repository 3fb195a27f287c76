// SPDX-License-Identifier: GPL-2.0
/*
 * nvidia.ko test double: control and inspection files in
 * /sys/kernel/debug/fake_nvidia/ (see ../INTERFACE.md).
 */
#define pr_fmt(fmt) "fake_nvidia: " fmt

#include <linux/debugfs.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/pci.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "fake_nvidia.h"

#define FNV_CTL_MAX	256

static struct dentry *fnv_debugfs_dir;

/* A number with an optional K/M/G suffix, e.g. 0x100000 or 1M. */
static int fnv_parse_size(const char *s, u64 *val)
{
	char *end;

	*val = memparse(s, &end);
	return end == s || *end ? -EINVAL : 0;
}

static int fnv_ctl_alloc(int argc, char **argv)
{
	enum fnv_layout layout = FNV_LAYOUT_CONTIGUOUS;
	int gpu = 0, arg = 3, i;
	u64 va, size;

	if (argc < 3 || argc > 5) {
		pr_err("ctl: usage: alloc <va> <size> [contiguous|fragmented|shuffled] [gpu]\n");
		return -EINVAL;
	}
	if (kstrtou64(argv[1], 0, &va) || fnv_parse_size(argv[2], &size)) {
		pr_err("ctl: alloc: bad va '%s' or size '%s'\n", argv[1],
		       argv[2]);
		return -EINVAL;
	}
	if (arg < argc) {
		i = match_string(fnv_layout_names, FNV_LAYOUT_NR, argv[arg]);
		if (i >= 0) {
			layout = i;
			arg++;
		}
	}
	if (arg < argc) {
		if (kstrtoint(argv[arg], 0, &gpu) || gpu < 0) {
			pr_err("ctl: alloc: bad layout or gpu '%s'\n",
			       argv[arg]);
			return -EINVAL;
		}
		arg++;
	}
	if (arg < argc) {
		pr_err("ctl: alloc: unexpected '%s'\n", argv[arg]);
		return -EINVAL;
	}
	return fnv_buffer_alloc(va, size, layout, gpu);
}

static int fnv_ctl_free(int argc, char **argv)
{
	u64 va;

	if (argc != 2 || kstrtou64(argv[1], 0, &va)) {
		pr_err("ctl: usage: free <va>\n");
		return -EINVAL;
	}
	return fnv_buffer_free(va);
}

static ssize_t fnv_ctl_write(struct file *file, const char __user *ubuf,
			     size_t count, loff_t *ppos)
{
	char *cmd, **argv;
	int argc, ret;

	if (!count || count >= FNV_CTL_MAX) {
		pr_err("ctl: command of %zu bytes (1..%d)\n", count,
		       FNV_CTL_MAX - 1);
		return -EINVAL;
	}

	cmd = memdup_user_nul(ubuf, count);
	if (IS_ERR(cmd))
		return PTR_ERR(cmd);
	argv = argv_split(GFP_KERNEL, cmd, &argc);
	kfree(cmd);
	if (!argv)
		return -ENOMEM;

	if (!argc) {
		pr_err("ctl: empty command\n");
		ret = -EINVAL;
	} else if (!strcmp(argv[0], "alloc")) {
		ret = fnv_ctl_alloc(argc, argv);
	} else if (!strcmp(argv[0], "free")) {
		ret = fnv_ctl_free(argc, argv);
	} else if (!strcmp(argv[0], "inject")) {
		ret = fnv_inject_command(argc, argv);
	} else if (!strcmp(argv[0], "floor")) {
		ret = fnv_floor_command(argc, argv);
	} else if (!strcmp(argv[0], "canary")) {
		ret = fnv_canary_command(argc, argv);
	} else if (!strcmp(argv[0], "misuse")) {
		ret = fnv_misuse_command(argc, argv);
	} else {
		pr_err("ctl: unknown command '%s'\n", argv[0]);
		ret = -EINVAL;
	}
	argv_free(argv);
	return ret ? ret : count;
}

static const struct file_operations fnv_ctl_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = fnv_ctl_write,
	.llseek = noop_llseek,
};

static int fnv_buffers_show(struct seq_file *s, void *unused)
{
	struct fnv_buffer *buf;

	mutex_lock(&fnv_lock);
	list_for_each_entry(buf, &fnv_buffers, node)
		seq_printf(s, "va=0x%llx size=0x%llx gpu=%d layout=%s pins=%u persistent=%u freed=%d owner=%d\n",
			   buf->va, buf->size, buf->gpu->index,
			   fnv_layout_names[buf->layout], buf->pins,
			   buf->persistent_pins, buf->freed, buf->owner);
	mutex_unlock(&fnv_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fnv_buffers);

static int fnv_pages_show(struct seq_file *s, void *unused)
{
	struct fnv_buffer *buf;
	unsigned long i;

	mutex_lock(&fnv_lock);
	list_for_each_entry(buf, &fnv_buffers, node)
		for (i = 0; i < buf->npages; i++)
			seq_printf(s, "0x%llx 0x%llx gpu=%d\n",
				   buf->va + ((u64)i << FNV_PAGE_SHIFT),
				   (u64)buf->pages[i] << FNV_PAGE_SHIFT,
				   buf->gpu->index);
	mutex_unlock(&fnv_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fnv_pages);

static int fnv_gpus_show(struct seq_file *s, void *unused)
{
	struct fnv_gpu *gpu;

	mutex_lock(&fnv_lock);
	list_for_each_entry(gpu, &fnv_gpus, node)
		seq_printf(s, "gpu=%d pci=%s bar=0x%llx size=0x%llx pages=%lu free_pages=%lu uuid=%*phN\n",
			   gpu->index, gpu->pdev ? pci_name(gpu->pdev) : "none",
			   (u64)gpu->bar_phys, (u64)gpu->bar_len, gpu->npages,
			   gpu->free_pages, FNV_UUID_LEN, gpu->uuid);
	mutex_unlock(&fnv_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fnv_gpus);

static int fnv_floor_f_show(struct seq_file *s, void *unused)
{
	fnv_floor_show(s);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fnv_floor_f);

static int fnv_stats_show(struct seq_file *s, void *unused)
{
	unsigned long free_pages = 0;
	struct fnv_stats st;
	struct fnv_gpu *gpu;

	mutex_lock(&fnv_lock);
	st = fnv_stats;
	list_for_each_entry(gpu, &fnv_gpus, node)
		free_pages += gpu->free_pages;
	mutex_unlock(&fnv_lock);

	seq_printf(s, "pins %lu\n", st.pins);
	seq_printf(s, "persistent_pins %lu\n", st.persistent_pins);
	seq_printf(s, "mappings %lu\n", st.mappings);
	seq_printf(s, "dead_tables %lu\n", st.dead_tables);
	seq_printf(s, "dead_mappings %lu\n", st.dead_mappings);
	seq_printf(s, "callbacks %lu\n", st.callbacks);
	seq_printf(s, "free_pages %lu\n", free_pages);
	seq_printf(s, "violations %ld\n", atomic_long_read(&fnv_violations));
	seq_printf(s, "injected %lu\n", fnv_inject_count());
	seq_printf(s, "hazards %lu\n", st.hazards);
	seq_printf(s, "reentry_refused %lu\n", st.reentry_refused);
	seq_printf(s, "flavour %s\n", FNV_FLAVOUR_NAME);
	fnv_call_stats_show(s);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(fnv_stats);

/*
 * ctl again as a misc device, /dev/fake_nvidia_ctl: under kernel lockdown (Secure Boot,
 * tests/secureboot/) debugfs refuses to open any file that can be written, so the harness
 * (tests/vm/lib.py, lockdown_ctl) bind-mounts this node over the debugfs file.
 */
static struct miscdevice fnv_ctl_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "fake_nvidia_ctl",
	.fops = &fnv_ctl_fops,
	.mode = 0200,
};

static bool fnv_ctl_misc_on;

void fnv_debugfs_init(void)
{
	fnv_debugfs_dir = debugfs_create_dir("fake_nvidia", NULL);
	debugfs_create_file("ctl", 0200, fnv_debugfs_dir, NULL, &fnv_ctl_fops);
	debugfs_create_file("buffers", 0444, fnv_debugfs_dir, NULL,
			    &fnv_buffers_fops);
	debugfs_create_file("pages", 0444, fnv_debugfs_dir, NULL,
			    &fnv_pages_fops);
	debugfs_create_file("gpus", 0444, fnv_debugfs_dir, NULL,
			    &fnv_gpus_fops);
	debugfs_create_file("floor", 0444, fnv_debugfs_dir, NULL,
			    &fnv_floor_f_fops);
	debugfs_create_file("stats", 0444, fnv_debugfs_dir, NULL,
			    &fnv_stats_fops);
	fnv_ctl_misc_on = !misc_register(&fnv_ctl_misc);
	if (!fnv_ctl_misc_on)
		pr_warn("cannot register the misc device: under lockdown ctl cannot be written\n");
}

void fnv_debugfs_exit(void)
{
	if (fnv_ctl_misc_on)
		misc_deregister(&fnv_ctl_misc);
	fnv_ctl_misc_on = false;
	debugfs_remove_recursive(fnv_debugfs_dir);
	fnv_debugfs_dir = NULL;
}
