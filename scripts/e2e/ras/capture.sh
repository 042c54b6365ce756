#!/usr/bin/env bash
# Usage: bash scripts/e2e/ras/capture.sh   (OUT=dir; one GPU, PyTorch, NCCL 2.24+): the replies in fixtures/ras/
# RAS captures with NCCL 2.28: healthy, one rank SIGSTOPped (~110 s), one rank killed.
set -x
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}; w=$(mktemp -d); cap=$w/cap; mkdir -p $cap
nvidia-smi -L; python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'
export NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,RAS MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 LOCAL_RANK=0
start() { # scenario dir
  local d=$1; mkdir -p $d; export MASTER_PORT=$((29500 + RANDOM % 1000))
  for r in 0 1; do RANK=$r NCCL_HOSTID=host$r python3 $here/rank.py $d >$d/rank$r.log 2>&1 & echo $! >$d/launcher$r; done
  for _ in $(seq 1 240); do [ -f $d/beat.rank0 ] && [ -f $d/beat.rank1 ] && break; sleep 0.5; done
  cat $d/beat.rank*; ss -ltnp 2>/dev/null | grep -E '28028|python' ; }
stopall() { for r in 0 1; do p=$(cat $1/pid.rank$r 2>/dev/null); [ -n "$p" ] && kill -CONT $p 2>/dev/null; [ -n "$p" ] && kill -9 $p 2>/dev/null; done; wait $(cat $1/launcher0) $(cat $1/launcher1) 2>/dev/null; }

# A: healthy
A=$cap/healthy; start $A
python3 $here/ras.py healthy all $A/ras.jsonl 8
for i in $(seq 1 20); do python3 $here/ras.py t$i status $A/timing.jsonl 8 >/dev/null; done
for i in $(seq 1 10); do python3 $here/ras.py t$i json_verbose $A/timing.jsonl 8 >/dev/null; done
python3 - $A/timing.jsonl <<'PY'
import json,sys,statistics as st
rs=[json.loads(l) for l in open(sys.argv[1])]
for n in ("status","json_verbose"):
  ms=[r["ms"] for r in rs if r["name"]==n and "error" not in r]
  print("TIMING",n,"n",len(ms),"median_ms",st.median(ms),"min",min(ms),"max",max(ms))
PY
stopall $A
# B: one rank stopped
B=$cap/stopped; start $B
python3 $here/ras.py before basic $B/ras.jsonl 8
p1=$(cat $B/pid.rank1); echo "STOP rank1 pid $p1 at $(date +%s.%N)"; kill -STOP $p1; t0=$(date +%s)
for i in $(seq 1 12); do
  sleep $(( 10 - ($(date +%s) - t0) % 10 ))
  python3 $here/ras.py "stop+$(( $(date +%s) - t0 ))s" basic $B/ras.jsonl 6
done
python3 $here/ras.py late all $B/ras.jsonl 6
cat $B/beat.rank*
stopall $B
# C: one rank killed
C=$cap/killed; start $C
p1=$(cat $C/pid.rank1); echo "KILL rank1 pid $p1 at $(date +%s.%N)"; kill -9 $p1; t0=$(date +%s)
for s in 1 5 15 30 50; do
  while [ $(( $(date +%s) - t0 )) -lt $s ]; do sleep 0.5; done
  python3 $here/ras.py "kill+${s}s" basic $C/ras.jsonl 6
  p0=$(cat $C/pid.rank0); kill -0 $p0 2>/dev/null && echo "rank0 alive" || echo "rank0 gone"
done
python3 $here/ras.py killlate all $C/ras.jsonl 6
stopall $C
cd $w && tar czf $OUT/ras-capture.tar.gz cap; 
