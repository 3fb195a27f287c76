// SPDX-License-Identifier: GPL-2.0
/*
 * calibrate: make bench's measure of the emulator. One CPU-bound workload of the kind a
 * registration is made of (small allocations of mixed sizes freed out of order, mutex round
 * trips, a short walk over what was allocated), run natively on the host and inside the VM by
 * the same make bench; the ratio of the two times is the emulation factor the cost model is
 * scaled by and the module's own cost is converted with (Documentation/performance.md).
 *
 *   calibrate [ROUNDS]   (default 1000000)
 *
 * Runs the workload 5 times and prints "calibrate rounds=R best_ns=B median_ns=M" on stdout:
 * the best run is the figure (least disturbed by the rest of the machine), the median shows
 * the spread. Exit status 0, or 2 for bad usage.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 64
#define RUNS 5

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* One run: ROUNDS allocations between 16 and 1024 bytes kept in a ring of SLOTS, each written,
 * each followed by a mutex round trip and a read of a neighbouring slot. */
static uint64_t one_run(long rounds)
{
	unsigned char *slot[SLOTS] = { 0 };
	uint32_t x = 2463534242u; /* xorshift32: the same sequence on both machines */
	uint64_t sum = 0, start = now_ns();
	long i;

	for (i = 0; i < rounds; i++) {
		size_t size, k;

		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		k = x % SLOTS;
		size = 16 + (x >> 8) % 1009;
		free(slot[k]);
		slot[k] = malloc(size);
		if (!slot[k]) {
			fprintf(stderr, "calibrate: out of memory\n");
			exit(1);
		}
		memset(slot[k], (int)i, size);
		pthread_mutex_lock(&lock);
		if (slot[(k + 1) % SLOTS])
			sum += slot[(k + 1) % SLOTS][0];
		pthread_mutex_unlock(&lock);
	}
	for (i = 0; i < SLOTS; i++)
		free(slot[i]);
	sink = sum;
	return now_ns() - start;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long rounds = 1000000;
	uint64_t t[RUNS];
	char *end;
	int r;

	if (argc > 2 || (argc == 2 && ((rounds = strtol(argv[1], &end, 0)) <= 0 || *end))) {
		fprintf(stderr, "usage: calibrate [ROUNDS]\n");
		return 2;
	}
	for (r = 0; r < RUNS; r++)
		t[r] = one_run(rounds);
	qsort(t, RUNS, sizeof(t[0]), cmp);
	printf("calibrate rounds=%ld best_ns=%llu median_ns=%llu\n", rounds,
	       (unsigned long long)t[0], (unsigned long long)t[RUNS / 2]);
	return 0;
}
