"""Trust rules (trust.py) on every workload overlay and the ring agent, and each on a broken copy,
which it must report: a rule that finds nothing to look at cannot pass."""

import copy
import unittest

import kit
import trust
from test_policy import NETWORKS, WORKLOADS, leaf


class Kit(unittest.TestCase):
    def test_every_workload_keeps_the_trust_rules(self):
        for network in NETWORKS:
            for workload in WORKLOADS:
                with self.subTest(network=network, workload=workload):
                    objects = kit.render(leaf(network, workload))
                    bad = (trust.check_listeners_admit_only_the_job(objects) + trust.check_gate_secret(objects)
                           + trust.check_ping_allow(objects))
                    self.assertEqual(bad, [], "\n".join(bad))
                    kinds = [o["kind"] for o in objects]
                    self.assertIn("NetworkPolicy", kinds)
                    if workload != "preflight":
                        self.assertIn("Secret", kinds)

    def test_the_ring_agent_keeps_its_port_to_the_nodes(self):
        self.assertEqual(trust.check_ring_port(kit.render("node-health-ring")), [])


class BrokenCopies(unittest.TestCase):
    def objects(self, workload="pytorchjob", network="network-operator"):
        return copy.deepcopy(kit.render(leaf(network, workload)))

    def policy_of(self, objects):
        return [o for o in objects if o["kind"] == "NetworkPolicy"][0]

    def trainer(self, objects, kind="PyTorchJob"):
        return kit.pod_templates([o for o in objects if o["kind"] == kind][0])[-1][1]["spec"]["containers"][0]

    def assertReports(self, rule, objects, *words):
        bad = rule(objects)
        self.assertTrue(bad, f"{rule.__name__} found nothing wrong")
        for w in words:
            self.assertTrue(any(w in b for b in bad), f"{rule.__name__}: {w!r} not in {bad}")

    def test_no_policy(self):
        for workload in WORKLOADS:
            objects = [o for o in self.objects(workload) if o["kind"] != "NetworkPolicy"]
            self.assertReports(trust.check_listeners_admit_only_the_job, objects, "no NetworkPolicy")

    def test_a_rule_open_to_everyone(self):
        objects = self.objects()
        self.policy_of(objects)["spec"]["ingress"].append({"ports": [{"protocol": "TCP", "port": 18516}]})
        self.assertReports(trust.check_listeners_admit_only_the_job, objects, "admits every source")

    def test_a_port_range_over_the_gate_from_another_namespace(self):
        objects = self.objects("jobset")
        self.policy_of(objects)["spec"]["ingress"].append(
            {"from": [{"namespaceSelector": {}}], "ports": [{"protocol": "TCP", "port": 18000, "endPort": 19000}]})
        self.assertReports(trust.check_listeners_admit_only_the_job, objects, "namespaceSelector")

    def test_pods_of_another_job(self):
        objects = self.objects("preflight")
        self.policy_of(objects)["spec"]["ingress"][0]["from"] = [{"podSelector": {"matchLabels": {"app": "other"}}}]
        self.assertReports(trust.check_listeners_admit_only_the_job, objects, "not this job's")

    def test_every_pod_of_the_namespace(self):
        objects = self.objects()
        self.policy_of(objects)["spec"]["ingress"][0]["from"] = [{"podSelector": {}}]
        self.assertReports(trust.check_listeners_admit_only_the_job, objects, "not this job's")

    def test_gate_without_its_secret(self):
        for workload, kind in (("pytorchjob", "PyTorchJob"), ("jobset", "JobSet")):
            objects = self.objects(workload)
            c = self.trainer(objects, kind)
            c["env"] = [e for e in c["env"] if e["name"] != trust.GATE_SECRET_FILE]
            self.assertReports(trust.check_gate_secret, objects, trust.GATE_SECRET_FILE)

    def test_gate_secret_not_rendered_or_shared(self):
        objects = [o for o in self.objects() if o["kind"] != "Secret"]
        self.assertReports(trust.check_gate_secret, objects, "not rendered")
        objects = self.objects()
        secret = [o for o in objects if o["kind"] == "Secret"][0]
        secret["metadata"]["name"] = "shared-gate"
        for o in objects:
            for _, t in kit.pod_templates(o):
                for v in t["spec"].get("volumes") or []:
                    if "secret" in v:
                        v["secret"]["secretName"] = "shared-gate"
        self.assertReports(trust.check_gate_secret, objects, "not named for the job")

    def test_gate_secret_mounted_writable(self):
        objects = self.objects()
        for m in self.trainer(objects)["volumeMounts"]:
            m.pop("readOnly", None)
        self.assertReports(trust.check_gate_secret, objects, "writable")

    def test_ping_allow_missing_or_everything(self):
        for value in (None, "0.0.0.0/0", "the pod network"):
            objects = self.objects("preflight")
            job = [o for o in objects if o["kind"] == "Job"][0]
            c = job["spec"]["template"]["spec"]["containers"][0]
            c["env"] = [e for e in c["env"] if e["name"] != trust.PING_ALLOW]
            if value:
                c["env"].append({"name": trust.PING_ALLOW, "value": value})
            self.assertReports(trust.check_ping_allow, objects, trust.PING_ALLOW)

    def test_ring_port_open_to_pods_everyone_or_nobody(self):
        for peer in ({"podSelector": {}}, {"ipBlock": {"cidr": "0.0.0.0/0"}}, None):
            objects = copy.deepcopy(kit.render("node-health-ring"))
            pol = [o for o in objects if o["kind"] == "NetworkPolicy"][0]
            if peer is None:
                objects.remove(pol)
            else:
                pol["spec"]["ingress"][0]["from"] = [peer]
            self.assertTrue(trust.check_ring_port(objects), peer)


if __name__ == "__main__":
    unittest.main()
