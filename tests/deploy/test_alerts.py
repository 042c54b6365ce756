"""The node agent's alerts (deploy/node-health/alerts/): the PrometheusRule holds exactly the
groups of the plain rules file, every alert says what to check in doctor's words and names a
metric the agent writes, and `promtool` checks the rules and runs their unit tests
(rules_test.yml; promtool comes from Debian's `prometheus` package, installed by validate.sh and
scripts/setup.sh; without it these two tests are skipped, never passed).
"""

import os
import shutil
import subprocess
import unittest

import yaml

import kit

ALERTS = os.path.join(kit.DEPLOY, "node-health", "alerts")
METRICS = (
    "nccl_wrap_port_usable",
    "nccl_wrap_symbol_error_total",
    "nccl_wrap_check_status",
    "nccl_wrap_ring_pair_status",
    "nccl_wrap_ring_pair_bandwidth_bytes_per_second",
    "nccl_wrap_last_run_timestamp_seconds",
)


def load(name):
    with open(os.path.join(ALERTS, name), encoding="utf-8") as f:
        return yaml.safe_load(f)


class Alerts(unittest.TestCase):
    def test_the_prometheusrule_holds_the_plain_files_groups(self):
        self.assertEqual(load("prometheusrule.yaml")["spec"]["groups"], load("rules.yml")["groups"])

    def test_each_alert_says_what_to_check_on_a_metric_the_agent_writes(self):
        rules = [r for g in load("rules.yml")["groups"] for r in g["rules"]]
        self.assertGreaterEqual(len(rules), 6)
        for r in rules:
            with self.subTest(alert=r["alert"]):
                self.assertTrue(any(m in r["expr"] for m in METRICS), r["expr"])
                desc = r["annotations"]["description"]
                self.assertRegex(desc, r"[Cc]heck|[Rr]un `nccl-wrap")
                self.assertIn(r["labels"]["severity"], ("warning", "critical"))

    def _promtool(self, *args):
        tool = shutil.which("promtool")
        if tool is None:
            print("SKIP: promtool not installed (Debian package prometheus)")
            self.skipTest("promtool not installed")
        out = subprocess.run([tool, *args], cwd=ALERTS, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_promtool_checks_the_rules(self):
        self._promtool("check", "rules", "rules.yml")

    def test_promtool_unit_tests_pass(self):
        self._promtool("test", "rules", "rules_test.yml")
