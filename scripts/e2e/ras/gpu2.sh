#!/usr/bin/env bash
# Usage: bash scripts/e2e/ras/gpu2.sh [NCCL_WRAP_BINARY]   (OUT=dir; one GPU, PyTorch, NCCL 2.24+)
# term_to_exit_s includes the 3 s the script waits before it SIGCONTs the stopped rank; the time
# RAS adds at SIGTERM is the report's ras.snapshots[].ms.
# nccl-wrap --supervise over a 2-rank job on one GPU: stopped rank + SIGTERM, killed rank +
# SIGTERM, healthy exit, healthy SIGTERM. Everything under $OUT/proof.
set -x
here=$(cd "$(dirname "$0")" && pwd); bin=$(realpath "${1:-$here/nccl-wrap}"); chmod +x $bin $here/launch.sh
OUT=${OUT:-/tmp/out}; P=$OUT/proof; mkdir -p $P
export NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0
run() { # name secs stall_ms: starts nccl-wrap in the background, waits for both ranks
  local d=$P/$1; mkdir -p $d; export SECS=$2 MASTER_PORT=$((29500 + RANDOM % 1000))
  $bin -q --supervise --kill-group --report $d/report.json --termination-log $d/termination --stall-ms $3 -- bash $here/launch.sh $d >$d/stdout 2>$d/stderr &
  echo $! >$d/wrapper
  for _ in $(seq 1 240); do [ -f $d/beat.rank0 ] && [ -f $d/beat.rank1 ] && break; sleep 0.5; done; }
term() { # name: SIGTERM to nccl-wrap, time until it exits
  local d=$P/$1 w; w=$(cat $d/wrapper); t0=$(date +%s.%N); kill -TERM $w
  sleep 3; kill -CONT $(cat $d/pid.rank1) 2>/dev/null
  wait $w; echo $? >$d/rc; python3 -c "print(round($(date +%s.%N)-$t0,3))" >$d/term_to_exit_s; }
# S: rank 1 stopped, 25 s, then SIGTERM
run stopped 600 0; kill -STOP $(cat $P/stopped/pid.rank1); sleep 25; term stopped
# K: rank 1 killed, 12 s (stall-ms 5000 sees the counts stop), then SIGTERM
run killed 600 5000; kill -9 $(cat $P/killed/pid.rank1); sleep 14; term killed
# H: healthy, exits 0 on its own after 15 s with --stall-ms 5000
run healthy 15 5000; w=$(cat $P/healthy/wrapper); wait $w; echo $? >$P/healthy/rc
# T: healthy, SIGTERM after 5 s (the time RAS's answer adds at SIGTERM)
run healthyterm 600 0; sleep 5; term healthyterm
for n in stopped killed healthy healthyterm; do
  echo "== $n rc=$(cat $P/$n/rc) term_to_exit=$(cat $P/$n/term_to_exit_s 2>/dev/null) pids r0=$(cat $P/$n/pid.rank0) r1=$(cat $P/$n/pid.rank1)"
  cat $P/$n/stderr; echo "-- termination:"; cat $P/$n/termination 2>/dev/null
  python3 -c "import json,sys; j=json.load(open('$P/$n/report.json')); print(json.dumps(j.get('ras'),indent=1)[:3000])"
done
tar czf $OUT/proof.tar.gz -C $OUT proof && rm -rf $P
