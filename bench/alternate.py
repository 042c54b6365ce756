#!/usr/bin/env python3
"""Alternates commands from one loop (posix_spawn, output to /dev/null) and prints each one's
median wall time and its difference from the first command's: a start-up figure that the drift
of a machine's load cannot slip between two commands, as it can between hyperfine's runs of one
command after another.

    python3 bench/alternate.py ROUNDS CMD1 ARGS... :: CMD2 ARGS... [:: ...]

Each command is an absolute path and its arguments; 20 warm-up rounds are not counted. Each
round runs the commands in a new order (shuffled, with a fixed seed), so that no command always
follows the same one: in a fixed order, the build that always ran right after the floor measured
up to 0.1 ms slower than the same code one place later (H100 host, bench/tables.sh).

Each line: the median, its difference from the first command's, then the mean user and system
CPU time (ms) and minor faults of one run (`wait4`'s rusage, the exec'd command's included).
"""
import os
import random
import statistics
import sys
import time


def main():
    rounds = int(sys.argv[1])
    cmds, cur = [], []
    for a in sys.argv[2:]:
        if a == "::":
            cmds.append(cur)
            cur = []
        else:
            cur.append(a)
    cmds.append(cur)
    env = dict(os.environ)
    devnull = os.open("/dev/null", os.O_WRONLY)
    out = [(os.POSIX_SPAWN_DUP2, devnull, 1), (os.POSIX_SPAWN_DUP2, devnull, 2)]
    times = [[] for _ in cmds]
    usage = [[0.0, 0.0, 0] for _ in cmds]
    order = list(range(len(cmds)))
    shuffle = random.Random(0).shuffle
    for i in range(rounds + 20):
        shuffle(order)
        for k in order:
            c = cmds[k]
            t = time.perf_counter()
            pid = os.posix_spawn(c[0], c, env, file_actions=out)
            _, _, ru = os.wait4(pid, 0)
            if i >= 20:
                times[k].append((time.perf_counter() - t) * 1e3)
                usage[k][0] += ru.ru_utime
                usage[k][1] += ru.ru_stime
                usage[k][2] += ru.ru_minflt
    first = statistics.median(times[0])
    for c, t, (user, system, faults) in zip(cmds, times, usage):
        m = statistics.median(t)
        cpu = f"user {user / rounds * 1e3:.3f} sys {system / rounds * 1e3:.3f} faults {faults / rounds:.1f}"
        print(f"{m:7.3f} ms  {m - first:+7.3f}  {cpu}  {' '.join(c)[:110]}")


if __name__ == "__main__":
    main()
