#!/usr/bin/env bash
# Start-up on real-sized GID tables (255 entries per port, most empty), side by side with the
# previous release in one run: `nccl-wrap -q -- /bin/true` against the floor (bench/floor.c, exec
# only), NCCL_WRAP_BASE (an earlier nccl-wrap, when given) and the shell wrapper nccl-wrap
# replaces (bench/wrapper.sh). Each case runs in a fresh network and mount namespace; the shared
# case's namespace holds the pod's rail addresses (veths, and on the shared node macvlans, as the
# macvlan CNI leaves them: this is where nccl-wrap reads them).
# Hyperfine, no shell; the commands of a case alternate over ROUNDS rounds, and each figure is the
# median of the rounds' medians. Where hyperfine is absent (the GPU host: nothing can be installed
# there), bench/alternate.py runs the commands in turn from one loop instead, and without strace
# the syscall column says "-". Verbs are not consulted for a fixture tree (libibverbs reads the
# kernel's /sys): the Soft-RoCE lab counts the verbs path's syscalls.
#
#   NCCL_WRAP_BASE=/path/to/previous/nccl-wrap bash bench/tables.sh [RUNS] [ROUNDS]
#   SWEEP=0 ...          # only the 12-HCA cases (no table-length and visible-device sweeps)
#   SWEEP=visible ...    # only the visible-device sweep (the previous release takes over a second
#                        # a run at 1,024 visible: leave NCCL_WRAP_BASE unset there)
#   VISIBLE="16 64 256 1024" ...   # the visible-device sweep (8 owned, privileged fallback)
#   VISIBLE_MODES="fallback sriov" # the sweep's modes: a privileged pod's fallback, and VF pods
#                                  # named by the device plugin on a node in shared RDMA netns
#                                  # mode (the default), where every pod lists every device
#   TIMER=alternate ...  # bench/alternate.py instead of hyperfine (what a host without it uses)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-200}
rounds=${2:-3}
. bench/lib.sh
floor=${NCCL_WRAP_FLOOR:-$tmp/floor}
[ -n "${NCCL_WRAP_FLOOR:-}" ] || cc -static -O2 -o "$floor" bench/floor.c
base=${NCCL_WRAP_BASE:+$(realpath "$NCCL_WRAP_BASE")}
# TIMER=alternate times with bench/alternate.py even where hyperfine is installed.
timer=${TIMER:-hyperfine}
command -v hyperfine >/dev/null || timer=alternate
command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace >/dev/null; } 2>/dev/null || true

# specs cmd...: runs cmd in a fresh network and mount namespace holding the pod's interfaces
# (veths or macvlans with the given names, MACs and addresses), with the case's variables only.
in_pod() {
  local specs=$1; shift
  env -i PATH="$PATH" "${vars[@]}" "${pod_netns[@]}" "$specs" "$@"
}

# name root mode [pod-specs]: one case. mode: sriov (the node's env), fallback or shared (no env).
run_case() {
  local name=$1 root=$2 mode=$3 specs="$pod_eth0 ${4:-}"
  local envf=/dev/null
  [ "$mode" = sriov ] && envf=$root/../env
  local wrap="$bin -q --sysfs-root $root --annotations /nonexistent -- $truebin"
  local cmds=("$floor $truebin" "$wrap")
  [ -n "$base" ] && cmds+=("$base -q --sysfs-root $root --annotations /nonexistent -- $truebin")
  cmds+=("/bin/sh bench/wrapper.sh $root $truebin")
  # The pod's environment: the device plugin's variables only in the SR-IOV mode.
  vars=()
  while IFS= read -r line; do [ -n "$line" ] && vars+=("$line"); done < "$envf"
  for r in $(seq "$rounds"); do
    if [ "$timer" = hyperfine ]; then
      in_pod "$specs" hyperfine -N --warmup 20 -m 10 -M "$runs" --export-json "$tmp/r$r.json" "${cmds[@]}" >/dev/null 2>&1
    else
      local alt=() c
      for c in "${cmds[@]}"; do alt+=($c ::); done
      unset 'alt[-1]'
      in_pod "$specs" python3 bench/alternate.py "$runs" "${alt[@]}" | awk '{print $1}' >"$tmp/r$r.txt"
    fi
  done
  # Syscalls of one run of each binary (strace -f -c), in the same kind of namespace.
  local sc_new="-" sc_base=""
  command -v strace >/dev/null \
    && sc_new=$(in_pod "$specs" strace -f -c -o "$tmp/sc" $wrap >/dev/null 2>&1; awk '/total/ {print $4}' "$tmp/sc")
  if [ -n "$base" ] && command -v strace >/dev/null; then
    sc_base=$(in_pod "$specs" strace -f -c -o "$tmp/sc" $base -q --sysfs-root "$root" --annotations /nonexistent -- "$truebin" >/dev/null 2>&1; awk '/total/ {print $4}' "$tmp/sc")
  fi
  python3 - "$name" "$sc_new" "$sc_base" "$tmp"/r[0-9]* <<'PY'
import json, statistics, sys
name, sc_new, sc_base, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def medians(f):
    if f.endswith(".json"):
        return [x["median"] * 1e3 for x in json.load(open(f))["results"]]
    return [float(line) for line in open(f) if line.strip()]
rounds = [medians(f) for f in files]
med = [statistics.median(col) for col in zip(*rounds)]
floor, new, rest = med[0], med[1], med[2:]
base = rest[0] if len(rest) == 2 else None
shell = rest[-1]
cells = [name, f"+{new - floor:.3f}"]
cells.append(f"+{base - floor:.3f}" if base is not None else "-")
cells.append(f"{(new - floor) / (base - floor):.2f}" if base is not None and base > floor else "-")
cells.append(f"+{shell - floor:.3f}")
cells.append(f"{(new - floor) / (shell - floor):.3f}" if shell > floor else "-")
cells.append(f"{sc_new} / {sc_base}" if sc_base else sc_new)
print("| " + " | ".join(cells) + " |")
PY
  rm -f "$tmp"/r[0-9]*
}

echo "| node (over the floor, ms) | this build | previous release | ratio | shell wrapper | this / wrapper | syscalls this / previous |"
echo "|---|---|---|---|---|---|---|"
# The 12-HCA node: h100-roce-sriov (4 of 12 VFs the pod's, 255-entry tables), and its shared
# twin generated with the pod's entries at index 200 behind other pods'.
fx=fixtures/nodes/h100-roce-sriov
rails=$(pod_specs h100-roce-sriov)
if [ "${SWEEP:-1}" != visible ]; then
  run_case "12 HCAs, 255 GIDs, SR-IOV env (4 VFs)" "$PWD/$fx/sys" sriov "$rails"
  run_case "12 HCAs, 255 GIDs, privileged fallback (4 VFs by netdev)" "$PWD/$fx/sys" fallback "$rails"
  python3 fixtures/mknode.py synthetic "$tmp/shared" --hcas 4 --visible 12 --ports 1 --gids 255 --mode shared --own-at 200 >/dev/null
  run_case "12 HCAs, 255 GIDs, shared, pod's entry at 200 (4 ports)" "$tmp/shared/sys" shared "$(pod_specs synthetic 4 255 12 shared 200)"
  rm -rf "$tmp/shared"
fi

if [ "${SWEEP:-1}" = 1 ]; then
  for len in 16 64 255; do
    python3 fixtures/mknode.py synthetic "$tmp/len" --hcas 4 --visible 12 --ports 1 --gids "$len" --mode fallback >/dev/null
    run_case "table length $len, privileged fallback (4 of 12)" "$tmp/len/sys" fallback "$(pod_specs synthetic 4 "$len" 12 fallback 200)"
    rm -rf "$tmp/len"
  done
  for len in 64 255; do
    python3 fixtures/mknode.py synthetic "$tmp/len" --hcas 4 --visible 12 --ports 1 --gids "$len" --mode shared --own-at $((len - 2)) >/dev/null
    run_case "table length $len, shared, pod's entry at $((len - 2))" "$tmp/len/sys" shared "$(pod_specs synthetic 4 "$len" 12 shared $((len - 2)))"
    rm -rf "$tmp/len"
  done
fi
if [ "${SWEEP:-1}" != 0 ]; then
  for mode in ${VISIBLE_MODES:-fallback}; do
    label=$([ "$mode" = sriov ] && echo "SR-IOV env" || echo "privileged fallback")
    for vis in ${VISIBLE:-16 64 256 1024}; do
      python3 fixtures/mknode.py synthetic "$tmp/vis" --hcas 8 --visible "$vis" --ports 1 --gids 255 --mode "$mode" >/dev/null
      run_case "$vis visible devices, 8 owned, $label" "$tmp/vis/sys" "$mode" "$(pod_specs synthetic 8 255 "$vis" "$mode" 200)"
      rm -rf "$tmp/vis"
    done
  done
fi
echo
echo "medians of $rounds rounds ($timer: $runs runs a command at most); machine: $(nproc) cores, $(uname -r)"
