#!/usr/bin/env bash
# Installs what building and testing nccl-wrap needs on a Debian 12 machine (as root), beyond a
# Rust toolchain (rustup's stable; Debian's own cargo is too old):
#   - to build (all that `--build` installs): static rdma-core (and librdmacm headers, which
#     rdma-sys binds) and libnl for the verbs probe, clang for the bindings, pkg-config;
#   - podman and runc to build and run the image, busybox-static for the static-shell test image;
#   - util-linux (unshare, setpriv, prlimit), hyperfine and GNU time for tests and benchmarks;
#   - prometheus for promtool, which checks and unit-tests the alert rules (tests/deploy);
#   - man-db, zsh and fish, which render the man page and parse the completion scripts (tests/completions.rs);
#   - for the aarch64 (Grace) build, unless SKIP_AARCH64=1: rustup's aarch64-unknown-linux-gnu
#     target, Debian's cross gcc, qemu-user-static, and the static rdma-core and libnl of the
#     arm64 architecture (`dpkg --add-architecture arm64`).
# The Soft-RoCE lab installs its own packages (tests/lab/setup.sh).
#
#   bash scripts/setup.sh            # everything scripts/test.sh needs
#   bash scripts/setup.sh --build    # only what `cargo build` needs (scripts/demo.sh)
set -euo pipefail
command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust with rustup first" >&2; exit 1; }
build_pkgs=(pkg-config libibverbs-dev ibverbs-providers librdmacm-dev libnl-3-dev libnl-route-3-dev libclang-dev clang)
test_pkgs=(podman runc util-linux hyperfine time file python3 busybox-static prometheus man-db zsh fish)
case ${1:-} in
  --build) pkgs=("${build_pkgs[@]}"); SKIP_AARCH64=1 ;;
  "") pkgs=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  *) echo "setup: unknown argument $1 (--build: only what cargo build needs)" >&2; exit 2 ;;
esac
if [ -z "${SKIP_AARCH64:-}" ]; then
  pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu qemu-user-static
         libibverbs-dev:arm64 ibverbs-providers:arm64 librdmacm-dev:arm64 libnl-3-dev:arm64 libnl-route-3-dev:arm64)
  # arm64 packages come from the same archive once dpkg knows the architecture (apt-get update below).
  dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
fi
missing=()
# Qualified by architecture: once arm64 is added, an unqualified name can be ambiguous to dpkg.
native=$(dpkg --print-architecture)
installed() { case $1 in *:*) dpkg -s "$1" ;; *) dpkg -s "$1:$native" || dpkg -s "$1:all" ;; esac >/dev/null 2>&1; }
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ -z "${SKIP_AARCH64:-}" ] && ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  echo "setup: rustup target add aarch64-unknown-linux-gnu"
  rustup target add aarch64-unknown-linux-gnu
fi
