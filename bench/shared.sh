#!/usr/bin/env bash
# Start-up on a shared RDMA device: `nccl-wrap -- /bin/true` on the roce-shared-macvlan fixture
# node, run in a fresh network namespace holding pod c's interfaces (as tests/shared_devices.rs
# makes them), so the binary reads the pod's own addresses from the kernel and each port's whole
# GID table as far as the pod's own entry (14 non-empty entries of 255). Baselines in the same run: the floor (exec only), and, with
# NCCL_WRAP_BASE=/path/to/an/older/nccl-wrap, that binary on the same node (which cannot tell the
# pod's entries and reads each table only up to NCCL's pick). Hyperfine, no shell, medians; root.
#
#   bash bench/shared.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-500}
. bench/lib.sh
floor=${NCCL_WRAP_FLOOR:-$tmp/floor}
[ -n "${NCCL_WRAP_FLOOR:-}" ] || cc -static -O2 -o "$floor" bench/floor.c
root=fixtures/nodes/roce-shared-macvlan/sys
# Pod c of fixtures/nodes.py: rail 0's MAC and address on net1, rail 1's on net2.
specs="net1,0a:58:0a:14:00:35,10.20.0.53/24 net2,0a:58:0a:14:00:45,10.20.1.53/24"
cmds=("$floor $truebin" "$bin -q --sysfs-root $root --annotations /nonexistent -- $truebin")
[ -z "${NCCL_WRAP_BASE:-}" ] || cmds+=("$(realpath "$NCCL_WRAP_BASE") -q --sysfs-root $root --annotations /nonexistent -- $truebin")
"${pod_netns[@]}" "$specs" hyperfine -N --warmup 50 --runs "$runs" --export-json "$tmp/shared.json" "${cmds[@]}" >/dev/null 2>&1
python3 - "$tmp/shared.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
floor = r[0]["median"]
print(f"floor (exec only):           median {floor * 1e3:.3f} ms")
print(f"nccl-wrap, shared device:    median {r[1]['median'] * 1e3:.3f} ms (+{(r[1]['median'] - floor) * 1e3:.3f} ms over the floor)")
if len(r) > 2:
    print(f"baseline binary, same node:  median {r[2]['median'] * 1e3:.3f} ms (+{(r[2]['median'] - floor) * 1e3:.3f} ms over the floor)")
    print(f"ratio nccl-wrap / baseline:  {r[1]['median'] / r[2]['median']:.2f}")
PY
