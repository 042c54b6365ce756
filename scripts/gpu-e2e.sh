#!/usr/bin/env bash
# End to end with real NCCL: a 2-GPU torchrun all_reduce job run without nccl-wrap, through it in
# exec mode, with it as PID 1 of a fresh PID namespace, with a fixture node's HCA list, over the
# network path, and killed by SIGTERM mid-job. Runs on any GPU box with PyTorch + NCCL.
#
#   bash scripts/gpu-e2e.sh [NCCL_WRAP_BINARY] [OUTDIR]
#
# Writes OUTDIR/summary.md (the table for BENCHMARKS.md) and OUTDIR/e2e-logs.tar.gz (NCCL logs and
# each rank's NCCL_* environment as it received it).
set -uo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:-target/x86_64-unknown-linux-gnu/release/nccl-wrap}")
out=$(mkdir -p "${2:-e2e-out}" && realpath "${2:-e2e-out}")
work=$(mktemp -d)
ngpu=$(nvidia-smi -L | wc -l)
[ "$ngpu" -ge 2 ] || { echo "gpu-e2e: needs at least 2 GPUs, found $ngpu" >&2; exit 2; }
ngpu=2
py=$(command -v python3)

# NCCL's own account of what it read; NVLink multicast stays off on shared hosts.
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ENV,NET,INIT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset NCCL_IB_HCA NCCL_IB_GID_INDEX NCCL_IB_DISABLE
torchrun=("$py" -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=$ngpu scripts/e2e/allreduce.py)
empty_sys=$work/empty-sys; mkdir -p "$empty_sys"

declare -A rc wall
run() { # name cmd...: runs one variant, keeps its log, rc and wall time
  local name=$1; shift
  local t0 t1
  t0=$(date +%s.%N)
  "$@" --variant "$name" --outdir "$work" >"$work/$name.log" 2>&1
  rc[$name]=$?
  t1=$(date +%s.%N)
  wall[$name]=$("$py" -c "print(round($t1 - $t0, 2))")
  echo "gpu-e2e: $name: exit ${rc[$name]}, ${wall[$name]} s"
}

echo "gpu-e2e: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x$ngpu, $("$py" -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))')"
echo "gpu-e2e: nccl-wrap: $bin ($(file -b "$bin" | cut -d, -f1-2))"

for round in 1 2; do  # two rounds: the first warms caches (CUDA, Python imports)
  run baseline "${torchrun[@]}"
  run exec "$bin" --sysfs-root /sys -- "${torchrun[@]}"
  run pid1 unshare --pid --fork --mount-proc "$bin" -- "${torchrun[@]}"
done

# A fixture node's sysfs: nccl-wrap exports a real-looking '=mlx5_6:1,...' list and GID 3; NCCL
# must start, find no such device here, and fall back without error.
fx=fixtures/nodes/h100-roce-sriov
fxenv=()
while IFS= read -r line; do fxenv+=("${line%%=*}=${line#*=}"); done <"$fx/env"
run fixture env "${fxenv[@]}" "$bin" --sysfs-root "$fx/sys" --annotations /nonexistent -- "${torchrun[@]}"

# Force the network path: no NVLink P2P, no shared memory; the TCP fallback nccl-wrap chose.
run netpath env NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "$bin" -- "${torchrun[@]}"

# SIGTERM to the wrapper (PID 1 of its namespace) during a longer job.
t0=$(date +%s.%N)
unshare --pid --fork --mount-proc "$bin" -- "${torchrun[@]}" --variant sigterm --outdir "$work" --seconds 120 \
  >"$work/sigterm.log" 2>&1 &
ushare=$!
for _ in $(seq 1 240); do  # until both ranks are up and all-reducing
  [ -f "$work/environ.sigterm.rank0" ] && [ -f "$work/environ.sigterm.rank1" ] && break
  sleep 0.5
done
sleep 5
wrapper=$(pgrep -P "$ushare" | head -1)
ranks_before=$(pgrep -f "allreduce.py --variant sigterm" | wc -l)
echo "gpu-e2e: sigterm: unshare $ushare, wrapper (PID 1 inside) $wrapper, $ranks_before processes of the job"
kill -TERM "$wrapper"
wait "$ushare"; rc[sigterm]=$?
wall[sigterm]=$("$py" -c "print(round($(date +%s.%N) - $t0, 2))")
sleep 1
left=$(pgrep -f "allreduce.py --variant sigterm" | wc -l)
echo "gpu-e2e: sigterm: exit ${rc[sigterm]}, processes left: $left"

# What NCCL and the ranks say they received.
proof() { grep -hE "$2" "$work/$1.log" | sed -E 's/^[^ ]+ +//' | sort -u | head -${3:-3}; }
res() { grep -h '^E2E-RESULT' "$work/$1.log" | tail -1 | sed 's/^E2E-RESULT //'; }
field() { echo "$1" | "$py" -c "import json,sys; d=json.loads(sys.stdin.read().strip() or '{}'); print(d.get('$2', 'n/a'))"; }
base=$(res baseline)
{
  echo "Host: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1) x$ngpu; $("$py" -c 'import torch; print("PyTorch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))'); $(uname -r)"
  echo
  echo "| variant | exit | correct | busbw 1 MiB GB/s | busbw 256 MiB GB/s | ratio 256 MiB vs no wrapper | job wall s |"
  echo "|---|---|---|---|---|---|---|"
  for v in baseline exec pid1 fixture netpath; do
    r=$(res $v); b=$(field "$r" busbw_256MiB_GBs); bb=$(field "$base" busbw_256MiB_GBs)
    ratio=$("$py" -c "b,bb='$b','$bb'; print(f'{float(b)/float(bb):.3f}' if b not in ('n/a','') and bb not in ('n/a','') else 'n/a')")
    echo "| $v | ${rc[$v]} | $(field "$r" correct) | $(field "$r" busbw_1MiB_GBs) | $b | $ratio | ${wall[$v]} |"
  done
  echo "| sigterm (PID 1, TERM after ~5 s of all_reduce) | ${rc[sigterm]} | $(field "$(res sigterm)" correct) | - | - | - | ${wall[sigterm]} |"
  echo
  echo "Processes of the SIGTERM job left afterwards: $left (of $ranks_before before). What the launcher said:"
  echo '```'
  grep -hE "death signal|closing signal|got signal" "$work/sigterm.log" | sed -E 's/^[^]]*\] //' | head -4
  echo '```'
  echo
  echo "NCCL's own log lines (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=ENV,NET,INIT):"
  echo '```'
  for v in exec pid1 fixture netpath; do
    echo "[$v]"
    proof $v "set by environment to|NCCL_IB_HCA" 4
    proof $v "NET/(IB|Socket)|Using network" 3
  done
  echo '```'
  echo
  echo "Each rank's NCCL_* environment (/proc/self/environ):"
  echo '```'
  for f in "$work"/environ.{exec,pid1,fixture}.rank*; do echo "[$(basename "$f")] $(grep -v '^pid=' "$f" | grep -E 'NCCL_IB' | tr '\n' ' ')"; done
  echo '```'
  echo
  echo "nccl-wrap's summary (exec variant):"
  echo '```'
  grep -h '^nccl-wrap:' "$work/exec.log" | head -8
  echo "[fixture]"
  grep -h '^nccl-wrap:' "$work/fixture.log" | head -8
  echo '```'
} >"$out/summary.md"
tar -C "$work" -czf "$out/e2e-logs.tar.gz" .
cat "$out/summary.md"
fail=0
for v in baseline exec pid1 fixture netpath; do [ "${rc[$v]}" = 0 ] || fail=1; done
[ "$left" = 0 ] || fail=1
exit $fail
