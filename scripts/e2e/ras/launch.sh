#!/usr/bin/env bash
# Two ranks on one GPU, each its own NCCL_HOSTID; waits for both.
d=$1
export MASTER_ADDR=127.0.0.1 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_PORT=${MASTER_PORT:-29600}
RANK=0 NCCL_HOSTID=host0 python3 "$(dirname "$0")/rank.py" "$d" >"$d/rank0.log" 2>&1 &
RANK=1 NCCL_HOSTID=host1 python3 "$(dirname "$0")/rank.py" "$d" >"$d/rank1.log" 2>&1 &
wait
