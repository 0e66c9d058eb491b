/* The parent side of the bad-input tests (test_bad_input.c, test_safety.c,
 * test_heap_errors.c); the child side is child_expect.h.
 *
 * scenario_main() re-executes the test binary (/proc/self/exe <scenario>)
 * in a forked child for each scenario, with a clean environment (no BRISK_*
 * variables except the scenario's), captures the child's stdout and stderr
 * through pipes, and checks:
 *   - stderr is exactly the announced lines, in order, each ending in "\n"
 *     and holding no "\r". The child announces each line on stdout before
 *     the bad call as
 *       "EXPECT <line>"                           the whole line,
 *       "EXPECTP <prefix>"                        a line that starts with the
 *                                                 prefix and goes on, or
 *       "EXPECTR <prefix>\t<reason>\t<reason>..."  the prefix followed by
 *                                                 exactly one of the reasons;
 *   - the child printed "DONE" and exited 0 (it verified that the bad call
 *     failed as documented and that nothing else was damaged);
 *   - with BRISK_ON_ERROR=abort (scenarios marked abort, or every scenario
 *     again in a suite's abort pass): the child died by SIGABRT before it
 *     printed "AFTER", and stderr is only the first announced line. Unless
 *     the suite's children may announce several lines before the first bad
 *     call (expect_upfront), the child must have announced exactly one.
 * A scenario marked info is a known limit: brisk may or may not report
 * it, so its stderr is printed rather than compared, but it still fails
 * when the child crashes, hangs, fails its heap checks (no "DONE", a
 * non-zero exit) or writes anything but "brisk: error: " lines to stderr.
 * Any other scenario but "clean" must announce at least one line.
 */
#ifndef BRISK_TEST_SCENARIO_RUNNER_H
#define BRISK_TEST_SCENARIO_RUNNER_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUNNER_FN static __attribute__((unused))

extern char **environ;

typedef struct {
  const char *name;
  const char *env; /* one extra setting ("BRISK_SEGMENT_CACHE=0"), or NULL */
  int abort;       /* runs with BRISK_ON_ERROR=abort: SIGABRT expected */
  int info;        /* a known limit: stderr printed, not compared (see above) */
  void (*run)(void);
} scenario_t;

typedef struct {
  const char *name; /* "bad_input": the binary is test_bad_input */
  const scenario_t *scenarios;
  int count;
  int abort_pass;     /* run each scenario but "clean" and info ones again with BRISK_ON_ERROR=abort */
  int expect_upfront; /* children may announce several lines before the first bad call */
  int start_line;     /* the child prints "START" first, so stdout's buffer is allocated before the scenario */
} suite_t;

enum { CHILD_TIMEOUT = 30, INFO_TIMEOUT = 10, MAX_EXPECT = 32 };

static const char *g_runner_name = "scenario_runner";

typedef struct {
  char *data;
  size_t len, cap;
} buf_t;

RUNNER_FN void buf_add(buf_t *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t nc = (b->len + n + 1) * 2;
    char *d = realloc(b->data, nc);
    if (!d) { fprintf(stderr, "test_%s: out of memory\n", g_runner_name); exit(2); }
    b->data = d;
    b->cap = nc;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

/* Print a string with control characters visible. */
RUNNER_FN void show(const char *label, const char *s) {
  printf("      %s: \"", label);
  for (; s && *s; s++) {
    if (*s == '\n') printf("\\n");
    else if ((unsigned char)*s < 0x20) printf("\\x%02x", (unsigned char)*s);
    else putchar(*s);
  }
  printf("\"\n");
}

typedef enum { EXPECT_EXACT, EXPECT_PREFIX, EXPECT_REASONS } expect_kind_t;
typedef struct {
  expect_kind_t kind;
  char *text;    /* the whole line, or the prefix */
  char *reasons; /* EXPECT_REASONS: tab-separated alternatives */
} expect_t;

/* Does the stderr line [e, e+len) match x? */
RUNNER_FN int line_matches(const char *e, size_t len, const expect_t *x) {
  size_t tl = strlen(x->text);
  if (memchr(e, '\r', len)) return 0;
  if (x->kind == EXPECT_EXACT) return len == tl && strncmp(e, x->text, tl) == 0;
  if (len <= tl || strncmp(e, x->text, tl) != 0) return 0;
  if (x->kind == EXPECT_PREFIX) return 1;
  const char *rest = e + tl;
  size_t rl = len - tl;
  const char *r = x->reasons;
  while (*r) {
    const char *tab = strchr(r, '\t');
    size_t n = tab ? (size_t)(tab - r) : strlen(r);
    if (n == rl && strncmp(rest, r, n) == 0) return 1;
    if (!tab) break;
    r = tab + 1;
  }
  return 0;
}

/* The expected line as shown on failure: "prefix..." or "prefix{a | b}". */
RUNNER_FN void show_expect(buf_t *want, const expect_t *x) {
  buf_add(want, x->text, strlen(x->text));
  if (x->kind == EXPECT_PREFIX) buf_add(want, "...", 3);
  if (x->kind == EXPECT_REASONS) {
    buf_add(want, "{", 1);
    for (const char *r = x->reasons; *r; r++) buf_add(want, *r == '\t' ? " | " : r, *r == '\t' ? 3 : 1);
    buf_add(want, "}", 1);
  }
  buf_add(want, "\n", 1);
}

/* Run the child with its output captured: 1 if it was killed at the
 * deadline, -1 if it could not be started. */
RUNNER_FN int run_child(const suite_t *s, const scenario_t *sc, int abort_mode, buf_t *bo, buf_t *be, int *status) {
  int out[2], err[2];
  if (pipe(out) || pipe(err)) { perror("pipe"); return -1; }
  /* environment: no BRISK_* from outside, plus the scenario's */
  int n = 0;
  while (environ[n]) n++;
  char **envp = calloc((size_t)n + 3, sizeof *envp);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (strncmp(environ[i], "BRISK_", 6) != 0) envp[k++] = environ[i];
  if (sc->env) envp[k++] = (char *)sc->env;
  if (abort_mode) envp[k++] = (char *)"BRISK_ON_ERROR=abort";
  envp[k] = NULL;
  char argv0[64];
  snprintf(argv0, sizeof argv0, "test_%s", s->name);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); free(envp); return -1; }
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err[1], 2);
    close(out[0]); close(out[1]); close(err[0]); close(err[1]);
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl); /* the abort runs must not dump core */
    char *argv[] = {argv0, (char *)sc->name, NULL};
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  free(envp);
  close(out[1]);
  close(err[1]);
  struct pollfd pf[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  time_t deadline = time(NULL) + (sc->info ? INFO_TIMEOUT : CHILD_TIMEOUT);
  int timed_out = 0;
  while (open_fds > 0) {
    int r = poll(pf, 2, 500);
    if (r < 0 && errno == EINTR) continue;
    if (time(NULL) > deadline) { timed_out = 1; kill(pid, SIGKILL); break; }
    for (int i = 0; i < 2; i++) {
      if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char tmp[4096];
      ssize_t got = read(pf[i].fd, tmp, sizeof tmp);
      if (got <= 0) { close(pf[i].fd); pf[i].fd = -1; open_fds--; continue; }
      buf_add(i == 0 ? bo : be, tmp, (size_t)got);
    }
  }
  for (int i = 0; i < 2; i++) if (pf[i].fd >= 0) close(pf[i].fd);
  *status = 0;
  waitpid(pid, status, 0);
  return timed_out;
}

/* Does stderr hold only whole "brisk: error: " lines? */
RUNNER_FN int only_error_lines(const char *e) {
  while (*e) {
    const char *nl = strchr(e, '\n');
    if (!nl || strncmp(e, "brisk: error: ", 14) != 0) return 0;
    e = nl + 1;
  }
  return 1;
}

/* A known limit: print what happened; 0 when the process came through
 * whole (see the top of this file). */
RUNNER_FN int report_info(const suite_t *s, const scenario_t *sc, int width, int timed_out, int status, int done,
                          const buf_t *bo, const buf_t *be) {
  char what[160];
  int ok = 0;
  if (timed_out) snprintf(what, sizeof what, "FAILED: the child hung (killed)");
  else if (WIFSIGNALED(status))
    snprintf(what, sizeof what, "FAILED: the child died by %s", strsignal(WTERMSIG(status)));
  else if (WEXITSTATUS(status) != 0 || !done) snprintf(what, sizeof what, "FAILED: the child's heap checks failed");
  else if (!only_error_lines(be->data)) snprintf(what, sizeof what, "FAILED: stderr holds more than brisk's error lines");
  else { snprintf(what, sizeof what, "the child finished, heap checks passed"); ok = 1; }
  printf("[%s] %-*s info (known limit): %s; stderr: %s", s->name, width, sc->name, what,
         be->data[0] ? "" : "(nothing: not detected)\n");
  if (be->data[0]) {
    char *s = be->data, *e;
    int lines = 0;
    while ((e = strchr(s, '\n')) && lines < 3) { printf("%s%.*s\n", lines ? "        " : "", (int)(e - s), s); s = e + 1; lines++; }
    if (!lines) printf("%s\n", s);
  }
  char *save = NULL;
  char *copy = strdup(bo->data);
  for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
    if (strncmp(l, "INFO ", 5) == 0 || strncmp(l, "FAIL ", 5) == 0) printf("        %s\n", l);
  free(copy);
  return ok ? 0 : 1;
}

/* One run of a scenario; 0 if it passed. */
RUNNER_FN int run_scenario(const suite_t *s, const scenario_t *sc, int abort_mode, int width) {
  abort_mode |= sc->abort;
  buf_t bo = {0}, be = {0};
  buf_add(&bo, "", 0);
  buf_add(&be, "", 0);
  int status;
  int timed_out = run_child(s, sc, abort_mode, &bo, &be, &status);
  if (timed_out < 0) { free(bo.data); free(be.data); return 1; }

  /* the announced lines, in order */
  buf_t want = {0};
  buf_add(&want, "", 0);
  expect_t exp[MAX_EXPECT];
  int nexp = 0, too_many = 0, done = 0, after = 0;
  char *save = NULL;
  char *copy = strdup(bo.data);
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    expect_t x = {EXPECT_EXACT, NULL, NULL};
    if (strncmp(line, "EXPECT ", 7) == 0) {
      x.text = line + 7;
    } else if (strncmp(line, "EXPECTP ", 8) == 0) {
      x.kind = EXPECT_PREFIX;
      x.text = line + 8;
    } else if (strncmp(line, "EXPECTR ", 8) == 0) {
      x.kind = EXPECT_REASONS;
      x.text = line + 8;
      char *tab = strchr(x.text, '\t');
      if (tab) { *tab = '\0'; x.reasons = tab + 1; }
      else x.reasons = (char *)"";
    } else if (strcmp(line, "DONE") == 0) {
      done = 1;
    } else if (strcmp(line, "AFTER") == 0) {
      after = 1;
    }
    if (!x.text) continue;
    show_expect(&want, &x);
    if (nexp < MAX_EXPECT) exp[nexp++] = x;
    else too_many = 1;
  }

  if (sc->info) {
    int failed = report_info(s, sc, width, timed_out, status, done, &bo, &be);
    free(bo.data); free(be.data); free(want.data); free(copy);
    return failed;
  }

  /* compare stderr line by line; with abort the process stops at the first */
  int stderr_ok = 1;
  {
    const char *e = be.data;
    int i = 0;
    while (*e) {
      const char *nl = strchr(e, '\n');
      if (!nl || i >= nexp) { stderr_ok = 0; break; }
      if (!line_matches(e, (size_t)(nl - e), &exp[i])) { stderr_ok = 0; break; }
      e = nl + 1;
      i++;
    }
    if (abort_mode ? i != 1 : i != nexp) stderr_ok = 0;
  }

  int ok = 1;
  char why[512] = "";
  if (timed_out) {
    ok = 0;
    snprintf(why, sizeof why, "child did not finish within %d s (hang or deadlock after the bad call?)", CHILD_TIMEOUT);
  } else if (abort_mode) {
    if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)) {
      ok = 0;
      if (WIFSIGNALED(status))
        snprintf(why, sizeof why, "with BRISK_ON_ERROR=abort the child died by signal %d (%s), expected SIGABRT",
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
      else
        snprintf(why, sizeof why, "with BRISK_ON_ERROR=abort the child exited with status %d instead of SIGABRT%s",
                 WEXITSTATUS(status), after ? " (it continued after the bad call)" : "");
    } else if (after) {
      ok = 0;
      snprintf(why, sizeof why, "the child continued after the bad call before aborting");
    } else if (!s->expect_upfront && nexp != 1) {
      ok = 0;
      snprintf(why, sizeof why, "the child announced %d lines before aborting, expected 1", nexp);
    }
  } else {
    if (WIFSIGNALED(status)) {
      ok = 0;
      snprintf(why, sizeof why, "the child was killed by signal %d (%s)%s", WTERMSIG(status),
               strsignal(WTERMSIG(status)), after ? " after the bad call" : " during the bad call");
    } else if (WEXITSTATUS(status) != 0 || !done) {
      ok = 0;
      snprintf(why, sizeof why, "the child exited with status %d%s", WEXITSTATUS(status),
               done ? "" : " without finishing its checks");
    }
  }
  if (nexp == 0 && strcmp(sc->name, "clean") != 0 && ok) {
    ok = 0;
    snprintf(why, sizeof why, "internal: the child sent no expected line");
  }
  if (too_many && ok) {
    ok = 0;
    snprintf(why, sizeof why, "internal: the child announced more than %d lines", MAX_EXPECT);
  }
  if (!stderr_ok) ok = 0;

  char name[128];
  snprintf(name, sizeof name, "%s%s", abort_mode && !sc->abort ? "abort_" : "", sc->name);
  if (ok) {
    printf("[%s] %-*s ok%s\n", s->name, width, name, abort_mode ? " (SIGABRT)" : "");
  } else {
    printf("[%s] %-*s FAILED%s%s\n", s->name, width, name, why[0] ? ": " : "", why);
    if (!stderr_ok) {
      printf("      stderr differs from the expected error line(s)%s\n",
             abort_mode ? " (with abort: the first line only)" : "");
      show("expected", want.data);
      show("got     ", be.data);
    }
    for (char *f = bo.data; (f = strstr(f, "FAIL ")) != NULL; f++) {
      char *e = strchr(f, '\n');
      printf("      child: %.*s\n", (int)(e ? e - f : (long)strlen(f)), f);
      if (!e) break;
    }
    printf("      reproduce: %s%s%sbuild/tests/test_%s %s\n", sc->env ? sc->env : "", sc->env ? " " : "",
           abort_mode ? "BRISK_ON_ERROR=abort " : "", s->name, sc->name);
  }
  fflush(stdout);
  free(bo.data);
  free(be.data);
  free(want.data);
  free(copy);
  return ok ? 0 : 1;
}

RUNNER_FN int has_abort_run(const suite_t *s, const scenario_t *sc) {
  return s->abort_pass && !sc->abort && !sc->info && strcmp(sc->name, "clean") != 0;
}

/* main() of a test: "test_x <scenario>" runs one scenario (the child);
 * without arguments, every scenario in a child of its own. */
RUNNER_FN int scenario_main(const suite_t *s, int argc, char **argv) {
  g_runner_name = s->name;
  if (argc >= 2) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    alarm(CHILD_TIMEOUT - 5);
    if (s->start_line) printf("START\n");
    for (int i = 0; i < s->count; i++)
      if (strcmp(argv[1], s->scenarios[i].name) == 0) {
        if (s->scenarios[i].info) alarm(INFO_TIMEOUT - 2);
        s->scenarios[i].run();
        return 0; /* run() exits */
      }
    fprintf(stderr, "test_%s: unknown scenario %s\n", s->name, argv[1]);
    return 2;
  }
  int width = 0;
  for (int i = 0; i < s->count; i++) {
    int w = (int)strlen(s->scenarios[i].name) + (has_abort_run(s, &s->scenarios[i]) ? 6 : 0);
    if (w > width) width = w;
  }
  int failed = 0, runs = 0;
  for (int i = 0; i < s->count; i++) {
    failed += run_scenario(s, &s->scenarios[i], 0, width);
    runs++;
    if (has_abort_run(s, &s->scenarios[i])) {
      failed += run_scenario(s, &s->scenarios[i], 1, width);
      runs++;
    }
  }
  const char *what = s->abort_pass ? "runs" : "scenarios";
  if (failed) {
    printf("[%s] FAILED: %d of %d %s\n", s->name, failed, runs, what);
    return 1;
  }
  printf("[%s] all %d %s passed\n", s->name, runs, what);
  return 0;
}

#endif
