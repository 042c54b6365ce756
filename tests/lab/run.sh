#!/bin/bash
# Boots Debian's kernel under QEMU (TCG) with a small initramfs and runs the lab scenarios against
# the given nccl-wrap binary on a real Soft-RoCE (rdma_rxe) stack. One boot runs every scenario.
#
#   run.sh NCCL_WRAP_BINARY [SCENARIO ...]     (SCENARIO: file name under scenarios/, with or
#                                               without .sh; default: all of them)
#
# Prints the guest console, then one line per scenario and "N passed, N failed" alone on the last
# line. Exits non-zero on any failure or missing result. Needs setup.sh to have run.
#
# LAB_ARCH=arm64 boots Debian's arm64 kernel under qemu-system-aarch64 (-M virt, TCG) with arm64
# programs from .cache/arm64-root (LAB_ARCH=arm64 setup.sh), for an aarch64 nccl-wrap binary.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache="$here/.cache"
boot_timeout=${LAB_BOOT_TIMEOUT:-420}
arch=${LAB_ARCH:-amd64}

die() { echo "lab: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: $0 NCCL_WRAP_BINARY [SCENARIO ...]"
binary=$1
shift
[ -f "$binary" ] || die "no such file: $binary"

kdir="$cache/current-kernel"
sysroot=  # arm64: where the guest's programs and libraries come from (empty: the host's own)
case $arch in
    amd64) qemu=(qemu-system-x86_64) console=ttyS0 ;;
    arm64)
        kdir="$cache/current-kernel-arm64" sysroot="$cache/arm64-root"
        qemu=(qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on) console=ttyAMA0
        [ -f "$sysroot/.complete" ] || die "no arm64 programs in $sysroot: run LAB_ARCH=arm64 tests/lab/setup.sh" ;;
    *) die "LAB_ARCH must be amd64 or arm64, not $arch" ;;
esac
[ -d "$kdir" ] || die "no kernel in $kdir: run ${LAB_ARCH:+LAB_ARCH=$arch }tests/lab/setup.sh first"
vmlinuz=$(ls "$kdir"/boot/vmlinuz-* 2>/dev/null | head -n1)
[ -n "$vmlinuz" ] || die "no vmlinuz in $kdir/boot"
kernel=$vmlinuz
if file -b "$vmlinuz" | grep -q gzip; then  # an arm64 vmlinuz may be a gzip'd Image
    kernel="$cache/Image-${vmlinuz##*/vmlinuz-}"
    [ -f "$kernel" ] || gzip -dc "$vmlinuz" >"$kernel"
fi
kver=${vmlinuz##*/vmlinuz-}
moddir="$kdir/lib/modules/$kver"
command -v "${qemu[0]}" >/dev/null || die "${qemu[0]} missing: run setup.sh"
[ -x "$sysroot/bin/busybox" ] || die "$sysroot/bin/busybox missing: run setup.sh"

# --- scenarios ---------------------------------------------------------------------------------
scenarios=()
if [ $# -eq 0 ]; then
    for f in "$here"/scenarios/[0-9]*.sh; do scenarios+=("$(basename "$f" .sh)"); done
else
    for s in "$@"; do
        s=$(basename "$s" .sh)
        [ -f "$here/scenarios/$s.sh" ] || die "no scenario $s in $here/scenarios"
        scenarios+=("$s")
    done
fi

# --- initramfs ---------------------------------------------------------------------------------
root=$(mktemp -d "${TMPDIR:-/tmp}/nccl-wrap-lab.XXXXXX")
trap 'rm -rf "$root"' EXIT
chmod 0755 "$root"  # mktemp makes it 0700, which would lock non-root users out of the guest's /
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib/modules/lab,etc,proc,sys,dev,tmp,run,root,lab}

# copy_with_libs SRC DEST: copy an executable or library to DEST inside the root, with every
# shared library ldd resolves for it, each at its own path (the loader's path included).
copy_with_libs() {
    install -D -m 0755 "$1" "$root$2"
    [ -z "$sysroot" ] || { copy_arm64_libs "$1"; return; }
    { ldd "$1" 2>/dev/null || true; } | awk '/=> \// {print $3} /^[ \t]*\/[^ ]+ \(0x/ {print $1}' |
        while read -r lib; do
            [ -e "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
        done
}

# copy_arm64_libs FILE: ldd cannot run an arm64 program here; the loader and every NEEDED library
# (recursively) come from the sysroot, each at its own path.
copy_arm64_libs() {
    local f=$1 interp so path
    interp=$(aarch64-linux-gnu-readelf -l "$f" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')
    if [ -n "$interp" ] && [ ! -e "$root$interp" ]; then
        install -D -m 0755 "$(readlink -f "$sysroot$interp")" "$root$interp"
    fi
    for so in $(aarch64-linux-gnu-readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        for path in /lib/aarch64-linux-gnu/$so /usr/lib/aarch64-linux-gnu/$so; do
            [ -e "$sysroot$path" ] || continue
            if [ ! -e "$root$path" ]; then
                install -D -m 0755 "$(readlink -f "$sysroot$path")" "$root$path"
                copy_arm64_libs "$sysroot$path"
            fi
            break
        done
    done
}

cp "$sysroot/bin/busybox" "$root/bin/busybox"
# Every busybox applet as a link, except ones that real tools below provide.
applets=$(if [ -n "$sysroot" ]; then qemu-aarch64-static "$sysroot/bin/busybox" --list; else /bin/busybox --list; fi)
for a in $applets; do
    case $a in busybox|ip|init|linuxrc) continue ;; esac
    ln -sf busybox "$root/bin/$a"
done

# iproute2, named ip and rdma (ip picks its sub-command from argv[0]).
if [ -n "$sysroot" ]; then
    ipbin=$sysroot/bin/ip rdmabin=$sysroot/usr/bin/rdma
else
    ipbin=$(command -v ip) || die "iproute2 ip missing"
    rdmabin=$(command -v rdma) || die "iproute2 rdma missing"
fi
copy_with_libs "$(readlink -f "$ipbin")" /usr/sbin/ip
copy_with_libs "$(readlink -f "$rdmabin")" /usr/sbin/rdma

# Userspace verbs tools and the rxe provider, for the smoke test's ibv_rc_pingpong.
provdir=/usr/lib/$([ -n "$sysroot" ] && echo aarch64 || echo x86_64)-linux-gnu/libibverbs
if [ -x "$sysroot/usr/bin/ibv_rc_pingpong" ] && [ -f "$sysroot$provdir/librxe-rdmav34.so" ]; then
    copy_with_libs "$sysroot/usr/bin/ibv_devices" /usr/bin/ibv_devices
    copy_with_libs "$sysroot/usr/bin/ibv_devinfo" /usr/bin/ibv_devinfo
    copy_with_libs "$sysroot/usr/bin/ibv_rc_pingpong" /usr/bin/ibv_rc_pingpong
    copy_with_libs "$sysroot$provdir/librxe-rdmav34.so" "$provdir/librxe-rdmav34.so"
    install -D -m 0644 "$sysroot/etc/libibverbs.d/rxe.driver" "$root/etc/libibverbs.d/rxe.driver"
else
    echo "lab: ibverbs-utils or the rxe provider missing on the host; smoke test skips verbs" >&2
fi

# nccl-wrap. A static binary needs nothing else; a dynamic one still gets its libraries.
if ! file -b "$binary" | grep -q "static"; then
    echo "lab: warning: $binary is not statically linked; copying its libraries too" >&2
fi
copy_with_libs "$binary" /usr/bin/nccl-wrap
want=$([ "$arch" = arm64 ] && echo "ARM aarch64" || echo "x86-64")
file -b "$binary" | grep -q "$want" || die "$binary is not an $want program (LAB_ARCH=$arch)"

# Kernel modules: each target with its modules.dep dependencies, deepest first, uncompressed
# (busybox insmod cannot read .ko.xz/.ko.zst).
[ -f "$moddir/modules.dep" ] || depmod -b "$kdir" "$kver"
order=()
add_module() {  # add_module RELPATH: deps (listed nearest-first in modules.dep) before the module
    local rel=$1 line deps d i
    for d in "${order[@]}"; do [ "$d" = "$rel" ] && return 0; done
    line=$(grep -m1 "^$rel:" "$moddir/modules.dep") || die "module $rel not in modules.dep"
    read -r -a deps <<<"${line#*:}"
    for ((i = ${#deps[@]} - 1; i >= 0; i--)); do add_module "${deps[$i]}"; done
    order+=("$rel")
}
for m in crc32_generic veth rdma_rxe; do
    rel=$(grep -m1 -E "(^|/)$m\.ko(\.xz|\.zst|\.gz)?:" "$moddir/modules.dep" | cut -d: -f1) ||
        die "module $m not found for $kver"
    add_module "$rel"
done
: >"$root/lab/modules.order"
for rel in "${order[@]}"; do
    base=$(basename "$rel"); name=${base%%.ko*}
    case $rel in
        *.ko.xz) xz -dc "$moddir/$rel" ;;
        *.ko.zst) zstd -qdc "$moddir/$rel" ;;
        *.ko.gz) gzip -dc "$moddir/$rel" ;;
        *) cat "$moddir/$rel" ;;
    esac >"$root/lib/modules/lab/$name.ko"
    echo "$name" >>"$root/lab/modules.order"
done

# Scenarios, helpers and init.
cp -r "$here/scenarios" "$root/lab/scenarios"
printf '%s\n' "${scenarios[@]}" >"$root/lab/scenarios.list"
install -m 0755 "$here/init.sh" "$root/init"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
chmod 1777 "$root/tmp"

sfx=$([ "$arch" = amd64 ] || echo "-$arch")  # arm64 files beside the amd64 ones
initrd="$cache/initrd$sfx.cpio.gz"
(cd "$root" && find . -print0 | cpio --null -o -H newc --quiet --owner=0:0) | gzip -1 >"$initrd"
echo "lab: kernel $kver, initramfs $(du -h "$initrd" | cut -f1), modules: $(tr '\n' ' ' <"$root/lab/modules.order")" >&2

# --- boot --------------------------------------------------------------------------------------
log="$cache/last-run$sfx.log"
echo "lab: booting (timeout ${boot_timeout}s), console log in $log" >&2
# Unknown key=value words on the kernel command line reach /init as environment variables.
append="console=$console quiet panic=-1"
[ -z "${LAB_SCENARIO_TIMEOUT:-}" ] || append+=" LAB_SCENARIO_TIMEOUT=$LAB_SCENARIO_TIMEOUT"
elapsed() { awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
: >"$log.times"
start=$(date +%s.%N)
set +e
timeout -k 10 "$boot_timeout" "${qemu[@]}" -accel tcg -m 1024 -nographic -no-reboot \
    -nic none -kernel "$kernel" -initrd "$initrd" \
    -append "$append" </dev/null 2>&1 |
    sed -u -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' -e 's/\r//g' \
        -e 's/^.*\(LAB-\(TIME\|START\|RESULT\|DONE\) \)/\1/' |
    while IFS= read -r line; do
        case $line in
            LAB-TIME\ boot\ *) echo "first-init-line $(elapsed)" >>"$log.times" ;;
            LAB-START\ *) echo "${line#LAB-START } $(elapsed)" >>"$log.times" ;;
        esac
        printf '%s\n' "$line"
    done >"$log.tmp"
qemu_rc=${PIPESTATUS[0]}
set -e
total=$(elapsed)
mv "$log.tmp" "$log"
cat "$log"

# --- results -----------------------------------------------------------------------------------
echo
echo "=== lab results (kernel $kver, $arch) ==="
passed=0 failed=0 skipped=0
for s in "${scenarios[@]}"; do
    line=$(grep -a -m1 "^LAB-RESULT $s " "$log" || true)
    if [ -z "$line" ]; then
        echo "FAIL $s: no result line (guest crashed or timed out)"
        failed=$((failed + 1))
        continue
    fi
    rest=${line#LAB-RESULT $s }
    st=${rest%% *}
    detail=${rest#"$st"}
    case $st in
        PASS) passed=$((passed + 1)) ;;
        SKIP) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)); st=FAIL ;;
    esac
    echo "$st $s:${detail}"
done
if grep -a -q '^LAB-RESULT modules FAIL' "$log"; then
    echo "FAIL modules: $(grep -a -m1 '^LAB-RESULT modules FAIL' "$log" | cut -d' ' -f4-)"
    failed=$((failed + 1))
fi
grep -a -q '^LAB-DONE' "$log" || { echo "FAIL guest did not finish (no LAB-DONE)"; failed=$((failed + 1)); }
boot=$(grep -a -m1 '^LAB-TIME boot ' "$log" | cut -d' ' -f3 || true)
[ "$qemu_rc" -eq 0 ] || echo "qemu exit $qemu_rc$([ "$qemu_rc" -ne 124 ] || echo " (timed out after ${boot_timeout}s)")"
echo "timing: kernel to /init ${boot:-?}s guest uptime; qemu start to first scenario $(grep -v '^first-init-line' "$log.times" | head -n1 | awk '{print $3}' | grep . || echo '?')s; whole boot ${total}s"
[ "$skipped" -eq 0 ] || echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
