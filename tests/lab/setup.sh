#!/bin/bash
# Prepares the Soft-RoCE lab on a Debian 12 host: the tools that build and boot the guest, and an
# unpacked Debian kernel (vmlinuz + modules) whose rdma_rxe gives the guest a real RDMA stack.
# Idempotent: a second run does no network work when everything is already in place.
# The kernel package is only downloaded and unpacked under tests/lab/.cache/, never installed, so
# nothing touches /boot or /lib/modules of the host.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache="$here/.cache"
# The downloads (two kernels, the arm64 userland: a few minutes) are kept once per machine, not
# once per checkout: .cache links to LAB_CACHE_DIR where that can be made, so a fresh clone on
# the same machine (CI's) reuses them. Nothing there is installed; delete it to start over.
shared=${LAB_CACHE_DIR:-/var/cache/nccl-wrap-lab}
if [ ! -e "$cache" ] && [ ! -L "$cache" ] && mkdir -p "$shared" 2>/dev/null; then
    ln -s "$shared" "$cache"
fi
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

# LAB_ARCH=arm64 prepares the aarch64 lab instead (qemu-system-aarch64 -M virt, Debian's arm64
# kernel): the guest's programs are then arm64 packages, downloaded and unpacked under
# .cache/arm64-root (never installed: busybox-static and iproute2 cannot sit beside the host's).
arch=${LAB_ARCH:-amd64}
case $arch in amd64 | arm64) ;; *) log "LAB_ARCH must be amd64 or arm64, not $arch"; exit 1 ;; esac

# Host tools. iproute2 gives `ip` and `rdma`; rdma-core/ibverbs-* give ibv_devices,
# ibv_rc_pingpong and the rxe provider; perftest gives ib_write_bw and ib_send_lat (fabric.sh);
# gcc, libc6-dev and libibverbs-dev build tools/rc_probe.c; kmod gives modinfo; xz/zstd
# decompress modules; iproute2 also gives tc; strace counts nccl-wrap's reads of the kernel's
# GID tables (38-gid-reads).
pkgs=(qemu-system-x86 busybox-static iproute2 rdma-core ibverbs-utils ibverbs-providers
      libibverbs1 perftest gcc libc6-dev libibverbs-dev cpio kmod xz-utils zstd strace)
if [ "$arch" = arm64 ]; then
    pkgs=(qemu-system-arm binutils-aarch64-linux-gnu cpio kmod xz-utils zstd)
    dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
fi
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
meta=linux-image-$arch:$arch
kpkg=$(apt-cache depends "$meta" 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$kpkg" ] && [ "$updated" = 0 ]; then
    apt-get update -qq
    updated=1
    kpkg=$(apt-cache depends "$meta" | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
fi
kpkg=${kpkg%:*}
if [ -z "$kpkg" ]; then
    log "cannot resolve $meta to a kernel image package"
    exit 1
fi
kdir="$cache/kernel/$kpkg"
if [ -f "$kdir/.unpacked" ]; then
    log "kernel $kpkg already unpacked"
else
    log "downloading $kpkg"
    (cd "$cache/debs" && apt-get download -qq -o APT::Sandbox::User=root "$kpkg:$arch")
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
if [ "$arch" = amd64 ]; then
    ln -sfn "kernel/$kpkg" "$cache/current-kernel"
else
    ln -sfn "kernel/$kpkg" "$cache/current-kernel-$arch"
fi

vmlinuz=$(ls "$kdir"/boot/vmlinuz-* | head -n1)
kver=${vmlinuz##*/vmlinuz-}
[ -d "$kdir/lib/modules/$kver" ] || { log "modules for $kver missing in $kdir"; exit 1; }
find "$kdir/lib/modules/$kver" -name 'rdma_rxe.ko*' | grep -q . || {
    log "rdma_rxe not found in $kpkg"; exit 1; }
log "ready: kernel $kver ($vmlinuz)"

[ "$arch" = arm64 ] || exit 0
# The guest's arm64 programs and every library they need, unpacked into .cache/arm64-root. A
# library is found by its soname: the host's own amd64 copy names the package to fetch as :arm64.
sysroot="$cache/arm64-root"
if [ -f "$sysroot/.complete" ]; then
    log "arm64 guest programs already unpacked in $sysroot"
    exit 0
fi
rm -rf "$sysroot"
mkdir -p "$sysroot" "$cache/debs/arm64"
fetch() {  # fetch PKG...: download PKG:arm64 unless already here, unpack into the sysroot
    local p deb
    for p in "$@"; do
        deb=$(ls "$cache/debs/arm64/${p}"_*_arm64.deb 2>/dev/null | head -n1 || true)
        if [ -z "$deb" ]; then
            (cd "$cache/debs/arm64" && apt-get download -qq -o APT::Sandbox::User=root "$p:arm64")
            deb=$(ls "$cache/debs/arm64/${p}"_*_arm64.deb | head -n1)
        fi
        dpkg -x "$deb" "$sysroot"
    done
}
log "downloading arm64 guest programs"
fetch libc6 busybox-static iproute2 ibverbs-utils ibverbs-providers libibverbs1 libnl-3-200 libnl-route-3-200
for round in 1 2 3 4 5; do
    need=$(find "$sysroot" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c \
        'aarch64-linux-gnu-readelf -d "$1" 2>/dev/null | sed -n "s/.*(NEEDED).*\[\(.*\)\]/\1/p"' _ {} \; | sort -u)
    pkgsneeded=()
    for so in $need; do
        [ -n "$(find "$sysroot" -name "$so" -print -quit)" ] && continue
        owner=$(dpkg -S "/lib/x86_64-linux-gnu/$so" "/usr/lib/x86_64-linux-gnu/$so" 2>/dev/null | head -n1 | cut -d: -f1 || true)
        [ -n "$owner" ] || { log "no package known for $so (needed by an arm64 guest program)"; exit 1; }
        pkgsneeded+=("$owner")
    done
    [ ${#pkgsneeded[@]} -gt 0 ] || break
    fetch $(printf '%s\n' "${pkgsneeded[@]}" | sort -u)
done
touch "$sysroot/.complete"
log "arm64 guest programs in $sysroot"
