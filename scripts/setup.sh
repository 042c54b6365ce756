#!/usr/bin/env bash
# Installs what building and testing nccl-wrap needs on a Debian 12 machine (as root), beyond a
# Rust toolchain (rustup's stable; Debian's own cargo is too old):
#   - static rdma-core (and librdmacm headers, which rdma-sys binds) and libnl for the verbs
#     probe, clang for the bindings;
#   - podman and runc to build and run the image, busybox-static for the static-shell test image;
#   - util-linux (unshare, setpriv), hyperfine and GNU time for tests and benchmarks.
# The Soft-RoCE lab installs its own packages (tests/lab/setup.sh).
set -euo pipefail
command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust with rustup first" >&2; exit 1; }
pkgs=(pkg-config libibverbs-dev ibverbs-providers librdmacm-dev libnl-3-dev libnl-route-3-dev libclang-dev clang
      podman runc util-linux hyperfine time file python3 busybox-static)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
