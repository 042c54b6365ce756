#!/usr/bin/env bash
# Usage: bash scripts/e2e/ras/gpu3.sh [NCCL_WRAP_BINARY]   (OUT=dir; one GPU, PyTorch, NCCL 2.24+)
# Final binary on real NCCL: status during a healthy job, a stall after SIGSTOP, status naming the
# stopped rank, SIGTERM; and doctor's pcie-link on the host's real sysfs.
set -x
here=$(cd "$(dirname "$0")" && pwd); bin=$(realpath "${1:-$here/nccl-wrap}")
OUT=${OUT:-/tmp/out}; d=$OUT/s3; mkdir -p $d
export NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0
export SECS=600 MASTER_PORT=29711
$bin -q --supervise --kill-group --report $d/report.json --termination-log $d/termination --stall-ms 4000 --state-file $d/state.json -- bash $here/launch.sh $d >$d/stdout 2>$d/stderr &
w=$!
for _ in $(seq 1 240); do [ -f $d/beat.rank0 ] && [ -f $d/beat.rank1 ] && break; sleep 0.5; done
sleep 3
$bin status --state-file $d/state.json > $d/status-healthy.txt; echo "status rc=$?"
$bin status --state-file $d/state.json --json > $d/status-healthy.json; echo "status --json rc=$?"
kill -STOP $(cat $d/pid.rank1); sleep 15
$bin status --state-file $d/state.json > $d/status-stopped.txt; echo "status rc=$?"
kill -TERM $w; sleep 3; kill -CONT $(cat $d/pid.rank1); wait $w; echo "wrapper rc=$?"
ls $d/state.json 2>&1
$bin doctor --no-selftest > $d/doctor.txt 2>&1; echo "doctor rc=$?"
grep -h "" /sys/bus/pci/devices/*/current_link_speed 2>/dev/null | sort | uniq -c > $d/link_speeds.txt
for f in status-healthy.txt status-healthy.json status-stopped.txt stderr termination link_speeds.txt; do echo "== $f"; cat $d/$f; done
grep -E "pcie-link|port-rate" $d/doctor.txt
python3 -c "import json; j=json.load(open('$d/report.json')); print(json.dumps(j['ras'])[:1500])"
tar czf $OUT/s3.tar.gz -C $OUT s3
