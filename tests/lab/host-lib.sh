# Host-side helpers shared by run.sh (one guest) and fabric.sh (two or three guests), bash.
# Source it after setting `here` to tests/lab. It finds the kernel setup.sh unpacked, builds the
# one initramfs both runners boot, and filters a guest console into plain lines.

cache="$here/.cache"
# What a run writes (initramfs, consoles) stays with the checkout, so that two checkouts on one
# machine can run labs at once while sharing the downloads in .cache.
out="$here/.out"
mkdir -p "$out"
arch=${LAB_ARCH:-amd64}
sfx=$([ "$arch" = amd64 ] || echo "-$arch")  # arm64 files beside the amd64 ones

die() { echo "lab: $*" >&2; exit 2; }

# lab_kernel: sets kdir, vmlinuz, kernel (what QEMU boots), kver, moddir from the kernel setup.sh
# unpacked, and qemu, console and sysroot for LAB_ARCH (amd64, the default, or arm64); checks the
# tools. sysroot is where the guest's programs and libraries come from (empty: the host's own).
lab_kernel() {
    kdir="$cache/current-kernel" sysroot=
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
}

# copy_with_libs SRC DEST: copy an executable or library to DEST inside $root, with every
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

# lab_add_module NAME...: each module with its modules.dep dependencies (deepest first) appended to
# the array `order` (relative paths), once each.
order=()
lab_add_module_rel() {
    local rel=$1 line deps d i
    for d in "${order[@]}"; do [ "$d" = "$rel" ] && return 0; done
    line=$(grep -m1 "^$rel:" "$moddir/modules.dep") || die "module $rel not in modules.dep"
    read -r -a deps <<<"${line#*:}"
    for ((i = ${#deps[@]} - 1; i >= 0; i--)); do lab_add_module_rel "${deps[$i]}"; done
    order+=("$rel")
}
lab_add_module() {
    local m rel
    for m in "$@"; do
        rel=$(grep -m1 -E "(^|/)$m\.ko(\.xz|\.zst|\.gz)?:" "$moddir/modules.dep" | cut -d: -f1) ||
            die "module $m not found for $kver"
        lab_add_module_rel "$rel"
    done
}

# lab_build_root BINARY MODULE...: build the guest root in a new temporary directory, `root` (the
# caller's trap removes it). MODULEs (with their dependencies) are insmod'ed by /init in
# modules.dep order. The root carries both scenarios/ (run.sh) and fabric/ (fabric.sh); the kernel
# command line decides which one /init runs. lab_pack turns it into an initramfs.
lab_build_root() {
    local binary=$1 a rel base name
    shift
    root=$(mktemp -d "${TMPDIR:-/tmp}/nccl-wrap-lab.XXXXXX")
    chmod 0755 "$root"  # mktemp makes it 0700, which would lock non-root users out of the guest's /
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib/modules/lab,etc,proc,sys,dev,tmp,run,root,lab}

    cp "$sysroot/bin/busybox" "$root/bin/busybox"
    # Every busybox applet as a link, except ones that real tools below provide.
    local applets
    applets=$(if [ -n "$sysroot" ]; then qemu-aarch64-static "$sysroot/bin/busybox" --list; else /bin/busybox --list; fi)
    for a in $applets; do
        case $a in busybox|ip|tc|init|linuxrc) continue ;; esac
        ln -sf busybox "$root/bin/$a"
    done

    # iproute2, named ip, rdma and tc (ip picks its sub-command from argv[0]).
    local ipbin rdmabin tcbin
    if [ -n "$sysroot" ]; then
        ipbin=$sysroot/bin/ip rdmabin=$sysroot/usr/bin/rdma
    else
        ipbin=$(command -v ip) || die "iproute2 ip missing"
        rdmabin=$(command -v rdma) || die "iproute2 rdma missing"
    fi
    copy_with_libs "$(readlink -f "$ipbin")" /usr/sbin/ip
    copy_with_libs "$(readlink -f "$rdmabin")" /usr/sbin/rdma
    if [ -n "$sysroot" ]; then
        :  # the fabric (tc, perftest, rc_probe) runs on amd64 guests only
    elif tcbin=$(command -v tc); then
        copy_with_libs "$(readlink -f "$tcbin")" /usr/sbin/tc
    else
        echo "lab: iproute2 tc missing on the host; fabric tc scenarios fail" >&2
    fi

    # Userspace verbs tools and the rxe provider (ibv_rc_pingpong for the smoke test and the
    # fabric), perftest (ib_write_bw, ib_send_lat) for the fabric.
    local provdir t
    provdir=/usr/lib/$([ -n "$sysroot" ] && echo aarch64 || echo x86_64)-linux-gnu/libibverbs
    if [ -x "$sysroot/usr/bin/ibv_rc_pingpong" ] && [ -f "$sysroot$provdir/librxe-rdmav34.so" ]; then
        for t in ibv_devices ibv_devinfo ibv_rc_pingpong; do
            copy_with_libs "$sysroot/usr/bin/$t" "/usr/bin/$t"
        done
        copy_with_libs "$sysroot$provdir/librxe-rdmav34.so" "$provdir/librxe-rdmav34.so"
        install -D -m 0644 "$sysroot/etc/libibverbs.d/rxe.driver" "$root/etc/libibverbs.d/rxe.driver"
    else
        echo "lab: ibverbs-utils or the rxe provider missing on the host; smoke test skips verbs" >&2
    fi
    for t in ib_write_bw ib_send_lat; do
        if [ -n "$sysroot" ]; then
            break  # the fabric runs on amd64 guests only
        elif [ -x "/usr/bin/$t" ]; then
            copy_with_libs "/usr/bin/$t" "/usr/bin/$t"
        else
            echo "lab: perftest $t missing on the host (setup.sh installs perftest)" >&2
        fi
    done

    # strace, to count what nccl-wrap reads of the kernel's tables (38-gid-reads; amd64 guests).
    if [ -z "$sysroot" ] && command -v strace >/dev/null; then
        copy_with_libs "$(readlink -f "$(command -v strace)")" /usr/bin/strace
    fi

    # rc_probe (tools/rc_probe.c): an RC ping-pong whose QP timeout and retry_cnt are options.
    if [ -n "$sysroot" ]; then
        :
    elif command -v cc >/dev/null && [ -f /usr/include/infiniband/verbs.h ]; then
        mkdir -p "$cache/tools"
        if [ ! -x "$cache/tools/rc_probe" ] || [ "$here/tools/rc_probe.c" -nt "$cache/tools/rc_probe" ]; then
            cc -O2 -Wall -o "$cache/tools/rc_probe" "$here/tools/rc_probe.c" -libverbs ||
                die "cannot build tools/rc_probe.c"
        fi
        copy_with_libs "$cache/tools/rc_probe" /usr/bin/rc_probe
    else
        echo "lab: cc or libibverbs-dev missing on the host (setup.sh installs them); no rc_probe" >&2
    fi

    # nccl-wrap. A static binary needs nothing else; a dynamic one still gets its libraries.
    if ! file -b "$binary" | grep -q "static"; then
        echo "lab: warning: $binary is not statically linked; copying its libraries too" >&2
    fi
    copy_with_libs "$binary" /usr/bin/nccl-wrap
    local want
    want=$([ "$arch" = arm64 ] && echo "ARM aarch64" || echo "x86-64")
    file -b "$binary" | grep -q "$want" || die "$binary is not an $want program (LAB_ARCH=$arch)"

    # Kernel modules, uncompressed (busybox insmod cannot read .ko.xz/.ko.zst).
    [ -f "$moddir/modules.dep" ] || depmod -b "$kdir" "$kver"
    order=()
    lab_add_module "$@"
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
    cp -r "$here/fabric" "$root/lab/fabric"
    install -m 0755 "$here/init.sh" "$root/init"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
    chmod 1777 "$root/tmp"
}

# lab_pack OUT: pack $root into OUT (gzip'd newc cpio).
lab_pack() {
    local out=$1
    (cd "$root" && find . -print0 | cpio --null -o -H newc --quiet --owner=0:0) | gzip -1 >"$out"
    echo "lab: kernel $kver, initramfs $(du -h "$out" | cut -f1), modules: $(tr '\n' ' ' <"$root/lab/modules.order")" >&2
}

# lab_console_filter: guest serial console on stdin to plain lines on stdout (no escape codes, no
# CRs; a LAB-* marker glued to the tail of a kernel message starts its own line).
lab_console_filter() {
    sed -u -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' -e 's/\r//g' \
        -e 's/^.*\(LAB-\(TIME\|START\|RESULT\|DONE\|BENCH\) \)/\1/'
}
