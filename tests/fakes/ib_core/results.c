// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: the text that "bench" and "stress" keep for their
 * debugfs files (fake-only). One line per run, appended until "clear"; the
 * buffer is allocated on the first line and has a fixed size, so a reader
 * sees every line that fitted and a writer learns when one did not.
 */
#include "fake_ib_core.h"

#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>

#define FAKE_RESULTS_SIZE	8192

int fake_results_add(struct fake_results *r, const char *line, size_t n)
{
	int ret = 0;

	mutex_lock(&r->lock);
	if (!r->buf)
		r->buf = kzalloc(FAKE_RESULTS_SIZE, GFP_KERNEL);
	if (!r->buf)
		ret = -ENOMEM;
	else if (r->len + n >= FAKE_RESULTS_SIZE)
		ret = -ENOSPC;
	else {
		memcpy(r->buf + r->len, line, n);
		r->len += n;
	}
	mutex_unlock(&r->lock);
	return ret;
}

void fake_results_clear(struct fake_results *r)
{
	mutex_lock(&r->lock);
	r->len = 0;
	mutex_unlock(&r->lock);
}

void fake_results_show(struct fake_results *r, struct seq_file *m)
{
	mutex_lock(&r->lock);
	if (r->buf)
		seq_write(m, r->buf, r->len);
	mutex_unlock(&r->lock);
}

void fake_results_free(struct fake_results *r)
{
	mutex_lock(&r->lock);
	kfree(r->buf);
	r->buf = NULL;
	r->len = 0;
	mutex_unlock(&r->lock);
}
