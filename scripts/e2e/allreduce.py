"""All-reduce job for the end-to-end check: correctness, bus bandwidth, and what the rank received.

Run under torchrun, one process per GPU. Rank 0 prints one JSON line `E2E-RESULT {...}`. Each rank
writes the NCCL_* part of its own /proc/self/environ (what the wrapper exported reached it, or not)
to OUTDIR/environ.<variant>.rank<N>. With --seconds S the job keeps all-reducing for S seconds
(for the signal test) and records signals it receives.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def busbw(nbytes: int, world: int, iters: int, warmup: int) -> tuple[float, float]:
    """Bus bandwidth in GB/s as nccl-tests defines it for all_reduce: algbw * 2(n-1)/n."""
    x = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    for _ in range(warmup):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dist.all_reduce(x)
    end.record()
    torch.cuda.synchronize()
    secs = start.elapsed_time(end) / 1e3 / iters
    algbw = nbytes / secs / 1e9
    return algbw * 2 * (world - 1) / world, secs * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", required=True)
    ap.add_argument("--outdir", required=True)
    ap.add_argument("--seconds", type=float, default=0.0)
    args = ap.parse_args()

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    with open("/proc/self/environ", "rb") as f:
        nccl = sorted(e.decode(errors="replace") for e in f.read().split(b"\0") if e.startswith(b"NCCL_"))
    with open(os.path.join(args.outdir, f"environ.{args.variant}.rank{rank}"), "w") as f:
        f.write("\n".join(nccl) + "\n")
        f.write(f"pid={os.getpid()} ppid={os.getppid()}\n")

    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    t = torch.full((1024,), float(rank + 1), device="cuda")
    dist.all_reduce(t)
    correct = bool(torch.all(t == world * (world + 1) / 2).item())

    result = {"variant": args.variant, "world": world, "correct": correct}
    if args.seconds > 0:
        got = []
        signal.signal(signal.SIGTERM, lambda s, _f: (got.append(s), sys.exit(128 + s)))
        deadline = time.time() + args.seconds
        x = torch.ones(1 << 20, device="cuda")
        while time.time() < deadline:
            dist.all_reduce(x)
            torch.cuda.synchronize()
    else:
        for size, name in ((1 << 20, "1MiB"), (256 << 20, "256MiB")):
            bw, us = busbw(size, world, iters=50 if size > (1 << 24) else 200, warmup=10)
            result[f"busbw_{name}_GBs"] = round(bw, 2)
            result[f"time_{name}_us"] = round(us, 1)
    dist.barrier()
    if rank == 0:
        print("E2E-RESULT " + json.dumps(result), flush=True)
    dist.destroy_process_group()
    return 0 if correct else 3


if __name__ == "__main__":
    sys.exit(main())
