#!/usr/bin/env bash
# Start-up cost of the readiness checks (the image's userspace: a few stats and one bounded read
# of ld.so.cache; the bootstrap interface: the routing table, this namespace's addresses, and a
# coordinator given as an address), side by side with a previous release in one hyperfine run:
# `nccl-wrap -q -- /bin/true` on the h100 fixture node (4 VFs from the SR-IOV env), this
# machine's own image root (/) and routing table. A coordinator given by name is not measured:
# its lookup is bounded by a 1 s deadline and depends on the cluster's DNS.
#
#   NCCL_WRAP_PREVIOUS=/path/to/previous/nccl-wrap bash bench/ready.sh [RUNS]
#   NCCL_WRAP_BIN=... likewise for a prebuilt current binary (else cargo builds it)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-500}
. bench/lib.sh
prev=$(realpath "${NCCL_WRAP_PREVIOUS:?set NCCL_WRAP_PREVIOUS to the previous release binary}")
load_env fixtures/nodes/h100-roce-sriov/env
args="-q --sysfs-root fixtures/nodes/h100-roce-sriov/sys --annotations /nonexistent --supervise=false -- $truebin"
hyperfine -N --warmup 50 --runs "$runs" --export-json "$tmp/ready.json" \
  "$prev $args" "$bin $args" "env MASTER_ADDR=10.1.2.3 $bin $args" >/dev/null 2>&1
python3 - "$tmp/ready.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
# On a shared, loaded machine the wall time carries other processes' preemptions; the CPU time
# (user + system, means) is this process's own work.
names = ["previous release", "this one (no coordinator: default route)", "this one, MASTER_ADDR=10.1.2.3"]
print("| binary | median wall ms | CPU (user+sys) ms | CPU over previous ms |")
print("|---|---|---|---|")
cpu0 = (r[0]["user"] + r[0]["system"]) * 1e3
for n, x in zip(names, r):
    cpu = (x["user"] + x["system"]) * 1e3
    print(f"| {n} | {x['median'] * 1e3:.3f} | {cpu:.3f} | {cpu - cpu0:+.3f} |")
PY
for b in "$prev" "$bin"; do
  if command -v strace >/dev/null; then
    strace -f -c -o "$tmp/sc" $b $args 2>/dev/null || true
    echo "system calls of $b: $(awk '/ total$/ {print $4}' "$tmp/sc")"
  fi
done
echo "runs per command: $runs; machine: $(nproc) cores, $(uname -r); image root /: $(ls /etc/ld.so.cache >/dev/null 2>&1 && echo "ld.so.cache $(stat -c %s /etc/ld.so.cache) bytes")"
