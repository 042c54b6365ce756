"""The JobSet launcher's coordinator and failure policy (jobset.py says what JobSet and the Job
controller do, after their sources): the gate's coordinator and torchrun's master address come
from the `jobset.sigs.k8s.io/coordinator` annotation that spec.coordinator makes JobSet write,
through the downward API, into the options nccl-wrap reads (`--gate-coordinator`,
NCCL_WRAP_GATE_COORDINATOR: the binary's own --help names it); nccl-wrap's refusal (exit 125)
fails the JobSet at once while other failures restart it. Each rule also on a broken copy.
"""

import copy
import subprocess
import unittest

import jobset
import kit
import test_node_health

LEAVES = ["launchers/jobset"] + [f"overlays/{net}/jobset" for net in
                                 ("openshift-sriov", "network-operator", "network-operator-shared", "network-operator-shared-ib")]


def the_jobset(objects):
    return [o for o in objects if o["kind"] == "JobSet"][0]


class Coordinator(unittest.TestCase):
    def test_every_jobset_reads_the_coordinator_from_its_annotation(self):
        for leaf in LEAVES:
            with self.subTest(leaf=leaf):
                js = the_jobset(kit.render(leaf))
                self.assertEqual(jobset.check_coordinator(js["metadata"]["name"], js["spec"], "trainer"), [])
                self.assertEqual(jobset.coordinator_endpoint(js["metadata"]["name"], js["spec"]), "llm-train-node-0-0.llm-train")

    def test_the_binary_takes_the_coordinator_option(self):
        proc = subprocess.run([test_node_health.binary(), "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("--gate-coordinator", proc.stdout)
        self.assertIn("NCCL_WRAP_GATE_COORDINATOR", proc.stdout)

    def test_each_rule_reports_its_fault(self):
        good = the_jobset(kit.render("launchers/jobset"))

        def broken(edit):
            js = copy.deepcopy(good)
            edit(js["spec"])
            return jobset.check_coordinator(js["metadata"]["name"], js["spec"], "trainer")

        def trainer(spec):
            return spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]

        self.assertTrue(broken(lambda s: s.pop("coordinator")))
        self.assertTrue(broken(lambda s: s["coordinator"].update(replicatedJob="workers")))
        self.assertTrue(broken(lambda s: s["coordinator"].update(podIndex=4)))
        self.assertTrue(broken(lambda s: s["coordinator"].update(jobIndex=1)))
        self.assertTrue(broken(lambda s: s["network"].update(subdomain="x" * 60)))
        self.assertTrue(broken(lambda s: trainer(s)["env"].__setitem__(
            slice(None), [e for e in trainer(s)["env"] if e["name"] != "NCCL_WRAP_GATE_COORDINATOR"])))
        self.assertTrue(broken(lambda s: [e for e in trainer(s)["env"] if e["name"] == "PET_MASTER_ADDR"][0].update(
            valueFrom={"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}})))


class FailurePolicy(unittest.TestCase):
    def test_the_refusal_fails_the_jobset_and_other_failures_restart_it(self):
        for leaf in LEAVES:
            with self.subTest(leaf=leaf):
                spec = the_jobset(kit.render(leaf))["spec"]
                self.assertEqual(jobset.check_refusal_fails_without_restarts(spec, "trainer"), [])
                # Restarts run out like any others; 125 never spends one.
                self.assertEqual(jobset.outcome(spec, "trainer", 1, restarts=spec["failurePolicy"]["maxRestarts"]), "fails")
                self.assertEqual(jobset.outcome(spec, "trainer", 0), "continues")

    def test_the_job_controllers_message_is_what_the_rule_matches(self):
        spec = the_jobset(kit.render("launchers/jobset"))["spec"]
        job = spec["replicatedJobs"][0]["template"]["spec"]
        reason, message = jobset.job_failure(job, "training", "llm-train-node-0-2-x7k2p", "trainer", 125)
        self.assertEqual(reason, "PodFailurePolicy")
        self.assertEqual(message, "Container trainer for pod training/llm-train-node-0-2-x7k2p failed with exit code 125 "
                                  "matching FailJob rule at index 0")
        self.assertEqual(jobset.jobset_action(spec, "node", reason, message), ("FailJobSet", "NcclWrapRefused"))
        self.assertEqual(jobset.job_failure(job, "training", "p", "trainer", 1)[0], "BackoffLimitExceeded")

    def test_each_rule_reports_its_fault(self):
        good = the_jobset(kit.render("launchers/jobset"))["spec"]

        def broken(edit):
            spec = copy.deepcopy(good)
            edit(spec)
            return jobset.check_refusal_fails_without_restarts(spec, "trainer")

        def job(spec):
            return spec["replicatedJobs"][0]["template"]["spec"]

        # No podFailurePolicy: 125 fails the Job by its backoff limit, and JobSet restarts it.
        self.assertTrue(broken(lambda s: job(s).pop("podFailurePolicy")))
        # The rule on another container's exit code.
        self.assertTrue(broken(lambda s: job(s)["podFailurePolicy"]["rules"][0]["onExitCodes"].update(containerName="pytorch")))
        # The JobSet rule's pattern misses the Job controller's message.
        self.assertTrue(broken(lambda s: s["failurePolicy"]["rules"][0].update(onJobFailureMessagePatterns=["exit status 125"])))
        # A catch-all restart rule ahead of it.
        self.assertTrue(broken(lambda s: s["failurePolicy"]["rules"].insert(0, {"action": "RestartJobSet"})))
        # No restarts at all: nothing tells 125 apart.
        self.assertTrue(broken(lambda s: s["failurePolicy"].update(maxRestarts=0)))


class InPlaceRestart(unittest.TestCase):
    LEAF = "launchers/jobset-inplace"

    def test_the_agent_starts_nccl_wrap_and_a_refusal_is_not_restarted_in_place(self):
        objects = kit.render(self.LEAF)
        spec = the_jobset(objects)["spec"]
        self.assertEqual(spec["failurePolicy"]["restartStrategy"], "InPlaceRestart")
        self.assertEqual(jobset.check_in_place_agent(objects, "trainer"), [])
        self.assertEqual(jobset.check_refusal_fails_without_restarts(spec, "trainer"), [])
        self.assertEqual(jobset.check_coordinator(the_jobset(objects)["metadata"]["name"], spec, "trainer"), [])
        self.assertEqual(jobset.outcome(spec, "trainer", 1), "restarts in place")
        self.assertEqual(jobset.outcome(spec, "trainer", 125), "fails")

    def test_each_rule_reports_its_fault(self):
        good = kit.render(self.LEAF)

        def broken(edit):
            objects = copy.deepcopy(good)
            edit(objects)
            spec = the_jobset(objects)["spec"]
            return jobset.check_in_place_agent(objects, "trainer") + \
                jobset.check_refusal_fails_without_restarts(spec, "trainer")

        def trainer(objects):
            return the_jobset(objects)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]

        def worker(objects, value):
            [e for e in trainer(objects)["env"] if e["name"] == "WORKER_COMMAND"][0]["value"] = value

        # Every non-zero exit restarted in place: 125 would restart for ever.
        self.assertTrue(broken(lambda o: trainer(o)["restartPolicyRules"][0]["exitCodes"].update(values=[0])))
        # nccl-wrap not in front of the worker, not exec'd, or not supervising (it is not PID 1).
        self.assertTrue(broken(lambda o: worker(o, "torchrun /workspace/train.py")))
        self.assertTrue(broken(lambda o: worker(o, "/opt/nccl-wrap/nccl-wrap --supervise -- torchrun x.py")))
        self.assertTrue(broken(lambda o: worker(o, "exec /opt/nccl-wrap/nccl-wrap -- torchrun --supervise x.py")))
        # The agent not the entrypoint; its pod name not from the downward API.
        self.assertTrue(broken(lambda o: trainer(o).update(command=["/opt/nccl-wrap/nccl-wrap", "--"])))
        self.assertTrue(broken(lambda o: trainer(o)["env"].__setitem__(
            slice(None), [e for e in trainer(o)["env"] if e["name"] != "POD_NAME"])))
        # Its service account cannot patch its pod.
        self.assertTrue(broken(lambda o: [x for x in o if x["kind"] == "RoleBinding"][0]["subjects"][0].update(name="default")))


if __name__ == "__main__":
    unittest.main()
