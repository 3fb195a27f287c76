// SPDX-License-Identifier: GPL-2.0
/*
 * The C half of the live registration view: /sys/kernel/debug/nv_peer_mem/registrations,
 * readable by root only (0400; debugfs itself is root-only on most distributions). The lines
 * come from registrations_view.rs.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "glue.h"

static struct dentry *nvpm_debugfs_dir;

void nvpm_seq_write(struct seq_file *m, const char *buf, size_t len)
{
	seq_write(m, buf, len);
}

static int nvpm_registrations_open_show(struct seq_file *m, void *unused)
{
	return nvpm_registrations_show(m);
}

static int nvpm_registrations_open(struct inode *inode, struct file *file)
{
	int ret = single_open(file, nvpm_registrations_open_show, inode->i_private);

	if (ret)
		pr_warn("nv_peer_mem: registrations view: cannot open: error %d\n", ret);
	return ret;
}

static const struct file_operations nvpm_registrations_fops = {
	.owner = THIS_MODULE,
	.open = nvpm_registrations_open,
	.read = seq_read,
	.llseek = seq_lseek,
	.release = single_release,
};

/*
 * Failure is not fatal: the view is a debugging aid. A debugfs that is compiled in and mounted
 * but cannot make the file (out of memory) is worth one line; a disabled one (-ENODEV) is not.
 */
void nvpm_debugfs_create(void)
{
	struct dentry *file;

	nvpm_debugfs_dir = debugfs_create_dir("nv_peer_mem", NULL);
	file = debugfs_create_file("registrations", 0400, nvpm_debugfs_dir, NULL,
				   &nvpm_registrations_fops);
	if (IS_ERR(file) && PTR_ERR(file) != -ENODEV)
		pr_warn("nv_peer_mem: no registrations view in debugfs: error %ld\n", PTR_ERR(file));
}

/* Waits for readers in flight (debugfs's removal protection). */
void nvpm_debugfs_destroy(void)
{
	debugfs_remove(nvpm_debugfs_dir);
	nvpm_debugfs_dir = NULL;
}
