/*
 * A worker whose main thread exits (pthread_exit) while a thread it
 * started goes on: /proc/PID/stat reads Z and /proc/PID/environ reads
 * empty, yet it runs. It ignores SIGTERM, writes its pid to argv[2], then
 * appends a CLOCK_REALTIME timestamp (ns) to argv[1] every 10 ms for ever.
 * Built by the tests of tenure run with the machine's cc.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static void *tick(void *path) {
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		FILE *f = fopen(path, "a");
		if (f) {
			fprintf(f, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
			fclose(f);
		}
		usleep(10000);
	}
	return 0;
}
int main(int argc, char **argv) {
	pthread_t t;
	if (argc != 3) return 2;
	signal(SIGTERM, SIG_IGN);
	FILE *p = fopen(argv[2], "w");
	if (!p) return 2;
	fprintf(p, "%d\n", (int)getpid());
	fclose(p);
	pthread_create(&t, 0, tick, argv[1]);
	pthread_exit(0);
}
