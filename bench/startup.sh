#!/usr/bin/env bash
# Start-up cost of nccl-wrap: whole-process wall time of `nccl-wrap -- /bin/true` against
# `/bin/true` alone (hyperfine, no shell, medians), peak RSS, and the stripped binary size.
#
#   bash bench/startup.sh [RUNS]
#   NCCL_WRAP_BIN=/path/to/nccl-wrap bash bench/startup.sh [RUNS]   # a prebuilt binary, no cargo
#
# Nodes: the 4-HCA fixture h100-roce-sriov (SR-IOV env), and a generated node of 16 HCAs x 2 RoCE
# ports with 255-entry GID tables, read once through the SR-IOV env and once by the sysfs fallback.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000}
. bench/lib.sh
synthetic_node "$tmp/big"

unset_env() { for v in $(env | grep -o '^PCIDEVICE_[A-Za-z0-9_]*'); do unset "$v"; done; }

measure() { # name sysfs-root
  local name=$1 root=$2
  hyperfine -N --warmup 100 --runs "$runs" --export-json "$tmp/$name.json" \
    "$truebin" "$bin -q --sysfs-root $root --annotations /nonexistent -- $truebin" >/dev/null 2>&1
  # Peak RSS (KiB) by GNU time, whose fork() copies its own ~1 MiB: /bin/true shows that floor.
  local rss=0 base_rss=0
  if [ -x /usr/bin/time ]; then
    base_rss=$(/usr/bin/time -f %M "$truebin" 2>&1 >/dev/null)
    rss=$(/usr/bin/time -f %M "$bin" -q --sysfs-root "$root" --annotations /nonexistent env 2>&1 >/dev/null | tail -1)
  fi
  python3 - "$tmp/$name.json" "$name" "$rss" "$base_rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
base, wrap = r[0]["median"] * 1e3, r[1]["median"] * 1e3
print(f"| {sys.argv[2]} | {base:.3f} | {wrap:.3f} | {wrap - base:+.3f} | {wrap / base:.2f}x | {int(sys.argv[3]) / 1024:.2f} (true: {int(sys.argv[4]) / 1024:.2f}) |")
PY
}

echo "| node | /bin/true median ms | nccl-wrap -- /bin/true median ms | added ms | ratio | peak RSS MiB |"
echo "|---|---|---|---|---|---|"
mkdir -p "$tmp/empty"
measure "empty tree (the cost of exec'ing a second program)" "$tmp/empty"
load_env fixtures/nodes/h100-roce-sriov/env
measure "4-HCA fixture h100-roce-sriov (SR-IOV env)" fixtures/nodes/h100-roce-sriov/sys
unset_env
load_env "$tmp/big/env"
measure "16 HCAs x 2 ports, 255 GIDs (SR-IOV env)" "$tmp/big/sys"
unset_env
measure "16 HCAs x 2 ports, 255 GIDs (sysfs fallback)" "$tmp/big/sys"
echo
echo "stripped binary: $(stat -c %s "$bin") bytes"
echo "runs per command: $runs; machine: $(nproc) cores, $(uname -r)"
