#!/bin/bash
# Multi-node Soft-RoCE lab: boots two or three guests (the kernel and initramfs of run.sh), wires
# them with QEMU's own networking on 127.0.0.1, and runs the fabric scenarios (fabric/NN-name.sh)
# on every guest at once. The groundwork for `nccl-wrap ping`: each scenario reproduces one way a
# rail pair between two nodes works or fails, with ibv_rc_pingpong / perftest as the client.
#
#   fabric.sh NCCL_WRAP_BINARY [SCENARIO ...]   (SCENARIO: file name under fabric/, with or
#                                                without .sh; default: all of them)
#
# Scenarios that need the same number of nodes (a "# lab-nodes: N" line, default 2) share one
# boot. Each guest: -m $LAB_FABRIC_MEM MiB, one vCPU, NICs (virtio-net-pci):
#   s=0 pod network (TCP exchange, barriers), s=1.. rail 0, rail 1 ($LAB_FABRIC_RAILS, default 2)
# Every NIC of segment s is wired to the same NIC of the other guests: for two guests
# `-netdev socket,listen=127.0.0.1:PORT` / `connect=`, for three `-netdev socket,mcast=` on
# 127.0.0.1 (a shared L2 segment, like a rail switch). Ports are chosen free at run time.
#
# Prints one `PASS|FAIL|SKIP name: detail` line per scenario, the LAB-BENCH lines, a timing line
# and, last, `N passed, N failed` alone on a line. Exits non-zero on any failure, missing result
# or timeout. Every QEMU it started is killed on every way out. Consoles: .out/fabric/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/host-lib.sh"

total_timeout=${LAB_FABRIC_TIMEOUT:-900}     # seconds for the whole run, all boots
export LAB_SCENARIO_TIMEOUT=${LAB_SCENARIO_TIMEOUT:-120}   # per scenario, inside the guests
mem=${LAB_FABRIC_MEM:-640}
rails=${LAB_FABRIC_RAILS:-2}

[ $# -ge 1 ] || die "usage: $0 NCCL_WRAP_BINARY [SCENARIO ...]"
binary=$1
shift
[ -f "$binary" ] || die "no such file: $binary"
lab_kernel
command -v ss >/dev/null || die "ss (iproute2) missing"

# --- scenarios, grouped by node count ----------------------------------------------------------
scenarios=()
if [ $# -eq 0 ]; then
    for f in "$here"/fabric/[0-9]*.sh; do scenarios+=("$(basename "$f" .sh)"); done
else
    for s in "$@"; do
        s=$(basename "$s" .sh)
        [ -f "$here/fabric/$s.sh" ] || die "no fabric scenario $s in $here/fabric"
        scenarios+=("$s")
    done
fi
nodes_of() {
    local n
    n=$(sed -n 's/^# lab-nodes: *\([0-9]\).*/\1/p' "$here/fabric/$1.sh" | head -n1)
    echo "${n:-2}"
}
declare -A group=()
counts=()
for s in "${scenarios[@]}"; do
    n=$(nodes_of "$s")
    [ "$n" -ge 2 ] && [ "$n" -le 3 ] || die "$s: lab-nodes must be 2 or 3, not $n"
    [ -n "${group[$n]:-}" ] || counts+=("$n")
    group[$n]="${group[$n]:+${group[$n]},}$s"
done

# --- cleanup on every way out ------------------------------------------------------------------
qemu_pids=()
kill_guests() {
    local p
    for p in "${qemu_pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${qemu_pids[@]}"; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$p" 2>/dev/null || true
    done
    qemu_pids=()
}
cleanup() {
    kill_guests
    rm -rf "${root:-}"
}
trap cleanup EXIT
trap 'echo "lab: interrupted" >&2; exit 130' INT TERM HUP

# --- initramfs (the same builder as run.sh; more modules) --------------------------------------
lab_build_root "$binary" crc32_generic veth rdma_rxe macvlan ipvlan 8021q \
    virtio_pci virtio_net sch_ingress cls_flower act_gact sch_tbf
initrd="$out/fabric-initrd.cpio.gz"
lab_pack "$initrd"

logdir="$out/fabric"
rm -rf "$logdir"
mkdir -p "$logdir"

# --- wiring ------------------------------------------------------------------------------------
used_ports() { ss -Htan 2>/dev/null | awk '{print $4}'; ss -Huan 2>/dev/null | awk '{print $4}'; }
taken=" "
free_port() {  # a port no local TCP or UDP socket uses and not handed out before in this run
    local p
    for _ in $(seq 1 200); do
        p=$((20000 + RANDOM % 40000))
        case $taken in *" $p "*) continue ;; esac
        used_ports | grep -q ":$p\$" && continue
        taken+="$p "
        echo "$p"
        return 0
    done
    die "no free port found"
}

start=$(date +%s.%N)
elapsed() { awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
deadline=$(awk -v a="$start" -v t="$total_timeout" 'BEGIN{printf "%d", a+t}')
timed_out=0
boot_lines=()

# boot_group N LIST: boot N guests that run the scenarios in LIST (comma-separated), wait until
# all of them power off or the overall deadline passes.
boot_group() {
    local n=$1 list=$2 nics=$((1 + rails)) i s port netdev args cmdline t0 alive
    local -a ports=() mcast=()
    for ((s = 0; s < nics; s++)); do
        ports[s]=$(free_port)
        mcast[s]="239.255.$((RANDOM % 250 + 1)).$((s + 1))"
    done
    cmdline="console=ttyS0 quiet panic=-1 LAB_NODE=@N@ LAB_NODES=$n LAB_NICS=$nics LAB_FABRIC_LIST=$list"
    cmdline+=" LAB_SCENARIO_TIMEOUT=$LAB_SCENARIO_TIMEOUT"
    for v in $(compgen -e | grep '^LAB_FABRIC_' | grep -v -E '^LAB_FABRIC_(TIMEOUT|MEM|RAILS)$'); do
        [[ ${!v} =~ ^[A-Za-z0-9_.,:/-]*$ ]] || die "$v: only [A-Za-z0-9_.,:/-] can pass to the guests"
        cmdline+=" $v=${!v}"
    done
    t0=$(date +%s.%N)
    echo "lab: booting $n guests for: $list (ports ${ports[*]})" >&2
    for ((i = 0; i < n; i++)); do
        args=()
        for ((s = 0; s < nics; s++)); do
            if [ "$n" -eq 2 ]; then
                if [ "$i" -eq 0 ]; then netdev="listen=127.0.0.1:${ports[s]}"
                else netdev="connect=127.0.0.1:${ports[s]}"; fi
            else
                netdev="mcast=${mcast[s]}:${ports[s]},localaddr=127.0.0.1"
            fi
            args+=(-netdev "socket,id=n$s,$netdev"
                -device "virtio-net-pci,netdev=n$s,mac=52:54:00:0$s:00:0$i,romfile=")
        done
        qemu-system-x86_64 -accel tcg -m "$mem" -smp 1 -nographic -no-reboot -nic none \
            -kernel "$vmlinuz" -initrd "$initrd" -append "${cmdline//@N@/$i}" \
            "${args[@]}" </dev/null >"$logdir/node$i.raw" 2>&1 &
        qemu_pids+=($!)
        if [ "$n" -eq 2 ] && [ "$i" -eq 0 ]; then
            # connect= fails at once when nothing listens yet: wait for node 0's listeners.
            for _ in $(seq 1 100); do
                alive=0
                for ((s = 0; s < nics; s++)); do
                    ss -Hltn "sport = :${ports[s]}" | grep -q . && alive=$((alive + 1))
                done
                [ "$alive" -eq "$nics" ] && break
                kill -0 "${qemu_pids[-1]}" 2>/dev/null || break
                sleep 0.1
            done
        fi
    done
    # Wait for every guest to power off; past the deadline kill them all.
    while :; do
        alive=0
        for p in "${qemu_pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
        [ "$alive" -eq 0 ] && break
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "lab: overall timeout (${total_timeout}s): killing the guests" >&2
            timed_out=1
            break
        fi
        # rxe under TCG can lock a guest CPU up (the console says so after about 20 s): no
        # scenario of this boot can finish, so the guests are stopped now rather than at the
        # deadline (scripts/test.sh boots the fabric once more for exactly this).
        if grep -aq 'watchdog: BUG: soft lockup' "$logdir"/node*.raw 2>/dev/null; then
            echo "lab: a guest kernel locked up (watchdog: BUG: soft lockup): killing the guests" >&2
            timed_out=1
            break
        fi
        sleep 0.5
    done
    kill_guests
    for ((i = 0; i < n; i++)); do
        lab_console_filter <"$logdir/node$i.raw" >"$logdir/g$n-node$i.log"
        rm -f "$logdir/node$i.raw"
    done
    boot_lines+=("$n guests: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s")
}

for n in "${counts[@]}"; do
    [ "$timed_out" -eq 0 ] && boot_group "$n" "${group[$n]}"
done

# --- results -----------------------------------------------------------------------------------
for n in "${counts[@]}"; do
    for ((i = 0; i < n; i++)); do
        echo "===== $n guests, node $i console ($logdir/g$n-node$i.log) ====="
        cat "$logdir/g$n-node$i.log" 2>/dev/null || true
    done
done
echo
echo "=== fabric results (kernel $kver) ==="
passed=0 failed=0 skipped=0
for s in "${scenarios[@]}"; do
    n=$(nodes_of "$s")
    st=PASS detail="" missing=""
    for ((i = 0; i < n; i++)); do
        line=$(grep -a -m1 "^LAB-RESULT $s " "$logdir/g$n-node$i.log" 2>/dev/null || true)
        if [ -z "$line" ]; then
            missing+=" $i"
            continue
        fi
        rest=${line#LAB-RESULT $s }
        ns=${rest%% *}
        nd=${rest#"$ns"}
        nd=${nd# }
        case $ns in
            PASS) ;;
            SKIP) [ "$st" = FAIL ] || st=SKIP ;;
            *) st=FAIL ;;
        esac
        detail+="${detail:+ | }n$i${ns:+ $ns}: $nd"
    done
    if [ -n "$missing" ]; then
        st=FAIL
        detail+="${detail:+ | }no result from node(s)$missing"
    fi
    case $st in
        PASS) passed=$((passed + 1)) ;;
        SKIP) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)) ;;
    esac
    # Per-node status words only where they differ from the overall one.
    echo "$st $s: $(echo "$detail" | sed -E "s/(^| \| )n([0-9]) $st: /\1n\2: /g")"
done
for n in "${counts[@]}"; do
    for ((i = 0; i < n; i++)); do
        f="$logdir/g$n-node$i.log"
        [ -f "$f" ] || continue
        if grep -a -q '^LAB-RESULT \(modules\|fabric\) FAIL' "$f"; then
            echo "FAIL $n guests, node $i: $(grep -a -m1 '^LAB-RESULT \(modules\|fabric\) FAIL' "$f" | cut -d' ' -f4-)"
            failed=$((failed + 1))
        fi
        if ! grep -a -q '^LAB-DONE' "$f"; then
            echo "FAIL $n guests, node $i: did not finish (no LAB-DONE)"
            failed=$((failed + 1))
        fi
    done
done
grep -a -h '^LAB-BENCH ' "$logdir"/*.log 2>/dev/null || true
[ "$timed_out" -eq 0 ] || echo "timed out after ${total_timeout}s"
times=$(for n in "${counts[@]}"; do
    grep -a -h '^LAB-TIME ' "$logdir/g$n-node0.log" 2>/dev/null | grep -v -E '^LAB-TIME (boot|up) '
done | awk '{printf "%s %ss, ", $2, $3}')
echo "timing: ${boot_lines[*]/%/;} scenarios (node 0): ${times%, }; whole run $(elapsed)s"
[ "$skipped" -eq 0 ] || echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
