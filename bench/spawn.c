/* bench_spawn: runs one benchmark child and reports its wait4 rusage.
 *
 *   bench_spawn OUTFILE PRELOAD PROGRAM [ARGS...]
 *
 * The harness is a Python process of some tens of MiB, and ru_maxrss of a
 * process forked from it keeps that size even after exec (Linux carries
 * the peak of the pre-exec image into the child's maxrss). So the harness
 * starts this small program, which forks the workload itself: the peak RSS
 * reported is the workload's own. PRELOAD (may be empty) becomes the
 * child's LD_PRELOAD only, so this launcher runs without it.
 *
 * OUTFILE receives one line:
 *   status=<exit code or -signal> maxrss_kib=N utime=S stime=S wall=S
 * and bench_spawn exits with the child's exit code, or 128 + its signal.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static volatile pid_t child;

static void forward(int sig) {
  if (child > 0) kill(child, sig);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s OUTFILE PRELOAD PROGRAM [ARGS...]\n", argv[0]);
    return 2;
  }
  unsetenv("LD_PRELOAD");
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) {
    perror("bench_spawn: fork");
    return 2;
  }
  if (pid == 0) {
    if (argv[2][0]) setenv("LD_PRELOAD", argv[2], 1);
    execvp(argv[3], argv + 3);
    fprintf(stderr, "bench_spawn: cannot run %s: %s\n", argv[3], strerror(errno));
    _exit(127);
  }
  child = pid;
  signal(SIGTERM, forward);
  signal(SIGINT, forward);
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      perror("bench_spawn: wait4");
      return 2;
    }
  }
  double wall = now() - t0;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  FILE *f = fopen(argv[1], "w");
  if (f) {
    fprintf(f, "status=%d maxrss_kib=%ld utime=%.6f stime=%.6f wall=%.6f\n", code, ru.ru_maxrss,
            (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6,
            (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6, wall);
    fclose(f);
  }
  return code >= 0 ? code : 128 - code;
}
