#!/usr/bin/env bash
# libibverbs' device listing where RDMA netlink does not answer (a kernel without it, a seccomp
# profile that refuses NETLINK_RDMA): system calls of one start, `nccl-wrap -q -- /bin/true`, on
# the 12-HCA node (4 owned) and on a node of 256 visible devices (8 owned), privileged fallback.
# Each case runs in a fresh network and mount namespace holding the pod's rails, with the
# synthetic node's tree mounted over /sys and its uverbs nodes (character devices of the numbers
# sysfs gives, which no driver answers) over /dev/infiniband: libibverbs reads them as a real
# node's, and this kernel (no RDMA) refuses NETLINK_RDMA. The budget: at most 1,000 system calls
# on the 12-HCA node and 1,500 at 256 visible, and none that grow with visible x owned devices.
#
#   NCCL_WRAP_BASE=/path/to/previous/nccl-wrap bash bench/verbs-listing.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
command -v strace >/dev/null || { apt-get update -qq && apt-get install -y -qq strace >/dev/null; }
pod_eth0="eth0,0a:58:0a:80:02:11,10.128.2.17/23"
made_dev=
[ -e /dev/infiniband ] || { mkdir /dev/infiniband; made_dev=1; }
trap 'rm -rf "$tmp"; [ -z "$made_dev" ] || rmdir /dev/infiniband' EXIT

# binary node-dir pod-specs: "syscalls openat" of one start.
count() {
  env -i PATH="$PATH" "${pod_netns[@]}" "$3" sh -c "mount --bind $2/sys /sys && mount --bind $2/dev/infiniband /dev/infiniband \
    && strace -f -c -o $tmp/sc $1 -q --annotations /nonexistent -- /bin/true" >/dev/null 2>&1 || true
  awk '/total/ {t=$4} / openat$/ {o=$4} END {print t, o}' "$tmp/sc"
}

echo "| node (RDMA netlink refused) | syscalls this build | openat | previous release | openat |"
echo "|---|---|---|---|---|"
for c in "12 4" "256 8"; do
  set -- $c
  node=$tmp/n$1
  python3 fixtures/mknode.py synthetic "$node" --hcas "$2" --visible "$1" --ports 1 --gids 255 --mode fallback >/dev/null
  for d in "$node"/sys/class/infiniband_verbs/uverbs*; do
    mm=$(cat "$d/dev"); rm -f "$node/dev/infiniband/${d##*/}"; mknod "$node/dev/infiniband/${d##*/}" c "${mm%:*}" "${mm#*:}"
  done
  specs="$pod_eth0 $(pod_specs synthetic "$2" 255 "$1" fallback 200)"
  read -r new new_o < <(count "$bin" "$node" "$specs")
  old="-"; old_o="-"
  [ -z "${NCCL_WRAP_BASE:-}" ] || read -r old old_o < <(count "$(realpath "$NCCL_WRAP_BASE")" "$node" "$specs")
  echo "| $1 visible, $2 owned | $new | $new_o | $old | $old_o |"
done
