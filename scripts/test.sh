#!/usr/bin/env bash
# Runs every test: formatting and lints, unit and integration tests (fixture nodes, real memlock
# limits, real PID namespaces), the fixture trees' consistency, the deploy kit's manifests and
# report, the container image, and the Soft-RoCE lab under QEMU. Needs root (namespaces, podman,
# apt for the lab).
#
#   bash scripts/test.sh          # everything
#   SKIP_LAB=1 bash scripts/test.sh       # without the QEMU labs (SKIP_FABRIC=1: without the multi-node one)
#   SKIP_FUZZ=1 bash scripts/test.sh      # without the fuzz targets (FUZZ_SECONDS: time per target, 8)
#   AARCH64_QUICK=1 bash scripts/test.sh  # under qemu-user only the unit and machine-reading tests
#   SKIP_AARCH64=1 bash scripts/test.sh   # without the aarch64 (Grace) build and its tests
#   SKIP_RELEASE=1 bash scripts/test.sh   # without the release check (scripts/release.sh --check)
#
# The aarch64 steps: the cross build (scripts/build-aarch64.sh), rdma-sys's binding layouts and
# the cargo test suite under qemu-user, the same-plan check against x86_64, the arm64 image in the
# manifest list, and the lab's 00-smoke, 20-selftest, 25-verbs and 30-netns-shared on Debian's
# arm64 kernel (qemu-system-aarch64, TCG). SKIP_AARCH64_LAB=1 leaves out only that lab subset.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo; echo "== $* ($((SECONDS / 60))m$((SECONDS % 60))s in)"; }
logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
# A test that cannot run here returns early, which cargo counts as passed: each one records
# itself here (tests/common: skip), and the closing total counts it as skipped instead.
export TESTS_SKIPPED_LOG="$logs/skipped-tests"

step "setup"
bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --workspace --all-targets -q -- -D warnings
step "cargo test"
cargo test --workspace -q 2>&1 | tee "$logs/cargo-test"
step "fixtures are what mknode.py generates"
python3 fixtures/mknode.py --check
step "Markdown links"
python3 scripts/check-links.py
step "deploy kit: render, schema-validate, policy and report tests"
bash tests/deploy/validate.sh 2>&1 | tee "$logs/deploy"

if [ -z "${SKIP_FUZZ:-}" ]; then
  step "fuzz targets, ${FUZZ_SECONDS:-8} s each"
  bash fuzz/run.sh "${FUZZ_SECONDS:-8}" 2>&1 | tee "$logs/fuzz"
fi

step "static release binary"
cargo build --release -q
bin=target/x86_64-unknown-linux-gnu/release/nccl-wrap
kind=$(file -b "$bin")
echo "$bin: $kind"
case "$kind" in *static*) ;; *) echo "not statically linked" >&2; exit 1 ;; esac
size=$(stat -c %s "$bin")
echo "$bin: $size bytes stripped (budget 3,145,728)"
[ "$size" -le 3145728 ] || { echo "the static binary is $size bytes, over its 3 MiB budget (docs/build.md)" >&2; exit 1; }
# The release link discards the unwind tables (link/no-unwind.ld, docs/build.md): if it dropped
# out of the build, the size above would say so late; this says it at once.
! readelf -SW "$bin" | grep -q '\.eh_frame' || { echo "$bin has unwind tables: link/no-unwind.ld is not in the release link" >&2; exit 1; }

step "container image"
export CONTAINERS_CONF=$PWD/ci/containers.conf
podman --storage-driver vfs build -q --platform linux/amd64 -t localhost/nccl-wrap:test -f Containerfile . >/dev/null
# The bootstrap interface set, as a site would: nccl-wrap keeps it, so the plan printed is the
# fixture's alone, whatever network the container runtime gives (tests/bootstrap.rs covers the
# interface nccl-wrap picks).
out=$(podman --storage-driver vfs run --rm -e NCCL_SOCKET_IFNAME==eth0 -e GLOO_SOCKET_IFNAME=eth0 \
  -v "$PWD/fixtures/nodes/h200-ib/sys:/fixture-sys:ro" localhost/nccl-wrap:test env --sysfs-root /fixture-sys)
echo "$out"
[ "$out" = "export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1'" ] \
  || { echo "unexpected output from the image" >&2; exit 1; }

step "container image: install into a volume (init container), run from a static-shell image"
# The training side: a FROM scratch image holding only Debian's static busybox as /bin/sh, the
# smallest image with a shell (registry images cannot be pulled here).
ctx=$(mktemp -d)
cleanup_images() {
  podman --storage-driver vfs volume rm -f nccl-wrap-test-vol >/dev/null 2>&1 || true
  podman --storage-driver vfs rmi -f localhost/nccl-wrap:test localhost/static-shell:test >/dev/null 2>&1 || true
  rm -rf "$ctx"
}
trap 'cleanup_images; rm -rf "$logs"' EXIT
cp /bin/busybox "$ctx/busybox"
printf 'FROM scratch\nCOPY busybox /bin/sh\n' >"$ctx/Containerfile"
podman --storage-driver vfs build -q -t localhost/static-shell:test -f "$ctx/Containerfile" "$ctx" >/dev/null
podman --storage-driver vfs volume create nccl-wrap-test-vol >/dev/null
installed=$(podman --storage-driver vfs run --rm -v nccl-wrap-test-vol:/opt/nccl-wrap localhost/nccl-wrap:test install /opt/nccl-wrap)
echo "init container: $installed"
[ "$installed" = /opt/nccl-wrap/nccl-wrap ] || { echo "install printed $installed" >&2; exit 1; }
# Running it again is harmless.
podman --storage-driver vfs run --rm -v nccl-wrap-test-vol:/opt/nccl-wrap localhost/nccl-wrap:test install /opt/nccl-wrap >/dev/null
out=$(podman --storage-driver vfs run --rm -v nccl-wrap-test-vol:/opt/nccl-wrap:ro \
  -v "$PWD/fixtures/nodes/h200-ib/sys:/fixture-sys:ro" localhost/static-shell:test \
  /opt/nccl-wrap/nccl-wrap -q --sysfs-root /fixture-sys -- sh -c 'echo "trainer sees NCCL_IB_HCA=$NCCL_IB_HCA"')
echo "$out"
[ "$out" = "trainer sees NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1" ] \
  || { echo "unexpected output from the trainer image" >&2; exit 1; }
cleanup_images

if [ -z "${SKIP_AARCH64:-}" ]; then
  a64=target/aarch64-unknown-linux-gnu/release/nccl-wrap
  step "aarch64: static build, images and manifest list"
  bash scripts/build-aarch64.sh --image
  step "aarch64: rdma-sys binding layouts under qemu-user"
  cargo test -q --release -p rdma-sys --lib --target aarch64-unknown-linux-gnu 2>&1 | tee "$logs/aarch64-bindings"
  # The whole suite under emulation, one test at a time (about 4.5 minutes on an idle 2-core
  # machine): a test process that forks while other test threads run can leave the child blocked
  # on a lock inside qemu-user before its exec (seen once: a doctor test's child on a futex for
  # 20 minutes), the emulator's limit and not nccl-wrap's. Bounded, so that a hang fails fast.
  # AARCH64_QUICK=1: the unit tests and the integration tests that read the machine only.
  step "aarch64: cargo test under qemu-user"
  if [ -n "${AARCH64_QUICK:-}" ]; then
    timeout 1200 cargo test -q --workspace --target aarch64-unknown-linux-gnu --lib --test detect_nodes --test run_exec \
      --test pid1 --test userspace --test providers --test status --test hostile_files -- --test-threads=1 2>&1 |
      tee "$logs/aarch64-cargo-test"
  else
    timeout 1800 cargo test -q --workspace --target aarch64-unknown-linux-gnu -- --test-threads=1 2>&1 | tee "$logs/aarch64-cargo-test"
  fi
  step "aarch64: same env plan as x86_64 on every fixture node"
  bash scripts/same-plan.sh "$bin" "$a64"
  podman --storage-driver vfs manifest rm localhost/nccl-wrap:latest >/dev/null
  for t in amd64 arm64; do podman --storage-driver vfs rmi -f "localhost/nccl-wrap:$t" >/dev/null; done
fi

# Both binaries with the release's flags, the images, SBOMs and docs into a folder, then the
# x86_64 binary built again in a fresh target dir and compared byte for byte, and the rest made
# again and compared (docs/build.md, "Releases"). The first builds reuse target/'s build scripts.
if [ -z "${SKIP_AARCH64:-}${SKIP_RELEASE:-}" ]; then
  step "release: scripts/release.sh --check (the same bytes twice)"
  release=$(mktemp -d)
  bash scripts/release.sh --check "$release"
  rm -rf "$release"
fi

if [ -z "${SKIP_LAB:-}" ]; then
  step "Soft-RoCE lab"
  bash tests/lab/setup.sh
  bash tests/lab/run.sh "$bin" 2>&1 | tee "$logs/lab"
  if [ -z "${SKIP_FABRIC:-}" ]; then
    step "Soft-RoCE fabric: two and three QEMU nodes, nccl-wrap ping between them, against perftest"
    # The fabric's own checks (two rails and a ring with ibv_rc_pingpong), every ping scenario and
    # the gate's (78-80 and 93 in the three-node boot with 60 and 77, 81 and 83 in the two-node one: about 60 s
    # of guest time);
    # the stand-in failure scenarios (20-50, 90) that proved the lab reproduces each failure with
    # perftest and rc_probe stay out of CI, as their ping twins (71-74, 92) cover the same paths:
    # `bash tests/lab/fabric.sh BIN` runs them all.
    fabric() {
      bash tests/lab/fabric.sh "$bin" 10-two-rails 60-ring 70-ping-rails 71-ping-no-route 72-ping-no-ipv4 \
        73-ping-mtu 74-ping-tc-drop 75-ping-memlock 76-ping-hostile 77-ping-ring 78-gate 79-gate-drop 80-gate-missing \
        81-gate-pair 82-ping-shared 83-gate-restart 85-postmortem-roce-drop 92-ping-bench 93-gate-slow 2>&1 | tee "$logs/fabric"
    }
    # One more boot only for the guest kernel's own failure: rxe under TCG has locked a guest CPU
    # up (the console says `watchdog: BUG: soft lockup`) and no scenario could finish. Four of the
    # five seen were in 85-postmortem-roce-drop, when it dropped what leaves the rail mid-run (rxe
    # retries a refused send at once, for ever); it drops what arrives now. One was in 79-gate-drop.
    # Any other failure fails here.
    if ! fabric; then
      grep -q 'watchdog: BUG: soft lockup' "$logs/fabric" || exit 1
      echo "fabric: a guest kernel locked up (the console's soft lockup above); booting the fabric once more"
      fabric
    fi
  fi
  if [ -z "${SKIP_AARCH64:-}${SKIP_AARCH64_LAB:-}" ]; then
    step "Soft-RoCE lab, arm64 (emulated)"
    LAB_ARCH=arm64 bash tests/lab/setup.sh
    LAB_ARCH=arm64 bash tests/lab/run.sh "$a64" 00-smoke 20-selftest 25-verbs 30-netns-shared 2>&1 | tee "$logs/lab-arm64"
  fi
fi
step "all tests passed"
# One closing count over cargo's test binaries and the lab's scenarios.
passed=$(cat "$logs"/* | sed -nE 's/^test result: ok\. ([0-9]+) passed.*/\1/p; s/^([0-9]+) passed, 0 failed$/\1/p' | awk '{s += $1} END {print s + 0}')
# Cargo counted the skipped tests as passed; the labs print their own `N skipped`.
cargo_skipped=$( (cat "$TESTS_SKIPPED_LOG" 2>/dev/null || true) | wc -l)
lab_skipped=$(cat "$logs"/* | sed -nE 's/^([0-9]+) skipped$/\1/p' | awk '{s += $1} END {print s + 0}')
echo "total: $((passed - cargo_skipped)) passed, 0 failed, $((cargo_skipped + lab_skipped)) skipped"
[ "$cargo_skipped" -eq 0 ] || sed 's/^/skipped: /' "$TESTS_SKIPPED_LOG"
