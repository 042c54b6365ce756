"""deploy/preflight/preflight.sh, run with /bin/sh against a stand-in nccl-wrap, and its output read
back by report.py: what the pods print is what the report understands.

The stand-in prints canned doctor and ping output and records its arguments, so the test also pins
the command lines the pod runs.
"""

import json
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "deploy", "preflight", "preflight.sh")
sys.path.insert(0, os.path.join(ROOT, "deploy", "preflight"))
import report  # noqa: E402

DOCTOR = {"checks": [{"id": "memlock", "status": "pass", "summary": "CAP_IPC_LOCK effective",
                      "evidence": {}, "hint": None}],
          "counts": {"fail": 0, "pass": 1, "warn": 0}, "exit": 0}
SIDE = {"device": "mlx5_6", "port": 1, "gid_index": 3, "gid": "::ffff:10.10.1.11", "mtu_bytes": 4096}
PAIR = {"kind": "ping-pair", "index": 0, "peer": "nccl-preflight-1.nccl-preflight:18515", "local": SIDE,
        "remote": SIDE, "status": "pass", "latency_us": {"median": 4.0, "p99": 6.0}, "bandwidth_gbytes_per_s": 390.0,
        "cause": None}
SUMMARY = {"kind": "ping-summary", "pairs": 1, "failed": 0, "exit": 0}

STUB = textwrap.dedent("""\
    #!/bin/sh
    # Stand-in for nccl-wrap: canned output from $STUB_DIR, arguments appended to $STUB_DIR/calls.
    echo "$*" >>"$STUB_DIR/calls"
    case $1 in
      doctor) cat "$STUB_DIR/doctor.out"; echo "nccl-wrap: doctor's own message" >&2; exit "$(cat "$STUB_DIR/doctor.rc")" ;;
      ping) cat "$STUB_DIR/ping.out"; exit "$(cat "$STUB_DIR/ping.rc")" ;;
    esac
    exit 2
""")


class PreflightScript(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.stub = os.path.join(self.dir.name, "nccl-wrap")
        with open(self.stub, "w") as f:
            f.write(STUB)
        os.chmod(self.stub, stat.S_IRWXU)

    def write(self, name, text):
        with open(os.path.join(self.dir.name, name), "w") as f:
            f.write(text)

    def run_pod(self, doctor_out, doctor_rc, ping_out, ping_rc, index="0", env=None):
        self.write("doctor.out", doctor_out)
        self.write("doctor.rc", str(doctor_rc))
        self.write("ping.out", ping_out)
        self.write("ping.rc", str(ping_rc))
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "STUB_DIR": self.dir.name,
                "NCCL_WRAP": self.stub, "NODE_NAME": "gpu-node-a07", "POD_NAME": "nccl-preflight-0-x0k2p",
                "JOB_COMPLETION_INDEX": index,
                "NCCL_WRAP_PING_PEER_TEMPLATE": "nccl-preflight-{index}.nccl-preflight",
                "NCCL_WRAP_PING_SIZE": "4", "NCCL_WRAP_PING_PORT": "18515"}
        base.update(env or {})
        return subprocess.run(["/bin/sh", SCRIPT], env=base, capture_output=True, text=True, timeout=30)

    def rows(self, stdout):
        return report.build_rows([("pod.log", stdout.splitlines())], None, True)

    def test_all_pass_round_trip(self):
        ping = json.dumps(PAIR) + "\nnot json from ping\n" + json.dumps(SUMMARY) + "\n"
        proc = self.run_pod(json.dumps(DOCTOR) + "\n", 0, ping, 0)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        self.assertEqual([r["source"] for r in records], ["doctor", "ping", "ping", "end"])
        for r in records:
            self.assertEqual((r["node"], r["pod"], r["index"]), ("gpu-node-a07", "nccl-preflight-0-x0k2p", 0))
        self.assertEqual(records[0]["result"], DOCTOR)
        self.assertIn("not json from ping", proc.stdout)  # passed through for people
        rows = self.rows(proc.stdout)
        self.assertFalse([r for r in rows if r.status == "fail"], [r.as_dict() for r in rows])
        with open(os.path.join(self.dir.name, "calls")) as f:
            calls = f.read().splitlines()
        self.assertEqual(calls, ["doctor --json", "ping --ring --json"])

    def test_failures_still_exit_0_and_reach_the_report(self):
        failing = dict(DOCTOR, checks=[dict(DOCTOR["checks"][0], status="fail", hint="add IPC_LOCK")], exit=1)
        pair = dict(PAIR, status="fail", latency_us=None, bandwidth_gbytes_per_s=None,
                    cause={"id": "retry-exceeded", "summary": "no ACK", "evidence": {}, "hint": "check routes"})
        ping = json.dumps(pair) + "\n" + json.dumps(dict(SUMMARY, failed=1, exit=1)) + "\n"
        proc = self.run_pod(json.dumps(failing) + "\n", 1, ping, 1)
        self.assertEqual(proc.returncode, 0, "the pod reports, the report decides")
        end = json.loads(proc.stdout.splitlines()[-1])
        self.assertEqual((end["source"], end["doctor_exit"], end["ping_exit"]), ("end", 1, 1))
        failed = {r.check for r in self.rows(proc.stdout) if r.status == "fail"}
        self.assertIn("doctor memlock", failed)
        self.assertIn("ping", failed)

    def test_doctor_that_prints_no_json(self):
        proc = self.run_pod("", 2, json.dumps(SUMMARY) + "\n", 0)
        self.assertEqual(proc.returncode, 0)
        first = json.loads(proc.stdout.splitlines()[0])
        self.assertEqual((first["source"], first["exit"], first["result"]), ("doctor", 2, None))
        rows = {r.check: r for r in self.rows(proc.stdout)}
        self.assertEqual(rows["doctor"].status, "fail")

    def test_missing_downward_api_variables_stop_the_pod(self):
        proc = self.run_pod("{}\n", 0, "", 0, env={"NODE_NAME": ""})
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("NODE_NAME", proc.stderr)

    def test_non_numeric_index_stops_the_pod(self):
        proc = self.run_pod("{}\n", 0, "", 0, index="1; rm -rf /")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stdout, "")


if __name__ == "__main__":
    unittest.main()


def real_binary():
    """The nccl-wrap the tests built (debug or release), if any."""
    for kind in ("release", "debug"):
        path = os.path.join(ROOT, "target", "x86_64-unknown-linux-gnu", kind, "nccl-wrap")
        if os.access(path, os.X_OK):
            return path
    return None


class PreflightWithTheRealBinary(unittest.TestCase):
    """The command lines preflight.sh gives nccl-wrap are ones it accepts: run against the real
    binary on a fixture node (no RDMA here, so ping says it cannot run, which is not a usage error)."""

    def test_doctor_and_ring_ping_run_and_reach_the_report(self):
        binary = real_binary()
        if binary is None:
            self.skipTest("no nccl-wrap built under target/ (cargo build first)")
        node = os.path.join(ROOT, "fixtures", "nodes", "h100-roce-sriov")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "NCCL_WRAP": binary,
               "NODE_NAME": "gpu-node-a07", "POD_NAME": "nccl-preflight-0-x0k2p", "JOB_COMPLETION_INDEX": "0",
               "NCCL_WRAP_PING_PEER_TEMPLATE": "nccl-preflight-{index}.nccl-preflight",
               "NCCL_WRAP_PING_SIZE": "2", "NCCL_WRAP_PING_PORT": "18515", "NCCL_WRAP_PING_WAIT_MS": "1000",
               "NCCL_WRAP_SYSFS_ROOT": os.path.join(node, "sys"), "NCCL_WRAP_PROC_ROOT": os.path.join(node, "proc"),
               "NCCL_WRAP_DEV_ROOT": os.path.join(node, "dev"), "NCCL_WRAP_ANNOTATIONS": "/nonexistent"}
        with open(os.path.join(node, "env")) as f:
            for line in f.read().splitlines():
                k, _, v = line.partition("=")
                env[k] = v
        proc = subprocess.run(["/bin/sh", SCRIPT], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("usage", proc.stderr.lower(), proc.stderr)
        self.assertNotIn("needs exactly one of", proc.stderr, proc.stderr)
        records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        sources = [r["source"] for r in records]
        self.assertEqual(sources[0], "doctor")
        self.assertEqual(sources[-1], "end")
        self.assertIsNotNone(records[0]["result"], "doctor printed its one JSON line")
        self.assertIn(records[0]["exit"], (0, 1))
        ping = [r["result"] for r in records if r["source"] == "ping"]
        self.assertEqual(ping[-1]["kind"], "ping-summary")
        self.assertEqual(ping[-1]["exit"], 2, "no ibverbs on a fixture tree: ping says it cannot run")
        rows = report.build_rows([("pod.log", proc.stdout.splitlines())], None, True)
        self.assertTrue(any(r.status == "fail" for r in rows), [r.as_dict() for r in rows])
