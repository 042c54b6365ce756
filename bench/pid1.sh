#!/usr/bin/env bash
# Cost of running as an init process (--init: fork, supervise, reap) against plain exec:
#   1. added wall time of `nccl-wrap --init -- /bin/true` over `nccl-wrap --init=false -- /bin/true`
#      (hyperfine, no shell, medians);
#   2. signal forwarding latency: CLOCK_MONOTONIC from just before kill(SIGTERM) on nccl-wrap to
#      the child's SIGTERM handler, median over RUNS (against kill on the child itself).
#
#   bash bench/pid1.sh [RUNS]
#
# The helper for 2 is C, compiled here into a temporary directory; nothing built is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-100}
. bench/lib.sh
mkdir "$tmp/sys"
wrap="$bin -q --sysfs-root $tmp/sys --annotations /nonexistent"

hyperfine -N --warmup 20 --runs 300 --export-json "$tmp/startup.json" \
  "$truebin" "$wrap --init=false -- $truebin" "$wrap --init -- $truebin" >/dev/null 2>&1

cat > "$tmp/sigbench.c" <<'C'
/* sigbench RUNS [WRAPPER ARGS...]: starts `[WRAPPER ARGS... --] sigbench --recv FD` RUNS times,
 * waits until the receiver's SIGTERM handler is in place, notes CLOCK_MONOTONIC, sends SIGTERM
 * to the process it started (the wrapper, or the receiver itself without one), and reads the
 * receiver's own CLOCK_MONOTONIC from its handler. Prints the median and p90 in microseconds. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int out_fd;
static void on_term(int sig) {
  struct timespec t;
  (void)sig;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (write(out_fd, &t, sizeof t) < 0) _exit(3);
  _exit(0);
}
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--recv") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    out_fd = atoi(argv[2]);
    sigaction(SIGTERM, &sa, NULL);
    if (write(out_fd, "R", 1) != 1) return 2;
    for (;;) pause();
  }
  int runs = atoi(argv[1]);
  double *us = calloc(runs, sizeof *us);
  for (int i = 0; i < runs; i++) {
    int p[2];
    if (pipe(p)) return 1;
    char fd[16];
    snprintf(fd, sizeof fd, "%d", p[1]);
    char *args[64];
    int n = 0;
    for (int a = 2; a < argc && n < 58; a++) args[n++] = argv[a];
    if (n) args[n++] = "--";
    args[n++] = argv[0];
    args[n++] = "--recv";
    args[n++] = fd;
    args[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
      close(p[0]);
      execv(args[0], args);
      _exit(127);
    }
    close(p[1]);
    char r;
    if (read(p[0], &r, 1) != 1) return 1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    kill(pid, SIGTERM);
    if (read(p[0], &t1, sizeof t1) != sizeof t1) return 1;
    close(p[0]);
    waitpid(pid, NULL, 0);
    us[i] = (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
  }
  qsort(us, runs, sizeof *us, cmp);
  printf("%.1f %.1f\n", us[runs / 2], us[runs * 9 / 10]);
  return 0;
}
C
gcc -O2 -o "$tmp/sigbench" "$tmp/sigbench.c"
# shellcheck disable=SC2086
read -r direct_med direct_p90 < <("$tmp/sigbench" "$runs")
# shellcheck disable=SC2086
read -r init_med init_p90 < <("$tmp/sigbench" "$runs" $wrap --init 2>/dev/null)

python3 - "$tmp/startup.json" "$direct_med" "$direct_p90" "$init_med" "$init_p90" "$runs" <<'PY'
import json, sys
r = [x["median"] * 1e3 for x in json.load(open(sys.argv[1]))["results"]]
true, plain, init = r
print("| measure | median |")
print("|---|---|")
print(f"| /bin/true alone | {true:.3f} ms |")
print(f"| nccl-wrap --init=false -- /bin/true (exec) | {plain:.3f} ms |")
print(f"| nccl-wrap --init -- /bin/true (supervised) | {init:.3f} ms |")
print(f"| added by --init over exec | {init - plain:+.3f} ms |")
print(f"| SIGTERM to the child itself, kill() to handler | {float(sys.argv[2]):.1f} us (p90 {float(sys.argv[3]):.1f}) |")
print(f"| SIGTERM to nccl-wrap --init, kill() to the child's handler | {float(sys.argv[4]):.1f} us (p90 {float(sys.argv[5]):.1f}) |")
print(f"\nhyperfine -N --warmup 20 --runs 300; latency over {sys.argv[6]} runs each")
PY
echo "machine: $(nproc) cores, $(uname -r)"
