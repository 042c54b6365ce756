#!/usr/bin/env bash
# Runs every test: formatting and lints, unit and integration tests (fixture nodes, real memlock
# limits, real PID namespaces), the fixture trees' consistency, the deploy kit's manifests and
# report, the container image, and the Soft-RoCE lab under QEMU. Needs root (namespaces, podman,
# apt for the lab).
#
#   bash scripts/test.sh          # everything
#   SKIP_LAB=1 bash scripts/test.sh
#   SKIP_AARCH64=1 bash scripts/test.sh   # without the aarch64 (Grace) build and its tests
#
# The aarch64 steps: the cross build (scripts/build-aarch64.sh), rdma-sys's binding layouts and
# the cargo test suite under qemu-user, the same-plan check against x86_64, the arm64 image in the
# manifest list, and the lab's 00-smoke, 20-selftest, 25-verbs and 30-netns-shared on Debian's
# arm64 kernel (qemu-system-aarch64, TCG). SKIP_AARCH64_LAB=1 leaves out only that lab subset.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo; echo "== $*"; }
logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT

step "setup"
bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --all-targets -q -- -D warnings
step "cargo test"
cargo test -q 2>&1 | tee "$logs/cargo-test"
step "fixtures are what mknode.py generates"
python3 fixtures/mknode.py --check
step "deploy kit: render, schema-validate, policy and report tests"
bash tests/deploy/validate.sh 2>&1 | tee "$logs/deploy"

step "static release binary"
cargo build --release -q
bin=target/x86_64-unknown-linux-gnu/release/nccl-wrap
kind=$(file -b "$bin")
echo "$bin: $kind"
case "$kind" in *static*) ;; *) echo "not statically linked" >&2; exit 1 ;; esac

step "container image"
export CONTAINERS_CONF=$PWD/ci/containers.conf
podman --storage-driver vfs build -q --platform linux/amd64 -t localhost/nccl-wrap:test -f Containerfile . >/dev/null
out=$(podman --storage-driver vfs run --rm -v "$PWD/fixtures/nodes/h200-ib/sys:/fixture-sys:ro" \
  localhost/nccl-wrap:test env --sysfs-root /fixture-sys)
echo "$out"
[ "$out" = "export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1'" ] \
  || { echo "unexpected output from the image" >&2; exit 1; }
podman --storage-driver vfs rmi -f localhost/nccl-wrap:test >/dev/null

if [ -z "${SKIP_AARCH64:-}" ]; then
  a64=target/aarch64-unknown-linux-gnu/release/nccl-wrap
  step "aarch64: static build, images and manifest list"
  bash scripts/build-aarch64.sh --image
  step "aarch64: rdma-sys binding layouts under qemu-user"
  cargo test -q --release -p rdma-sys --lib --target aarch64-unknown-linux-gnu 2>&1 | tee "$logs/aarch64-bindings"
  step "aarch64: cargo test under qemu-user"
  cargo test -q --target aarch64-unknown-linux-gnu 2>&1 | tee "$logs/aarch64-cargo-test"
  step "aarch64: same env plan as x86_64 on every fixture node"
  bash scripts/same-plan.sh "$bin" "$a64"
  podman --storage-driver vfs manifest rm localhost/nccl-wrap:latest >/dev/null
  for t in amd64 arm64; do podman --storage-driver vfs rmi -f "localhost/nccl-wrap:$t" >/dev/null; done
fi

if [ -z "${SKIP_LAB:-}" ]; then
  step "Soft-RoCE lab"
  bash tests/lab/setup.sh
  bash tests/lab/run.sh "$bin" 2>&1 | tee "$logs/lab"
  if [ -z "${SKIP_AARCH64:-}${SKIP_AARCH64_LAB:-}" ]; then
    step "Soft-RoCE lab, arm64 (emulated)"
    LAB_ARCH=arm64 bash tests/lab/setup.sh
    LAB_ARCH=arm64 bash tests/lab/run.sh "$a64" 00-smoke 20-selftest 25-verbs 30-netns-shared 2>&1 | tee "$logs/lab-arm64"
  fi
fi
step "all tests passed"
# One closing count over cargo's test binaries and the lab's scenarios.
passed=$(cat "$logs"/* | sed -nE 's/^test result: ok\. ([0-9]+) passed.*/\1/p; s/^([0-9]+) passed, 0 failed$/\1/p' | awk '{s += $1} END {print s + 0}')
echo "total: ${passed:-0} passed, 0 failed"
