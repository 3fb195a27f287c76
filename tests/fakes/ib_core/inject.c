// SPDX-License-Identifier: GPL-2.0
/*
 * ib_core test double: stalls and failures injected at chosen points of the
 * core's own flow (fake-only; the points sit where the real core runs code
 * between client calls, see ../INTERFACE.md).
 */
#include "fake_ib_core.h"

#include <linux/delay.h>
#include <linux/kernel.h>
#include <linux/string.h>

static const char *const fake_inject_names[FAKE_INJ_COUNT] = {
	[FAKE_INJ_AFTER_ACQUIRE] = "after_acquire",
	[FAKE_INJ_AFTER_GET_PAGES] = "after_get_pages",
	[FAKE_INJ_AFTER_DMA_MAP] = "after_dma_map",
	[FAKE_INJ_TEARDOWN_UNLOCKED] = "teardown_unlocked",
	[FAKE_INJ_BEFORE_RELEASE] = "before_release",
};

struct fake_inject_slot {
	unsigned int count;   /* calls left */
	unsigned int sleep_ms;
	int err;
};

static DEFINE_SPINLOCK(fake_inject_lock);
static struct fake_inject_slot fake_inject_slots[FAKE_INJ_COUNT];

int fake_inject(enum fake_inject_point p)
{
	struct fake_inject_slot s = {};

	spin_lock(&fake_inject_lock);
	if (fake_inject_slots[p].count) {
		s = fake_inject_slots[p];
		fake_inject_slots[p].count--;
	}
	spin_unlock(&fake_inject_lock);
	if (!s.count)
		return 0;
	if (s.sleep_ms) {
		pr_info("%s: injected stall of %u ms\n", fake_inject_names[p], s.sleep_ms);
		msleep(s.sleep_ms);
		pr_info("%s: stall over\n", fake_inject_names[p]);
		return 0;
	}
	pr_info("%s: injected error %d\n", fake_inject_names[p], s.err);
	return s.err;
}

int fake_inject_set(const char *point, const char *what, unsigned int count)
{
	struct fake_inject_slot s = { .count = count ? count : 1 };
	int p, ret;

	for (p = 0; p < FAKE_INJ_COUNT; p++)
		if (!strcmp(point, fake_inject_names[p]))
			break;
	if (p == FAKE_INJ_COUNT) {
		pr_err("inject: unknown point '%s'\n", point);
		return -EINVAL;
	}
	if (!strncmp(what, "sleep:", 6)) {
		ret = kstrtouint(what + 6, 0, &s.sleep_ms);
		if (ret || !s.sleep_ms) {
			pr_err("inject: bad stall '%s'\n", what);
			return -EINVAL;
		}
	} else {
		ret = kstrtoint(what, 0, &s.err);
		if (ret || s.err >= 0 || s.err < -MAX_ERRNO) {
			pr_err("inject: '%s' is neither sleep:<ms> nor a negative errno\n", what);
			return -EINVAL;
		}
		if (p != FAKE_INJ_AFTER_ACQUIRE && p != FAKE_INJ_AFTER_GET_PAGES &&
		    p != FAKE_INJ_AFTER_DMA_MAP) {
			pr_err("inject: %s takes only sleep:<ms> (teardown cannot fail)\n", point);
			return -EINVAL;
		}
	}
	spin_lock(&fake_inject_lock);
	fake_inject_slots[p] = s;
	spin_unlock(&fake_inject_lock);
	pr_info("inject: %s %s x%u armed\n", point, what, s.count);
	return 0;
}

void fake_inject_clear(void)
{
	spin_lock(&fake_inject_lock);
	memset(fake_inject_slots, 0, sizeof(fake_inject_slots));
	spin_unlock(&fake_inject_lock);
	pr_info("inject: cleared\n");
}
