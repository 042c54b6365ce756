#!/usr/bin/env bash
# Set up, build, and run nccl-wrap on a bundled fixture node: an OpenShift H100 pod that was given
# four SR-IOV VFs (mlx5_6, mlx5_7, mlx5_10, mlx5_11) on a node with twelve RDMA devices.
#
#   bash scripts/demo.sh [NODE]
set -euo pipefail
cd "$(dirname "$0")/.."
node=${1:-h100-roce-sriov}
bash scripts/setup.sh
cargo build --release -q
bin=target/x86_64-unknown-linux-gnu/release/nccl-wrap
dir=fixtures/nodes/$node
echo "== $node: $(head -1 "$dir/README.md" | sed 's/^# [^:]*: //')"
args=()
if [ -f "$dir/env" ]; then
  while IFS= read -r line; do args+=("${line%%=*}=${line#*=}"); done < "$dir/env"
fi
echo "== nccl-wrap -- sh -c 'env | grep ^NCCL_'"
env "${args[@]}" "$bin" --sysfs-root "$dir/sys" --annotations "$dir/podnetinfo/annotations" \
  -- sh -c 'echo "command sees:"; env | grep "^NCCL_" | sort | sed "s/^/  /"'
