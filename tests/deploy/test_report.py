"""deploy/preflight/report.py over realistic preflight logs (tests/deploy/samples/).

all-pass.log:        two nodes, `kubectl logs --prefix` form, nccl-wrap's own lines between.
mixed-failures.log:  node 0 passes; node 1 fails doctor's iommu check and a ping pair
                     (retry-exceeded); node 2's log is cut mid-line; a garbage line with a timestamp.
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout, redirect_stderr

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SAMPLES = os.path.join(HERE, "samples")
sys.path.insert(0, os.path.join(ROOT, "deploy", "preflight"))
import report  # noqa: E402


def sample(name):
    return os.path.join(SAMPLES, name)


def run(argv, stdin_text=None):
    """main() in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin_text is not None:
        sys.stdin = io.StringIO(stdin_text)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = report.main(argv)
            except SystemExit as e:  # argparse's usage errors
                code = e.code
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def rows_of(argv, stdin_text=None):
    code, out, _ = run(["--json", "--all"] + argv, stdin_text)
    return code, [json.loads(line) for line in out.splitlines() if line.strip()]


def find(rows, **want):
    return [r for r in rows if all(r.get(k) == v for k, v in want.items())]


class AllPass(unittest.TestCase):
    def test_exit_0_and_every_node_has_doctor_and_ping(self):
        code, rows = rows_of([sample("all-pass.log")])
        self.assertEqual(code, 0)
        for node in ("gpu-node-a07", "gpu-node-a08"):
            self.assertEqual(find(rows, node=node, check="doctor")[0]["status"], "pass")
            self.assertEqual(find(rows, node=node, check="ping")[0]["status"], "pass")
        self.assertFalse(find(rows, status="fail"))

    def test_warnings_do_not_fail(self):
        code, rows = rows_of([sample("all-pass.log")])
        self.assertEqual(code, 0)
        self.assertEqual(len(find(rows, check="doctor gpudirect", status="warn")), 2)

    def test_pass_rows_carry_measurements(self):
        _, rows = rows_of([sample("all-pass.log")])
        pair = [r for r in rows if r["check"].startswith("ping mlx5_6:1 -> ")][0]
        self.assertIn("4.1 us median", pair["cause"])
        self.assertIn("388.2 Gb/s", pair["cause"])

    def test_table_form_lists_header_and_count(self):
        code, out, _ = run([sample("all-pass.log")])
        self.assertEqual(code, 0)
        self.assertTrue(out.startswith("NODE"))
        self.assertIn("2 node(s): 0 failed, 2 warned", out)

    def test_expect_more_indexes_than_reported_fails(self):
        code, rows = rows_of(["--expect", "3", sample("all-pass.log")])
        self.assertEqual(code, 1)
        missing = find(rows, index=2, check="preflight", status="fail")
        self.assertEqual(len(missing), 1, rows)
        self.assertIn("no output", missing[0]["cause"])


class MixedFailures(unittest.TestCase):
    def setUp(self):
        with open(sample("mixed-failures.log")) as f:
            self.code, self.rows = rows_of(["--expect", "4"], f.read())

    def test_exit_1(self):
        self.assertEqual(self.code, 1)

    def test_failing_doctor_check_names_device_and_fix(self):
        row = find(self.rows, node="gpu-node-b02", check="doctor iommu mlx5_10")
        self.assertEqual(len(row), 1)
        self.assertEqual(row[0]["status"], "fail")
        self.assertIn("DMA-FQ", row[0]["cause"])
        self.assertIn("fix: boot with iommu=pt", row[0]["cause"])
        self.assertEqual(find(self.rows, node="gpu-node-b02", check="doctor")[0]["status"], "fail")

    def test_failing_pair_shows_cause(self):
        row = [r for r in self.rows if r["node"] == "gpu-node-b02" and r["check"].startswith("ping mlx5_6:1")]
        self.assertEqual(len(row), 1)
        self.assertEqual(row[0]["status"], "fail")
        self.assertTrue(row[0]["cause"].startswith("retry-exceeded: IBV_WC_RETRY_EXC_ERR"), row[0]["cause"])
        self.assertIn("fix: check the route", row[0]["cause"])
        self.assertIn("1 of 1 pair(s) failed", find(self.rows, node="gpu-node-b02", check="ping")[0]["cause"])

    def test_passing_node_stays_passing(self):
        node = find(self.rows, node="gpu-node-b01")
        self.assertFalse(find(node, status="fail"), node)

    def test_truncated_line_is_a_failed_row_of_its_node(self):
        bad = find(self.rows, node="gpu-node-b03", check="log line")
        self.assertEqual(len(bad), 1)
        self.assertIn("malformed or truncated JSON", bad[0]["cause"])
        self.assertEqual(bad[0]["index"], 2)
        # Nothing after the cut arrived: no doctor result, no ping summary, no end.
        for check in ("doctor", "ping", "preflight"):
            self.assertEqual(find(self.rows, node="gpu-node-b03", check=check)[0]["status"], "fail", check)

    def test_pod_that_printed_nothing_is_a_failed_row(self):
        missing = find(self.rows, index=3)
        self.assertEqual(len(missing), 1)
        self.assertEqual(missing[0]["status"], "fail")

    def test_garbage_lines_are_ignored(self):
        # The sample's "garbage {not json" line (after a timestamp) makes no row.
        self.assertFalse([r for r in self.rows if "garbage" in r["cause"]])


class Inputs(unittest.TestCase):
    def test_files_and_stdin_give_the_same_rows(self):
        with open(sample("mixed-failures.log")) as f:
            text = f.read()
        _, from_stdin = rows_of([], text)
        _, from_file = rows_of([sample("mixed-failures.log")])
        strip = lambda rows: [{k: v for k, v in r.items() if k != "cause"} for r in rows]  # noqa: E731
        self.assertEqual(strip(from_stdin), strip(from_file))

    def test_plain_logs_without_prefix(self):
        # `kubectl logs POD` per pod, no --prefix: the records carry node and pod themselves.
        with open(sample("all-pass.log")) as f:
            plain = "".join(line.split("] ", 1)[1] for line in f)
        code, rows = rows_of([], plain)
        self.assertEqual(code, 0)
        self.assertEqual(len(find(rows, check="doctor", status="pass")), 2)

    def test_timestamps_are_stripped(self):
        with open(sample("all-pass.log")) as f:
            stamped = "".join(line.replace("] ", "] 2026-01-12T10:00:00.123456789Z ", 1) for line in f)
        code, rows = rows_of([], stamped)
        self.assertEqual(code, 0)
        self.assertEqual(len(find(rows, check="ping", status="pass")), 2)

    def test_empty_file_is_a_failed_row(self):
        with tempfile.NamedTemporaryFile("w", suffix=".log") as empty:
            code, rows = rows_of([empty.name, sample("all-pass.log")])
        self.assertEqual(code, 1)
        self.assertEqual(len(find(rows, check="log", status="fail")), 1)

    def test_no_input_at_all_fails(self):
        code, _, err = run([], "")
        self.assertEqual(code, 1)
        self.assertIn("no preflight output", err)

    def test_doctor_without_json(self):
        line = json.dumps({"node": "n1", "pod": "p-0", "index": 0, "source": "doctor", "exit": 2, "result": None})
        code, rows = rows_of([], line + "\n")
        self.assertEqual(code, 1)
        self.assertIn("doctor printed no JSON (exit 2)", find(rows, check="doctor")[0]["cause"])

    def test_ping_could_not_run(self):
        head = {"node": "n1", "pod": "p-0", "index": 0}
        lines = [dict(head, source="doctor", exit=0, result={"checks": [], "counts": {}, "exit": 0}),
                 dict(head, source="ping", result={"kind": "ping-summary", "pairs": 0, "failed": 0, "exit": 2}),
                 dict(head, source="end", doctor_exit=0, ping_exit=2)]
        code, rows = rows_of([], "\n".join(json.dumps(x) for x in lines) + "\n")
        self.assertEqual(code, 1)
        self.assertIn("could not run", find(rows, check="ping")[0]["cause"])
        self.assertEqual(find(rows, check="doctor")[0]["status"], "pass")

    def test_foreign_json_is_ignored(self):
        lines = ['{"level":"info","msg":"a log line of some other program"}', "[1, 2, 3]"]
        code, _, err = run([], "\n".join(lines) + "\n")
        self.assertEqual(code, 1)  # nothing of ours: reported as no output, not as a crash
        self.assertIn("no preflight output", err)


class Usage(unittest.TestCase):
    def test_unknown_option_is_2(self):
        self.assertEqual(run(["--bogus"])[0], 2)

    def test_unreadable_file_is_2(self):
        code, _, err = run([os.path.join(SAMPLES, "does-not-exist.log")])
        self.assertEqual(code, 2)
        self.assertIn("cannot read", err)

    def test_expect_zero_is_2(self):
        self.assertEqual(run(["--expect", "0", sample("all-pass.log")])[0], 2)

    def test_runs_as_a_program(self):
        # The README's form: a pipe into the script, with python3 and nothing else.
        with open(sample("mixed-failures.log"), "rb") as f:
            proc = subprocess.run([sys.executable, os.path.join(ROOT, "deploy", "preflight", "report.py")],
                                  stdin=f, capture_output=True, timeout=30)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn(b"doctor iommu mlx5_10", proc.stdout)


if __name__ == "__main__":
    unittest.main()
