#!/usr/bin/env bash
# Builds nccl-wrap and runs it on bundled fixture nodes, no cluster and no RDMA hardware needed:
#   1. a start on NODE (default: an OpenShift H100 pod that was given four SR-IOV VFs, mlx5_6,
#      mlx5_7, mlx5_10 and mlx5_11, on a node with twelve RDMA devices), and what the command sees;
#   2. `nccl-wrap doctor` on FAULTY (default: an H100 node left in translated IOMMU mode, where
#      every RDMA send failed), which names what is wrong and how to fix it.
# Every root option points into the fixture (sysfs, proc, dev, the annotations file, and a fixture
# training image), so only the memlock line and the capabilities are this machine's own.
#
#   bash scripts/demo.sh [NODE [FAULTY]]        # any of fixtures/nodes/*
#
# Needs a Rust toolchain (rustup) and root for the build's packages (scripts/setup.sh --build:
# static rdma-core, libnl, clang and pkg-config; nothing the tests need).
set -euo pipefail
cd "$(dirname "$0")/.."
node=${1:-h100-roce-sriov}
faulty=${2:-translated-iommu}
for n in "$node" "$faulty"; do
  [ -d "fixtures/nodes/$n" ] || { echo "demo: no fixture node $n; there are: $(ls fixtures/nodes | tr '\n' ' ')" >&2; exit 2; }
done
bash scripts/setup.sh --build
cargo build --release -q
bin=${CARGO_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/nccl-wrap

# wrap NODE ARGS...: the binary with the node's roots and, where it has them, its device-plugin
# variables, in an environment of its own.
wrap() {
  local dir=fixtures/nodes/$1; shift
  local vars=(PATH=/usr/local/bin:/usr/bin:/bin)
  if [ -f "$dir/env" ]; then
    while IFS= read -r line; do case $line in *=*) vars+=("$line") ;; esac; done <"$dir/env"
  fi
  env -i "${vars[@]}" "$bin" --sysfs-root "$dir/sys" --proc-root "$dir/proc" --dev-root "$dir/dev" \
    --annotations "$dir/podnetinfo/annotations" --image-root fixtures/images/full "$@"
}
about() { head -1 "fixtures/nodes/$1/README.md" | sed 's/^# [^:]*: //'; }

echo "== $node: $(about "$node")"
echo "== nccl-wrap -- sh -c 'env | grep ^NCCL_'"
wrap "$node" -- sh -c 'echo "command sees:"; env | grep "^NCCL_" | sort | sed "s/^/  /"'

echo
echo "== $faulty: $(about "$faulty")"
echo "== nccl-wrap doctor"
rc=0
wrap "$faulty" doctor || rc=$?
echo "== doctor exited $rc (0 nothing fails, 1 a check fails, 2 it could not run)"
[ "$rc" -le 1 ]
