#!/usr/bin/env bash
# Whole-process time of `nccl-wrap doctor --json --no-selftest` on a generated node of 16 HCAs x 2
# RoCE ports with 255-entry GID tables, its SR-IOV env loaded (hyperfine, no shell; the median).
# Goal: under 20 ms.
#
#   bash bench/doctor.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
. bench/lib.sh
synthetic_node "$tmp/big"
load_env "$tmp/big/env"
export NCCL_WRAP_SYSFS_ROOT=$tmp/big/sys NCCL_WRAP_PROC_ROOT=$tmp/big/proc NCCL_WRAP_DEV_ROOT=$tmp/big/dev
export NCCL_WRAP_ANNOTATIONS=/nonexistent
checks=$("$bin" doctor --json --no-selftest | python3 -c 'import json,sys; j=json.load(sys.stdin); print(len(j["checks"]), j["counts"])') || true
hyperfine -N --warmup 20 --runs "$runs" --export-json "$tmp/doctor.json" "$bin doctor --json --no-selftest" >/dev/null
python3 - "$tmp/doctor.json" "$checks" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
print(f"doctor --json --no-selftest, 16 HCAs x 2 ports, 255 GIDs: median {r['median'] * 1e3:.2f} ms "
      f"(mean {r['mean'] * 1e3:.2f} ± {r['stddev'] * 1e3:.2f} ms, min {r['min'] * 1e3:.2f}, max {r['max'] * 1e3:.2f}; "
      f"{len(r['times'])} runs; checks: {sys.argv[2]})")
PY
echo "machine: $(nproc) cores, $(uname -r)"
