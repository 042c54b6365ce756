#!/usr/bin/env bash
# Regenerates link/start.ld, which gathers the code a start runs at the front of the x86_64 image
# (docs/build.md, "Start-up layout"): builds the release binary with symbols and LLD's link map,
# runs it under callgrind over the start path of the fixture nodes (SR-IOV with and without the
# summary, the privileged fallback, a shared node with the pod's entries at 200, 256 visible
# devices), each in a pod network namespace (bench/lib.sh), up to the command's execve, and
# hands the functions it saw run to scripts/start_order.py. Run it as root after a change to the
# start path; a stale script only costs start-up faults, never correctness.
#
#   bash scripts/start-order.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind >/dev/null; }
out=$PWD/target/start-order
NCCL_WRAP_START_LAYOUT=0 CARGO_PROFILE_RELEASE_STRIP=false cargo rustc --release -q --bin nccl-wrap --target-dir "$out" -- \
  -C link-arg=-Wl,-Map="$out/nccl-wrap.map"
NCCL_WRAP_BIN=$out/x86_64-unknown-linux-gnu/release/nccl-wrap
. bench/lib.sh
n=0
rm -f "$out"/cg.*
# trace MODE ROOT SPECS [OPTIONS]: one start under callgrind, dumped before the command's execve.
trace() {
  local mode=$1 root=$2 specs=$3; shift 3
  local vars=()
  [ "$mode" = sriov ] && while IFS= read -r l; do [ -n "$l" ] && vars+=("$l"); done <"$root/../env"
  n=$((n + 1))
  env -i PATH="$PATH" "${vars[@]}" "${pod_netns[@]}" "$pod_eth0 $specs" valgrind --tool=callgrind \
    --demangle=no --compress-strings=no --dump-before=execve --callgrind-out-file="$out/cg.$n" \
    "$bin" "$@" --sysfs-root "$root" --annotations /nonexistent -- "$truebin" >/dev/null 2>&1
}
fx=$PWD/fixtures/nodes/h100-roce-sriov/sys
rails=$(pod_specs h100-roce-sriov)
trace sriov "$fx" "$rails"
trace sriov "$fx" "$rails" -q
trace fallback "$fx" "$rails" -q
python3 fixtures/mknode.py synthetic "$tmp/shared" --hcas 4 --visible 12 --ports 1 --gids 255 --mode shared --own-at 200 >/dev/null
trace shared "$tmp/shared/sys" "$(pod_specs synthetic 4 255 12 shared 200)" -q
python3 fixtures/mknode.py synthetic "$tmp/vis" --hcas 8 --visible 256 --ports 1 --gids 255 --mode fallback >/dev/null
trace fallback "$tmp/vis/sys" "$(pod_specs synthetic 8 255 256 fallback 200)" -q
python3 scripts/start_order.py "$out/nccl-wrap.map" "$out"/cg.*[0-9] >link/start.ld
echo "wrote link/start.ld"
