"""One rank of a 2-rank all_reduce loop on one GPU (RAS capture). Writes a heartbeat file."""
import datetime, os, sys, time
import torch, torch.distributed as dist
rank = int(os.environ["RANK"]); out = sys.argv[1]
torch.cuda.set_device(0)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=900))
x = torch.ones(1 << 16, device="cuda")
n = 0
with open(f"{out}/pid.rank{rank}", "w") as f:
    f.write(str(os.getpid()))
secs = float(os.environ.get("SECS", "600"))
end = time.time() + secs
while time.time() < end:
    dist.all_reduce(x); torch.cuda.synchronize(); n += 1
    if n % 50 == 0:
        with open(f"{out}/beat.rank{rank}", "w") as f:
            f.write(f"{n} {time.time():.3f}\n")
    time.sleep(0.01)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} done {n}", flush=True)
