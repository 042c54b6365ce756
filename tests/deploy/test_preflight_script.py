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
                "NCCL_WRAP_PING_PEERS": "nccl-preflight-{index}.nccl-preflight:18515"}
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
        self.assertEqual(calls, ["doctor --json",
                                 "ping --ring --json --listen 0.0.0.0:18515 "
                                 "--peer-template nccl-preflight-{index}.nccl-preflight:18515"])

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
