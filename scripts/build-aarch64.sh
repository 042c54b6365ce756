#!/usr/bin/env bash
# Builds the static aarch64 (Grace: GH200, GB200) nccl-wrap on an x86_64 Debian 12 machine, as
# root: installs what it needs (scripts/setup.sh: rustup's aarch64-unknown-linux-gnu target, the
# cross gcc, qemu-user-static, arm64 rdma-core and libnl), builds
# target/aarch64-unknown-linux-gnu/release/nccl-wrap, and checks that it is a static, non-PIE
# aarch64 executable of at most 3 MiB (3,145,728 bytes, stripped) with the rdma-core providers
# build.rs links, and that it runs (qemu-user).
#
#   bash scripts/build-aarch64.sh            # the binary
#   bash scripts/build-aarch64.sh --image    # and the amd64 and arm64 images and a manifest list
#                                            # localhost/nccl-wrap:latest holding both
#
# With --image the x86_64 binary is built too (`cargo build --release`). An image is checked by
# running it: `podman run` for arm64 needs binfmt_misc to run aarch64 programs; where it has none,
# the binary is taken out of the image and run with qemu-aarch64-static instead, and it says so.
# PODMAN_OPTS (default `--storage-driver vfs`, as CI uses) goes before every podman sub-command.
set -euo pipefail
cd "$(dirname "$0")/.."
image=0
case ${1:-} in --image) image=1 ;; "") ;; *) echo "usage: $0 [--image]" >&2; exit 2 ;; esac
say() { echo "build-aarch64: $*" >&2; }
fail() { say "$*"; exit 1; }

SKIP_AARCH64='' bash scripts/setup.sh
cargo build --release -q --target aarch64-unknown-linux-gnu
bin=target/aarch64-unknown-linux-gnu/release/nccl-wrap

kind=$(file -b "$bin")
case $kind in *"ARM aarch64"*"statically linked"*) ;; *) fail "$bin is not a static aarch64 executable: $kind" ;; esac
aarch64-linux-gnu-readelf -h "$bin" | grep -q 'Type:.*EXEC' || fail "$bin is position-independent (want relocation-model=static)"
size=$(stat -c %s "$bin")
# The budget (docs/build.md, "Size"): a pull of the image and every pod's page cache pay for each byte.
[ "$size" -le 3145728 ] || fail "$bin is $size bytes, over its 3 MiB budget (3,145,728 bytes)"
version=$(qemu-aarch64-static "$bin" --version | paste -sd " ") || fail "$bin does not run under qemu-aarch64-static"
# The providers linked, as the hidden verbs entry names them (its device list may fail here).
providers=$({ qemu-aarch64-static "$bin" __verbs list 2>/dev/null || true; } |
    python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["providers"]))') ||
    fail "$bin does not name its rdma-core providers (nccl-wrap __verbs list)"
case ",$providers," in *,mlx5,*) ;; *) fail "$bin links no mlx5 provider (it has: $providers)" ;; esac
say "$bin: $kind"
say "$size bytes ($(awk -v s="$size" 'BEGIN{printf "%.2f", s/1048576}') MiB), rdma-core providers $providers, runs: $version"

[ "$image" = 1 ] || exit 0

# --- images and manifest list ----------------------------------------------------------------
read -r -a podman_opts <<<"${PODMAN_OPTS:---storage-driver vfs}"
pm() { podman "${podman_opts[@]}" "$@"; }
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/ci/containers.conf}
cargo build --release -q
fixture=$PWD/fixtures/nodes/h200-ib/sys
want="export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1'"
aarch64_binfmt() {
    local f
    for f in /proc/sys/fs/binfmt_misc/*; do
        [ -f "$f" ] && grep -qx enabled "$f" 2>/dev/null && grep -q '^magic 7f454c460201010000000000000000000200b700' "$f" && return 0
    done
    return 1
}
pm manifest rm localhost/nccl-wrap:latest >/dev/null 2>&1 || true
pm manifest create localhost/nccl-wrap:latest >/dev/null
for arch in amd64 arm64; do
    pm build -q --platform "linux/$arch" -t "localhost/nccl-wrap:$arch" -f Containerfile . >/dev/null
    got=$(pm image inspect "localhost/nccl-wrap:$arch" --format '{{.Os}}/{{.Architecture}}')
    [ "$got" = "linux/$arch" ] || fail "image localhost/nccl-wrap:$arch is $got"
    if [ "$arch" = amd64 ] || aarch64_binfmt; then
        # The bootstrap interface set, as a site would: the plan printed is then the fixture's alone.
        out=$(pm run --rm --platform "linux/$arch" -e NCCL_SOCKET_IFNAME==eth0 -e GLOO_SOCKET_IFNAME=eth0 \
            -v "$fixture:/fixture-sys:ro" "localhost/nccl-wrap:$arch" env --sysfs-root /fixture-sys)
        how="podman run"
    else
        # No binfmt_misc handler for aarch64 here: the runtime could not exec /nccl-wrap.
        mnt=$(pm image mount "localhost/nccl-wrap:$arch")
        out=$(env NCCL_SOCKET_IFNAME==eth0 GLOO_SOCKET_IFNAME=eth0 qemu-aarch64-static "$mnt/nccl-wrap" env --sysfs-root "$fixture")
        file -b "$mnt/nccl-wrap" | grep -q 'ARM aarch64' || fail "the arm64 image holds no aarch64 binary"
        pm image unmount "localhost/nccl-wrap:$arch" >/dev/null
        how="qemu-aarch64-static on the image's /nccl-wrap (no binfmt_misc handler for aarch64, so no podman run)"
    fi
    [ "$out" = "$want" ] || fail "unexpected output from the $arch image: $out"
    say "image localhost/nccl-wrap:$arch ($got) ok through $how"
    pm manifest add localhost/nccl-wrap:latest "containers-storage:localhost/nccl-wrap:$arch" >/dev/null
done
arches=$(pm manifest inspect localhost/nccl-wrap:latest | python3 -c 'import json,sys; print(" ".join(sorted(m["platform"]["os"] + "/" + m["platform"]["architecture"] for m in json.load(sys.stdin)["manifests"])))')
[ "$arches" = "linux/amd64 linux/arm64" ] || fail "manifest list holds: $arches"
say "manifest list localhost/nccl-wrap:latest: $arches (push with: podman manifest push localhost/nccl-wrap:latest docker://REGISTRY/nccl-wrap:TAG)"
