#!/usr/bin/env bash
# The gate with SIZE pods on loopback (the stand-in fabric of tests/gate.rs: the pair test is a
# hello exchange, so this measures the coordination, the listeners and the ring of pair-test
# connections, not RDMA). Rank 0 runs in one process, ranks 1..SIZE-1 as threads of another;
# printed per size: from the last pod's start (its join follows at once) to the verdict on every
# pod, rank 0's peak open descriptors, peak RSS and CPU time, and the members' CPU time a pod (on
# a machine with fewer cores than pods, the wall time is mostly theirs). Goal: at most 1 s at
# 1,024, linear.
#
#   bash bench/gate-scale.sh [SIZE...]        # default: 128 256 512 1024
#   GATE_SCALE_SECRET=s bash bench/gate-scale.sh 1024   # the same with every frame sealed
#   GATE_SCALE_TIMEOUT_MS=N                            # the pair tests' phase deadline (default 20000)
#   GATE_SCALE_BIN=path/to/gate_scale ...              # a prebuilt example (no cargo there)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${GATE_SCALE_BIN:-}" ]; then
  bin=$(realpath "$GATE_SCALE_BIN")
else
  cargo build --release -q --example gate_scale
  bin=$PWD/target/x86_64-unknown-linux-gnu/release/examples/gate_scale
fi
tmp=$(mktemp -d)
cleanup() { [ -n "${cpid:-}" ] && kill "$cpid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# One descriptor per listener, joins and pair-test connections: ~5 per pod in the members' process.
ulimit -n "$(ulimit -Hn)"
# Below the kernel's ephemeral range, so the pods' own outgoing connections never take a gate port.
read -r eph_lo _ < /proc/sys/net/ipv4/ip_local_port_range
for n in ${@:-128 256 512 1024}; do
  base=$((eph_lo - n - 1000))
  "$bin" coordinator "$n" "$base" > "$tmp/c.json" 2> "$tmp/c.err" &
  cpid=$!
  sleep 0.3
  "$bin" members "$n" "$base" > "$tmp/m.json" 2> "$tmp/m.err"
  wait "$cpid"; cpid=
  python3 - "$n" "$tmp/c.json" "$tmp/m.json" <<'PY'
import json, sys
n, c, m = int(sys.argv[1]), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
last = max(c["verdict_at"], m["last_verdict"])
print(f"{n:6d} pods: last start -> verdict on every pod {(last - m['last_start']) * 1e3:7.1f} ms; "
      f"started {m['started'] + int(c['start'])}/{n}, {c['pairs']} pairs; rank 0: peak {c['peak_fds']} fds, "
      f"peak RSS {c['peak_rss_kib'] / 1024:.1f} MiB, CPU {c['cpu_ms']} ms; members' process {m['peak_rss_kib'] / 1024:.0f} MiB, "
      f"CPU {m['cpu_ms']} ms ({m['cpu_ms'] / max(m['members'], 1):.2f} ms a pod)")
PY
done
echo "machine: $(nproc) cores, $(uname -r)"
