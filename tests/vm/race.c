// SPDX-License-Identifier: GPL-2.0
/*
 * race: control-file writes from threads of ONE process, for VM scenarios.
 *
 * NVIDIA's P2P API finds GPU memory by the calling process, as a real application's threads
 * share it; shell background jobs are separate processes. Usage:
 *
 *   race [-q] 'FILE|LINE[|DELAY_US]'... [-- 'FILE|LINE[|DELAY_US]'...]...
 *
 * Groups separated by "--" run one after the other; the writes of a group run at once, one
 * thread each, released together from a barrier (each after its optional delay). Every write
 * prints "G.I ok" or "G.I <error text>" (G, I from 1), in order, after its group finished;
 * -q prints only failures. Exit status: 0, or 2 for bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct job {
	char *file, *line;
	long delay_us;
	int err;
};

static pthread_barrier_t start;

static void *run(void *arg)
{
	struct job *j = arg;
	size_t n = strlen(j->line);
	int fd;

	pthread_barrier_wait(&start);
	if (j->delay_us > 0)
		usleep(j->delay_us);
	fd = open(j->file, O_WRONLY);
	if (fd < 0) {
		j->err = errno;
		return NULL;
	}
	j->err = write(fd, j->line, n) == (ssize_t)n ? 0 : errno;
	close(fd);
	return NULL;
}

static int parse(char *spec, struct job *j)
{
	char *bar = strchr(spec, '|'), *bar2;

	if (!bar)
		return -1;
	*bar = '\0';
	j->file = spec;
	j->line = bar + 1;
	j->delay_us = 0;
	bar2 = strchr(j->line, '|');
	if (bar2) {
		*bar2 = '\0';
		j->delay_us = strtol(bar2 + 1, NULL, 0);
	}
	return 0;
}

static void run_group(struct job *jobs, int n, int group, int quiet)
{
	pthread_t tid[n];
	int i;

	pthread_barrier_init(&start, NULL, n);
	for (i = 0; i < n; i++)
		pthread_create(&tid[i], NULL, run, &jobs[i]);
	for (i = 0; i < n; i++)
		pthread_join(tid[i], NULL);
	pthread_barrier_destroy(&start);
	for (i = 0; i < n; i++)
		if (!quiet || jobs[i].err)
			printf("%d.%d %s\n", group, i + 1,
			       jobs[i].err ? strerror(jobs[i].err) : "ok");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct job *jobs = calloc(argc, sizeof(*jobs));
	int i = 1, n = 0, group = 1, quiet = 0;

	if (i < argc && !strcmp(argv[i], "-q")) {
		quiet = 1;
		i++;
	}
	if (!jobs || i >= argc) {
		fprintf(stderr, "usage: race [-q] 'FILE|LINE[|DELAY_US]'... [-- ...]...\n");
		return 2;
	}
	for (; i <= argc; i++) {
		if (i == argc || !strcmp(argv[i], "--")) {
			if (n)
				run_group(jobs, n, group++, quiet);
			n = 0;
			continue;
		}
		if (parse(argv[i], &jobs[n])) {
			fprintf(stderr, "race: '%s' is not FILE|LINE[|DELAY_US]\n", argv[i]);
			return 2;
		}
		n++;
	}
	return 0;
}
