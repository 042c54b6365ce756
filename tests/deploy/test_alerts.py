"""The node agent's alerts (deploy/node-health/alerts/): the PrometheusRule holds exactly the
groups of the plain rules file, every alert says what to check in doctor's words, names only
metrics the agent writes (a real `nccl-wrap watch` round on the fixture nodes, and the families
docs/health.md documents for the ring and the driver's own counters), links its runbook section of
docs/runbooks.md (one section per alert, no more), and has a unit test that expects it to fire.
`promtool` checks the rules, runs their unit tests (rules_test.yml), and runs them once more
without each rule in turn: every alert's test must then fail, so no test passes without the rule
it is about. promtool comes from Debian's `prometheus` package, installed by validate.sh and
scripts/setup.sh; without it those tests are skipped, never passed.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

import kit
import test_node_health

ALERTS = os.path.join(kit.DEPLOY, "node-health", "alerts")
DOCS = os.path.join(kit.ROOT, "docs")
RUNBOOK_BASE = "https://nccl-wrap.dev/docs/runbooks.md#"
METRIC = re.compile(r"\bnccl_wrap_[a-z0-9_]+")


def load(name):
    with open(os.path.join(ALERTS, name), encoding="utf-8") as f:
        return yaml.safe_load(f)


def rules():
    return [r for g in load("rules.yml")["groups"] for r in g["rules"]]


def github_anchor(heading):
    """The anchor GitHub gives a Markdown heading: lower case, punctuation but `-` and `_` dropped,
    spaces as `-`."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def runbook_anchors():
    with open(os.path.join(DOCS, "runbooks.md"), encoding="utf-8") as f:
        return [github_anchor(line[3:]) for line in f if line.startswith("## ")]


def written_metrics():
    """Every family name a real watch round writes on the host-* fixture nodes, and every name
    docs/health.md's metric tables document (ring families, which need a ring round; the `<file>`
    patterns of a driver's own counters), as one regular expression."""
    names = set()
    for node in test_node_health.NODES:
        text = test_node_health.watch_once(node)[1]
        names |= {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    patterns = [re.escape(n) for n in names]
    with open(os.path.join(DOCS, "health.md"), encoding="utf-8") as f:
        text = f.read()
    # The tables of the "Metrics" section only (the prose mentions old names too).
    section = text[text.index("\n## Metrics\n"):text.index("\n## What to alert on\n")]
    rows = "\n".join(line for line in section.splitlines() if line.startswith("| `"))
    for token in re.findall(r"`(nccl_wrap_[a-z0-9_<>]+)`", rows):
        if "<file>" in token:  # a driver's own counter: port_hw_<file>_total, port_ibta_<file>_total
            patterns.append(token.replace("<file>", "[a-z0-9_]+"))
        elif "<" not in token:
            patterns.append(re.escape(token))
    return re.compile("^(" + "|".join(patterns) + ")$")


class Alerts(unittest.TestCase):
    def test_the_prometheusrule_holds_the_plain_files_groups(self):
        self.assertEqual(load("prometheusrule.yaml")["spec"]["groups"], load("rules.yml")["groups"])

    def test_each_alert_says_what_to_check_on_a_metric_the_agent_writes(self):
        known = written_metrics()
        self.assertTrue(known.match("nccl_wrap_symbol_error_total"))
        self.assertFalse(known.match("nccl_wrap_port_counter_total"), "the old name is gone")
        self.assertGreaterEqual(len(rules()), 11)
        for r in rules():
            with self.subTest(alert=r["alert"]):
                used = set(METRIC.findall(r["expr"]))
                self.assertTrue(used, r["expr"])
                for name in used:
                    self.assertTrue(known.match(name), f"{r['alert']}: {name} is not a metric the agent writes")
                desc = r["annotations"]["description"]
                self.assertRegex(desc, r"[Cc]heck|[Rr]un `nccl-wrap")
                self.assertIn(r["labels"]["severity"], ("warning", "critical"))

    def test_the_node_iommu_and_gpudirect_alerts_are_shipped(self):
        exprs = {r["alert"]: r["expr"] for r in rules()}
        self.assertIn("nccl_wrap_healthy == 0", exprs.get("NcclWrapNodeUnhealthy", ""))
        self.assertIn("nccl_wrap_iommu_passthrough == 0", exprs.get("NcclWrapIommuTranslated", ""))
        self.assertIn("nccl_wrap_gpudirect_possible == 0", exprs.get("NcclWrapNoGpuDirect", ""))

    def test_each_alert_links_its_own_runbook_section(self):
        anchors = runbook_anchors()
        self.assertEqual(len(anchors), len(set(anchors)), "a runbook section twice")
        names = [r["alert"] for r in rules()]
        self.assertEqual(sorted(anchors), sorted(n.lower() for n in names), "one runbook section per alert, no more")
        for r in rules():
            with self.subTest(alert=r["alert"]):
                self.assertEqual(r["annotations"].get("runbook_url"), RUNBOOK_BASE + r["alert"].lower())

    def test_the_anchor_rule_is_githubs(self):
        self.assertEqual(github_anchor("NcclWrapNodeUnhealthy"), "ncclwrapnodeunhealthy")
        self.assertEqual(github_anchor("What fired, and why?"), "what-fired-and-why")

    def test_each_alert_has_a_unit_test_that_expects_it(self):
        tests = load("rules_test.yml")["tests"]
        expected = {t["alertname"] for case in tests for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
        quiet = {t["alertname"] for case in tests for t in case.get("alert_rule_test", []) if not t.get("exp_alerts")}
        for r in rules():
            with self.subTest(alert=r["alert"]):
                self.assertIn(r["alert"], expected, "no test expects it to fire")
        for name in ("NcclWrapNodeUnhealthy", "NcclWrapIommuTranslated", "NcclWrapNoGpuDirect"):
            self.assertIn(name, quiet, f"{name}: no test of it staying quiet")

    def _promtool(self, *args, cwd=ALERTS):
        tool = shutil.which("promtool")
        if tool is None:
            print("SKIP: promtool not installed (Debian package prometheus)")
            self.skipTest("promtool not installed")
        return subprocess.run([tool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)

    def test_promtool_checks_the_rules(self):
        out = self._promtool("check", "rules", "rules.yml")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_promtool_unit_tests_pass(self):
        out = self._promtool("test", "rules", "rules_test.yml")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_each_alerts_unit_test_fails_without_its_rule(self):
        groups = load("rules.yml")["groups"]
        with tempfile.TemporaryDirectory(prefix="nccl-wrap-alerts-") as d:
            with open(os.path.join(ALERTS, "rules_test.yml"), encoding="utf-8") as f:
                with open(os.path.join(d, "rules_test.yml"), "w", encoding="utf-8") as g:
                    g.write(f.read())
            for r in rules():
                with self.subTest(alert=r["alert"]):
                    without = [dict(grp, rules=[x for x in grp["rules"] if x["alert"] != r["alert"]]) for grp in groups]
                    with open(os.path.join(d, "rules.yml"), "w", encoding="utf-8") as f:
                        yaml.safe_dump({"groups": without}, f, sort_keys=False)
                    out = self._promtool("test", "rules", "rules_test.yml", cwd=d)
                    self.assertNotEqual(out.returncode, 0, f"the unit tests pass without {r['alert']}")
                    self.assertIn(r["alert"], out.stdout + out.stderr)


if __name__ == "__main__":
    unittest.main()
