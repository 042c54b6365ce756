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
. "$here/host-lib.sh"
boot_timeout=${LAB_BOOT_TIMEOUT:-420}

[ $# -ge 1 ] || die "usage: $0 NCCL_WRAP_BINARY [SCENARIO ...]"
binary=$1
shift
[ -f "$binary" ] || die "no such file: $binary"
lab_kernel

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
trap 'rm -rf "${root:-}"' EXIT
lab_build_root "$binary" crc32_generic veth rdma_rxe macvlan ipvlan
printf '%s\n' "${scenarios[@]}" >"$root/lab/scenarios.list"
initrd="$out/initrd$sfx.cpio.gz"
lab_pack "$initrd"

# --- boot --------------------------------------------------------------------------------------
log="$out/last-run$sfx.log"
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
    lab_console_filter |
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
