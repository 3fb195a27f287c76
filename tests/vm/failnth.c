// SPDX-License-Identifier: GPL-2.0
/*
 * failnth: run a few steps in one process (NVIDIA finds GPU memory by the calling process, so
 * cudaMalloc, registration and teardown must come from the same one) and fail the N-th fault
 * injection point of exactly one of them, through /proc/thread-self/fail-nth (the kernel
 * counts only the calls its fault attributes let through: the sweep restricts failslab to
 * allocations made under module code, tests/scenarios/30-sweep.py).
 *
 *   failnth N STEP...
 *
 * A STEP is KIND:ARG[:TEXT]. Lower case kinds must succeed (else "setup-failed step=I rc=E"),
 * a leading '?' lets one fail ("step=I rc=E"), upper case arms fail-nth = N (0: nothing) for
 * that step alone:
 *   w:FILE:TEXT   write TEXT to FILE          r:FILE       read FILE to its end
 *   p:FILE        read FILE and print it
 *   l:KO:PARAMS   finit_module(KO, PARAMS)    u:NAME       delete_module(NAME)
 * Prints "rc=E left=K" for the armed step: E is 0 or the errno it failed with, K the count
 * left in fail-nth (0: the N-th injection point was reached and failed; more: the step made
 * fewer than N calls). Exit status 0 unless a step could not be run at all.
 *
 * With FAILNTH_TWICE in the environment the task's make-it-fail is set while fail-nth is
 * armed, so that the attribute's probability path (which the sweep sets to fail the next
 * allocation, failslab/times) also fails the injection point after the N-th: for a callee that
 * tries a quiet allocation first and then, failed, tries again (the XArray's nodes).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int failnth_fd = -1;
/* With FAILNTH_TWICE set: /proc/thread-self/make-it-fail, set while fail-nth is armed. */
static int twice_fd = -1;

static int arm(unsigned int n)
{
	char buf[16];
	int len = snprintf(buf, sizeof(buf), "%u", n);

	if (twice_fd >= 0 && pwrite(twice_fd, n ? "1" : "0", 1, 0) != 1)
		return -1;
	return pwrite(failnth_fd, buf, len, 0) == len ? 0 : -1;
}

static long left(void)
{
	char buf[16] = "";

	if (pread(failnth_fd, buf, sizeof(buf) - 1, 0) <= 0)
		return -1;
	return strtol(buf, NULL, 10);
}

/* Runs one step; arms fail-nth = n around its system call when n > 0. Returns 0 or errno. */
static int run_step(char kind, char *arg, char *text, unsigned int n, long *rest)
{
	char buf[4096];
	int fd, err = 0;
	ssize_t r;

	switch (kind) {
	case 'w':
		fd = open(arg, O_WRONLY);
		if (fd < 0)
			return errno;
		if (n && arm(n))
			return errno;
		if (write(fd, text, strlen(text)) < 0)
			err = errno;
		break;
	case 'r':
	case 'p':
		if (n && arm(n))
			return errno;
		fd = open(arg, O_RDONLY);
		if (fd < 0) {
			err = errno;
			break;
		}
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			if (kind == 'p')
				fwrite(buf, 1, r, stdout);
		if (r < 0)
			err = errno;
		break;
	case 'l':
		fd = open(arg, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		if (n && arm(n))
			return errno;
		if (syscall(SYS_finit_module, fd, text ? text : "", 0))
			err = errno;
		break;
	case 'u':
		fd = -1;
		if (n && arm(n))
			return errno;
		if (syscall(SYS_delete_module, arg, O_NONBLOCK))
			err = errno;
		break;
	default:
		return EINVAL;
	}
	if (n) {
		*rest = left();
		arm(0);
	}
	if (fd >= 0)
		close(fd);
	return err;
}

int main(int argc, char **argv)
{
	unsigned int n;
	int i;

	if (argc < 3) {
		fprintf(stderr, "usage: failnth N STEP...\n");
		return 2;
	}
	n = strtoul(argv[1], NULL, 0);
	failnth_fd = open("/proc/thread-self/fail-nth", O_RDWR);
	if (failnth_fd < 0) {
		perror("failnth: /proc/thread-self/fail-nth");
		return 2;
	}
	if (getenv("FAILNTH_TWICE")) {
		twice_fd = open("/proc/thread-self/make-it-fail", O_WRONLY);
		if (twice_fd < 0) {
			perror("failnth: /proc/thread-self/make-it-fail");
			return 2;
		}
	}
	/*
	 * All steps on CPU 0. The IOMMU keeps freed IOVAs in per-CPU caches: when deregistration
	 * ran on one CPU and the next registration on the other, the mapping finds its cache empty
	 * and allocates (slab, under nv_peer_mem's stack), so which allocation the N-th is would
	 * change from run to run and the sweep could step over a call site.
	 */
	{
		cpu_set_t cpu0;

		CPU_ZERO(&cpu0);
		CPU_SET(0, &cpu0);
		if (sched_setaffinity(0, sizeof(cpu0), &cpu0))
			perror("failnth: sched_setaffinity");
	}
	for (i = 2; i < argc; i++) {
		char *step = argv[i], *arg, *text;
		int quiet = step[0] == '?', armed, err;
		char kind;
		long rest = -1;

		step += quiet;
		kind = step[0];
		if (!kind || step[1] != ':') {
			fprintf(stderr, "failnth: bad step '%s'\n", argv[i]);
			return 2;
		}
		arg = step + 2;
		text = NULL;
		if (kind == 'w' || kind == 'W' || kind == 'l' || kind == 'L') {
			text = strchr(arg, ':');
			if (!text) {
				fprintf(stderr, "failnth: step '%s' needs :TEXT\n", argv[i]);
				return 2;
			}
			*text++ = '\0';
		}
		armed = kind >= 'A' && kind <= 'Z';
		err = run_step(armed ? kind - 'A' + 'a' : kind, arg, text, armed ? n : 0, &rest);
		if (armed)
			printf("rc=%d left=%ld\n", err, rest);
		else if (err)
			printf("%sstep=%d rc=%d\n", quiet ? "" : "setup-failed ", i - 1, err);
	}
	return 0;
}
