#!/usr/bin/env bash
# Start-up cost of nccl-wrap (exec mode): whole-process wall time of `nccl-wrap -- /bin/true`
# against two baselines measured in the same run: `/bin/true` alone, and the floor, a static C
# program that only execs its arguments (built here from bench/floor.c). What nccl-wrap adds over
# the floor is its own cost; the floor over /bin/true is the cost of exec'ing a second program at
# all. Hyperfine, no shell, medians; plus peak RSS, page faults and the stripped binary size.
#
#   bash bench/startup.sh [RUNS]
#   NCCL_WRAP_BIN=/path/to/nccl-wrap bash bench/startup.sh [RUNS]   # a prebuilt binary, no cargo
#   NCCL_WRAP_FLOOR=/path/to/floor ...                               # a prebuilt floor (no cc -static)
#
# Nodes: an empty sysfs tree (the binary's own start), the 12-HCA fixture h100-roce-sriov (the
# pod's 4 VFs named by the SR-IOV env), and a generated node of 16 HCAs x 2 RoCE ports with
# 255-entry GID tables, read once through the SR-IOV env and once by the sysfs fallback. Verbs
# are not consulted for a fixture tree (they read the kernel's /sys), so the verbs probe is
# measured in the Soft-RoCE lab (tests/lab, scenario 60-timing).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000}
. bench/lib.sh
synthetic_node "$tmp/big"
floor=${NCCL_WRAP_FLOOR:-$tmp/floor}   # a prebuilt floor, for hosts without a static libc
[ -n "${NCCL_WRAP_FLOOR:-}" ] || cc -static -O2 -o "$floor" bench/floor.c

unset_env() { for v in $(env | grep -o '^PCIDEVICE_[A-Za-z0-9_]*'); do unset "$v"; done; }

measure() { # name sysfs-root
  local name=$1 root=$2
  hyperfine -N --warmup 100 --runs "$runs" --export-json "$tmp/$name.json" \
    "$truebin" "$floor $truebin" "$bin -q --sysfs-root $root --annotations /nonexistent -- $truebin" >/dev/null 2>&1
  # Peak RSS (KiB) by GNU time, whose fork() copies its own ~1 MiB: /bin/true shows that floor.
  local rss=0 base_rss=0 faults=0
  if [ -x /usr/bin/time ]; then
    base_rss=$(/usr/bin/time -f %M "$truebin" 2>&1 >/dev/null)
    rss=$(/usr/bin/time -f %M "$bin" -q --sysfs-root "$root" --annotations /nonexistent env 2>&1 >/dev/null | tail -1)
    faults=$(/usr/bin/time -f %R "$bin" -q --sysfs-root "$root" --annotations /nonexistent env 2>&1 >/dev/null | tail -1)
  fi
  python3 - "$tmp/$name.json" "$name" "$rss" "$base_rss" "$faults" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
true, floor, wrap = (x["median"] * 1e3 for x in r)
print(f"| {sys.argv[2]} | {true:.3f} | {floor:.3f} | {wrap:.3f} | {wrap - floor:+.3f} | {wrap / floor:.2f}x | {int(sys.argv[3]) / 1024:.2f} (true: {int(sys.argv[4]) / 1024:.2f}) | {sys.argv[5]} |")
PY
}

echo "| node | /bin/true ms | floor -- /bin/true ms | nccl-wrap -- /bin/true ms | over the floor ms | ratio to floor | peak RSS MiB | minor faults |"
echo "|---|---|---|---|---|---|---|---|"
mkdir -p "$tmp/empty"
measure "empty tree (the binary's own start)" "$tmp/empty"
load_env fixtures/nodes/h100-roce-sriov/env
measure "12-HCA fixture h100-roce-sriov (4 VFs, SR-IOV env)" fixtures/nodes/h100-roce-sriov/sys
unset_env
load_env "$tmp/big/env"
measure "16 HCAs x 2 ports, 255 GIDs (SR-IOV env)" "$tmp/big/sys"
unset_env
measure "16 HCAs x 2 ports, 255 GIDs (sysfs fallback)" "$tmp/big/sys"
echo
echo "stripped binary: $(stat -c %s "$bin") bytes ($(file -b "$bin" | cut -d, -f1-2))"
echo "runs per command: $runs; machine: $(nproc) cores, $(uname -r)"
