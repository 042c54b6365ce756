#!/usr/bin/env python3
"""NCCL's RAS answering about N processes: what the answer costs nccl-wrap at a SIGTERM, after a
failure, and in `nccl-wrap status` (docs/postmortem.md, "Bounds"; BENCHMARKS.md).

usage: python3 bench/ras-scale.py BINARY [RUNS] [N...]      (defaults: 5 runs; 65536 262144)

A stand-in RAS server on loopback answers STATUS with a text report naming N processes as briefly
as NCCL prints them (communicators of 256 missing ranks, a `  Rank R` line each: 858 KB for
65,536, inside the client's 1 MiB cap; 3.6 MB for 262,144, past it), and `SET FORMAT json` with
4,096 missing ranks (what a stall poll reads). For each N, the median and range of RUNS runs:

- term: `nccl-wrap -q --supervise --report R -- sh -c TRAP`, SIGTERM to nccl-wrap 0.2 s after the
  command started: ms until the command's trap ran (a file appearing, polled every ms), ms from
  then to nccl-wrap's exit, nccl-wrap's peak RSS (wait4: its own, or the command's if larger);
- term+stall: the same with `--stall-ms 1000`, the SIGTERM 2.5 s after the start (stall polls
  under way);
- exit: the command exits 3 after 0.2 s: ms from its end (a file) to nccl-wrap's exit, peak RSS;
- status: `nccl-wrap status` with a state file naming the server: ms, peak RSS.
"""

import json
import os
import signal
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def text_report(n):
    out = ["SERVER PROTOCOL 2\nNCCL version 2.28.9 compiled with CUDA 13.0\n\nErrors\n======\n\n"]
    for c in range((n + 255) // 256):
        out.append(f"#0-{c} ({c:016x}) INCOMPLETE\n  Missing communicator data from 256 ranks\n")
        out.extend(f"  Rank {r}\n" for r in range(c * 256, min((c + 1) * 256, n)))
        out.append("\n")
    return "".join(out).encode()


def json_report(n):
    comms = []
    for c in range((n + 255) // 256):
        missing = [{"rank": r, "host": f"10.0.0.{r % 250}", "pid": 1000 + r, "cuda_dev": r % 8}
                   for r in range(c * 256 + 1, min((c + 1) * 256, n))]
        comms.append({"hash": f"0x{c:016x}", "missing_ranks": missing,
                      "ranks": [{"rank": c * 256, "pid": 1, "collective_counts": {"AllReduce": 57}}]})
    return ("SERVER PROTOCOL 2\nOK\n" + json.dumps({"nccl_version": "2.28.9", "communicators": comms}) + "\n").encode()


class Ras(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(text, js):
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            fmt_json = False
            for line in self.rfile:
                cmd = line.strip()
                if cmd == b"SET FORMAT json":
                    fmt_json = True
                elif cmd in (b"STATUS", b"VERBOSE STATUS"):
                    break
            try:
                self.wfile.write(js if fmt_json else text)
            except OSError:
                pass

    srv = Ras(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def env_for(addr):
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "NCCL_WRAP_SYSFS_ROOT": "/nonexistent/sys",
            "NCCL_WRAP_ANNOTATIONS": "/nonexistent/annotations", "NCCL_RAS_ADDR": addr}


def appears(path, within=120.0):
    t = time.monotonic()
    while time.monotonic() - t < within:
        if os.path.exists(path):
            return time.monotonic()
        time.sleep(0.001)
    raise SystemExit(f"{path} never appeared")


# Peak RSS through GNU time: a child forked by Python starts with Python's own high-water mark,
# which the kernel carries over its exec into ru_maxrss (70 MB here, whatever nccl-wrap used).
TIME = ["/usr/bin/time", "-f", "%M"]


def spawn(argv, d, **kw):
    return subprocess.Popen(TIME + ["-o", os.path.join(d, "rss")] + argv, **kw)


def reap(p, d):
    p.wait()
    ended = time.monotonic()
    with open(os.path.join(d, "rss")) as f:
        lines = f.read().split()
    # GNU time says "Command exited with non-zero status N" before the figure.
    p.returncode = int(lines[-2]) if len(lines) > 1 and lines[-2].isdigit() else 0
    if "Command terminated by signal" in " ".join(lines):
        p.returncode = 128 + int(lines[-2])
    return ended, int(lines[-1]) / 1024.0


def term(binary, addr, d, stall):
    got, ready = os.path.join(d, "got"), os.path.join(d, "ready")
    for f in (got, ready):
        if os.path.exists(f):
            os.unlink(f)
    script = f"trap 'touch {got}; exit 143' TERM; touch {ready}; while :; do sleep 0.02; done"
    opts = ["--stall-ms", "1000"] if stall else []
    p = spawn([binary, "-q", "--supervise", "--report", os.path.join(d, "r.json"), *opts, "--",
               "sh", "-c", script], d, env=env_for(addr), stderr=subprocess.DEVNULL)
    appears(ready)
    time.sleep(2.5 if stall else 0.2)
    # To nccl-wrap, time's child (time itself would die of it).
    with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
        wrapper = int(f.read().split()[0])
    sent = time.monotonic()
    os.kill(wrapper, signal.SIGTERM)
    at = appears(got)
    ended, rss = reap(p, d)
    assert p.returncode == 143, p.returncode
    return {"sigterm_to_command_ms": (at - sent) * 1e3, "command_to_exit_ms": (ended - at) * 1e3, "peak_rss_mb": rss}


def failed(binary, addr, d):
    gone = os.path.join(d, "gone")
    if os.path.exists(gone):
        os.unlink(gone)
    p = spawn([binary, "-q", "--supervise", "--report", os.path.join(d, "r.json"), "--",
               "sh", "-c", f"sleep 0.2; touch {gone}; exit 3"], d, env=env_for(addr), stderr=subprocess.DEVNULL)
    at = appears(gone)
    ended, rss = reap(p, d)
    assert p.returncode == 3, p.returncode
    return {"command_to_exit_ms": (ended - at) * 1e3, "peak_rss_mb": rss}


def status(binary, addr, d):
    state = os.path.join(d, "state.json")
    with open(state, "w") as f:
        json.dump({"pid": 7, "started": "2026-11-24T18:00:00.000Z", "ras": addr, "ports": []}, f)
    t = time.monotonic()
    p = spawn([binary, "status", "--state-file", state], d, env=env_for(addr),
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ended, rss = reap(p, d)
    # 1: RAS names ranks; 0: the answer was past the byte cap (said, nothing named).
    assert p.returncode in (0, 1), p.returncode
    return {"status_ms": (ended - t) * 1e3, "peak_rss_mb": rss}


def main():
    binary = os.path.realpath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    sizes = [int(a) for a in sys.argv[3:]] or [65536, 262144]
    for n in sizes:
        text = text_report(n)
        srv = serve(text, json_report(4096))
        addr = f"127.0.0.1:{srv.server_address[1]}"
        print(f"N={n}: text answer {len(text)} bytes")
        with tempfile.TemporaryDirectory() as d:
            cases = {"term": lambda: term(binary, addr, d, False), "term+stall": lambda: term(binary, addr, d, True),
                     "exit": lambda: failed(binary, addr, d), "status": lambda: status(binary, addr, d)}
            for name, case in cases.items():
                rows = [case() for _ in range(runs)]
                cells = []
                for key in rows[0]:
                    vals = [r[key] for r in rows]
                    cells.append(f"{key} {statistics.median(vals):.1f} ({min(vals):.1f}-{max(vals):.1f})")
                print(f"  {name:<10} " + ", ".join(cells))
                if name == "term":
                    with open(os.path.join(d, "r.json")) as f:
                        snaps = json.load(f).get("ras", {}).get("snapshots", [])
                    s = snaps[0] if snaps else {}
                    print(f"  {'':<10} (the answer: {len(s.get('lines', []))} lines, error {s.get('error')!r},"
                          f" {s.get('ms')} ms to read it)")
        srv.shutdown()


if __name__ == "__main__":
    main()
