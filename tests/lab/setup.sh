#!/bin/bash
# Prepares the Soft-RoCE lab on a Debian 12 host: the tools that build and boot the guest, and an
# unpacked Debian kernel (vmlinuz + modules) whose rdma_rxe gives the guest a real RDMA stack.
# Idempotent: a second run does no network work when everything is already in place.
# The kernel package is only downloaded and unpacked under tests/lab/.cache/, never installed, so
# nothing touches /boot or /lib/modules of the host.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache="$here/.cache"
mkdir -p "$cache/debs"

log() { echo "lab-setup: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    log "must run as root (apt-get)"
    exit 1
fi

# apt-get update once: skip it when the package lists are less than a day old.
lists_fresh() {
    [ -n "$(find /var/lib/apt/lists -maxdepth 1 -name '*_InRelease' -mmin -1440 2>/dev/null | head -n1)" ]
}

# Host tools. iproute2 gives `ip` and `rdma`; rdma-core/ibverbs-* give ibv_devices,
# ibv_rc_pingpong and the rxe provider; perftest gives ib_write_bw and ib_send_lat (fabric.sh);
# gcc, libc6-dev and libibverbs-dev build tools/rc_probe.c; kmod gives modinfo; xz/zstd
# decompress modules; iproute2 also gives tc.
pkgs=(qemu-system-x86 busybox-static iproute2 rdma-core ibverbs-utils ibverbs-providers
      libibverbs1 perftest gcc libc6-dev libibverbs-dev cpio kmod xz-utils zstd)
missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
updated=0
if [ ${#missing[@]} -gt 0 ]; then
    if ! lists_fresh; then
        log "apt-get update"
        apt-get update -qq
        updated=1
    fi
    log "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    log "host packages already installed"
fi

# Kernel: resolve the metapackage to the versioned image package and unpack it into the cache.
meta=linux-image-amd64
kpkg=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$kpkg" ] && [ "$updated" = 0 ]; then
    apt-get update -qq
    kpkg=$(apt-cache depends "$meta" | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
if [ -z "$kpkg" ]; then
    log "cannot resolve $meta to a kernel image package"
    exit 1
fi
kdir="$cache/kernel/$kpkg"
if [ -f "$kdir/.unpacked" ]; then
    log "kernel $kpkg already unpacked"
else
    log "downloading $kpkg"
    (cd "$cache/debs" && apt-get download -qq -o APT::Sandbox::User=root "$kpkg")
    deb=$(ls -t "$cache/debs/${kpkg}"_*.deb | head -n1)
    rm -rf "$kdir"
    mkdir -p "$kdir"
    log "unpacking $(basename "$deb")"
    dpkg -x "$deb" "$kdir"
    # The package ships no modules.dep (depmod runs at install time); build it in the cache.
    kv=$(ls "$kdir/lib/modules" | head -n1)
    depmod -b "$kdir" "$kv"
    touch "$kdir/.unpacked"
fi
ln -sfn "kernel/$kpkg" "$cache/current-kernel"

vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -n1)
kver=${vmlinuz##*/vmlinuz-}
[ -d "$kdir/lib/modules/$kver" ] || { log "modules for $kver missing in $kdir"; exit 1; }
find "$kdir/lib/modules/$kver" -name 'rdma_rxe.ko*' | grep -q . || {
    log "rdma_rxe not found in $kpkg"; exit 1; }
log "ready: kernel $kver ($vmlinuz)"
