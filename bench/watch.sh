#!/usr/bin/env bash
# What the node agent costs: `nccl-wrap watch` on a generated node of 16 HCAs x 2 RoCE ports
# (255-entry GID tables, mlx5's 17 IBTA counters and 13 hw_counters on every port: 32 ports,
# 960 counter files a round), both files written each round. CPU per round is the agent's own
# getrusage figure (nccl_wrap_agent_cpu_seconds_total, user + system) after N rounds minus after
# one, over N - 1, so start-up is left out; peak RSS is nccl_wrap_agent_max_rss_bytes, checked
# against /usr/bin/time's.
#
#   bash bench/watch.sh [ROUNDS]      # default 200, at a 0.1 s interval (about 20 s)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-200}
. bench/lib.sh
python3 fixtures/mknode.py synthetic "$tmp/big" --hcas 16 --ports 2 --gids 255 --gid-at 3 --counters >/dev/null
export NCCL_WRAP_SYSFS_ROOT=$tmp/big/sys NCCL_WRAP_PROC_ROOT=$tmp/big/proc NCCL_WRAP_DEV_ROOT=$tmp/big/dev
metric() { sed -n "s/^$1 //p" "$tmp/m.prom"; }
run() { # N: rounds; leaves the files in $tmp and /usr/bin/time's peak RSS (KiB) in $tmp/rss
  /usr/bin/time -f %M -o "$tmp/rss" "$bin" watch --interval 0.1 --jitter 0 --rounds "$1" \
    --features "$tmp/f" --metrics "$tmp/m.prom" 2>/dev/null
}
run 1
cpu1=$(metric nccl_wrap_agent_cpu_seconds_total)
run "$rounds"
cpuN=$(metric nccl_wrap_agent_cpu_seconds_total)
python3 - "$cpu1" "$cpuN" "$rounds" "$(metric nccl_wrap_agent_max_rss_bytes)" "$(cat "$tmp/rss")" \
  "$(metric nccl_wrap_round_duration_seconds)" "$(grep -c '^nccl_wrap_' "$tmp/m.prom")" "$(wc -c <"$tmp/m.prom")" <<'PY'
import sys
cpu1, cpun, n, rss, time_kib, dur, samples, size = sys.argv[1:]
per = (float(cpun) - float(cpu1)) / (int(n) - 1)
print(f"watch, 16 HCAs x 2 ports with counters: {per * 1e3:.2f} ms CPU per round (user + system, "
      f"{n} rounds); last round {float(dur) * 1e3:.2f} ms wall; peak RSS {int(rss) / 2**20:.2f} MiB "
      f"(/usr/bin/time: {int(time_kib) / 1024:.2f} MiB); metrics file {samples} samples, {int(size) / 1024:.0f} KiB")
PY
echo "machine: $(nproc) cores, $(uname -r)"
