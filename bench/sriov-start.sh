#!/usr/bin/env bash
# An SR-IOV start over the exec-only floor (bench/floor.c), the commands alternated from one loop
# (bench/alternate.py): the h100 fixture node with its device-plugin variables, exec mode; this
# build, this build without the image check, and NCCL_WRAP_BASE (an earlier nccl-wrap). Runs
# where hyperfine and a compiler are absent (the GPU host): give NCCL_WRAP_FLOOR a prebuilt floor.
#
#   NCCL_WRAP_BIN=... NCCL_WRAP_BASE=... [NCCL_WRAP_FLOOR=...] [NCCL_WRAP_ALSO="BIN..."] \
#     bash bench/sriov-start.sh [ROUNDS]
# NCCL_WRAP_ALSO: more builds (absolute paths) alternated with the same arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1000}
bin=$(realpath "${NCCL_WRAP_BIN:?the build to measure}")
base=$(realpath "${NCCL_WRAP_BASE:?an earlier build}")
floor=${NCCL_WRAP_FLOOR:-}
if [ -z "$floor" ]; then
  floor=$(mktemp)
  trap 'rm -f "$floor"' EXIT
  cc -static -O2 -o "$floor" bench/floor.c
fi
fx=$PWD/fixtures/nodes/h100-roce-sriov
args="-q --sysfs-root $fx/sys --annotations /nonexistent --supervise=false -- /bin/true"
vars=()
while IFS= read -r l; do [ -n "$l" ] && vars+=("$l"); done <"$fx/env"
for round in 1 2 3; do
  echo "round $round"
  # shellcheck disable=SC2086
  env -i PATH=/usr/bin:/bin "${vars[@]}" python3 bench/alternate.py "$rounds" /usr/bin/env "$floor" /bin/true :: \
    /usr/bin/env "$bin" $args :: /usr/bin/env NCCL_WRAP_IMAGE_ROOT=/nonexistent "$bin" $args :: /usr/bin/env "$base" $args \
    $(for b in ${NCCL_WRAP_ALSO:-}; do printf ':: /usr/bin/env %s %s ' "$b" "$args"; done)
done
