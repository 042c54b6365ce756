"""Policy over the rendered kit: every training container of every workload overlay goes through
nccl-wrap, adds IPC_LOCK, holds an RDMA resource, gets nccl-wrap from the install init container,
and so on (policy.py). Each rule is also run on a deliberately broken copy and must report it, so
none of these tests can pass by finding nothing to look at.
"""

import copy
import unittest

import kit
import policy

NETWORKS = ["openshift-sriov", "network-operator"]
WORKLOADS = ["pytorchjob", "jobset", "preflight"]
# Pod templates that ask for GPUs in each workload overlay: the launcher's (Master and Worker for
# the PyTorchJob) or the preflight Job's, and the base PodTemplate that every overlay includes.
EXPECTED_TRAINING_PODS = {"pytorchjob": 3, "jobset": 2, "preflight": 2}


def leaf(network, workload):
    return f"overlays/{network}/{workload}"


def base_template(objects):
    return [o for o in objects if o["kind"] == "PodTemplate" and o["metadata"]["name"] == "nccl-wrap-trainer"][0]["template"]


class Kit(unittest.TestCase):
    def test_every_workload_overlay_keeps_every_rule(self):
        for network in NETWORKS:
            cluster = kit.render(f"overlays/{network}")
            for workload in WORKLOADS:
                with self.subTest(network=network, workload=workload):
                    objects = kit.render(leaf(network, workload))
                    pods = policy.training_pods(objects)
                    self.assertEqual(len(pods), EXPECTED_TRAINING_PODS[workload], [p[0] for p in pods])
                    bad = []
                    for rule in policy.TRAINING_RULES:
                        bad += rule(objects)
                    bad += policy.check_same_pattern_as_base(objects, base_template(objects))
                    bad += policy.check_overlay_consistency(cluster, objects)
                    bad += policy.check_preflight_job(objects)
                    bad += policy.check_gate(objects)
                    self.assertEqual(bad, [], "\n".join(bad))

    def test_launchers_without_an_overlay_hold_no_rdma_resource(self):
        # What the launchers' kustomization.yaml says: alone they would start without RDMA, and
        # nccl-wrap (NCCL_WRAP_REQUIRE_RDMA=1) would refuse with 125. The policy sees it.
        for workload in ("launchers/pytorchjob", "launchers/jobset", "preflight"):
            with self.subTest(workload=workload):
                self.assertTrue(policy.check_rdma_resource(kit.render(workload)))

    def test_every_network_overlay_has_every_workload(self):
        for network in NETWORKS:
            for workload in WORKLOADS:
                self.assertIn(leaf(network, workload), kit.kustomization_dirs())


class BrokenCopies(unittest.TestCase):
    """Each rule, on a copy of a good rendering with exactly the fault the rule is for."""

    def objects(self, network="openshift-sriov", workload="pytorchjob"):
        return copy.deepcopy(kit.render(leaf(network, workload)))

    def trainer(self, objects, kind="PyTorchJob"):
        obj = [o for o in objects if o["kind"] == kind][0]
        return kit.pod_templates(obj)[-1][1]

    def assertReports(self, rule, objects, *words):
        bad = rule(objects)
        self.assertTrue(bad, f"{rule.__name__} found nothing wrong")
        for w in words:
            self.assertTrue(any(w in b for b in bad), f"{rule.__name__}: {w!r} not in {bad}")

    def test_command_not_through_nccl_wrap(self):
        objects = self.objects()
        c = self.trainer(objects)["spec"]["containers"][0]
        c["command"] = ["torchrun"]
        self.assertReports(policy.check_command, objects, "does not start with")

    def test_command_with_nothing_after_the_separator(self):
        objects = self.objects(workload="jobset")
        c = self.trainer(objects, "JobSet")["spec"]["containers"][0]
        del c["args"]
        self.assertReports(policy.check_command, objects, "nothing to run")

    def test_preflight_running_something_else(self):
        objects = self.objects(workload="preflight")
        c = self.trainer(objects, "Job")["spec"]["containers"][0]
        c["command"] = ["/bin/sh", "-c", "sleep 1"]
        self.assertReports(policy.check_command, objects, "preflight command")

    def test_missing_ipc_lock(self):
        objects = self.objects(network="network-operator")
        self.trainer(objects)["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = ["NET_ADMIN"]
        self.assertReports(policy.check_ipc_lock, objects, "IPC_LOCK")

    def test_missing_rdma_resource(self):
        objects = self.objects()
        limits = self.trainer(objects)["spec"]["containers"][0]["resources"]["limits"]
        for k in [k for k in limits if k.startswith("openshift.io/")]:
            del limits[k]
        self.assertReports(policy.check_rdma_resource, objects, "no RDMA device-plugin resource")

    def test_gpu_is_not_an_rdma_resource(self):
        # nvidia.com/gpu shares the Network Operator's prefix; it must not count as RDMA.
        objects = self.objects(network="network-operator", workload="jobset")
        limits = self.trainer(objects, "JobSet")["spec"]["containers"][0]["resources"]["limits"]
        for k in [k for k in limits if k != "nvidia.com/gpu"]:
            del limits[k]
        self.assertReports(policy.check_rdma_resource, objects, "no RDMA")

    def test_missing_init_container(self):
        objects = self.objects()
        del self.trainer(objects)["spec"]["initContainers"]
        self.assertReports(policy.check_init_container, objects, "no init container")

    def test_init_container_not_installing(self):
        objects = self.objects(workload="preflight")
        self.trainer(objects, "Job")["spec"]["initContainers"][0]["command"] = ["/nccl-wrap", "--version"]
        self.assertReports(policy.check_init_container, objects, "no init container")

    def test_trainer_not_mounting_the_install_volume(self):
        objects = self.objects(workload="jobset")
        c = self.trainer(objects, "JobSet")["spec"]["containers"][0]
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["mountPath"] != policy.INSTALL_DIR]
        self.assertReports(policy.check_init_container, objects, "does not mount the install volume")

    def test_install_volume_not_an_emptydir(self):
        objects = self.objects()
        template = self.trainer(objects)
        v = policy.volume(template, "nccl-wrap")
        del v["emptyDir"]
        v["hostPath"] = {"path": "/opt/nccl-wrap"}
        self.assertReports(policy.check_init_container, objects, "not an emptyDir")

    def test_missing_require_rdma(self):
        objects = self.objects()
        c = self.trainer(objects)["spec"]["containers"][0]
        c["env"] = [e for e in c["env"] if e["name"] != "NCCL_WRAP_REQUIRE_RDMA"]
        self.assertReports(policy.check_require_rdma_and_podnetinfo, objects, "NCCL_WRAP_REQUIRE_RDMA")

    def test_launcher_without_the_gate(self):
        for workload, kind in (("pytorchjob", "PyTorchJob"), ("jobset", "JobSet")):
            with self.subTest(workload=workload):
                objects = self.objects(workload=workload)
                self.assertEqual(policy.check_gate(objects), [])
                c = self.trainer(objects, kind)["spec"]["containers"][0]
                c["env"] = [e for e in c["env"] if e["name"] != "NCCL_WRAP_GATE"]
                self.assertReports(policy.check_gate, objects, "NCCL_WRAP_GATE")
                objects = self.objects(workload=workload)
                self.trainer(objects, kind)["spec"]["containers"][0]["ports"] = []
                self.assertReports(policy.check_gate, objects, "18516/TCP")

    def test_missing_podnetinfo(self):
        objects = self.objects(network="network-operator")
        template = self.trainer(objects)
        policy.volume(template, "podnetinfo")["downwardAPI"]["items"][0]["fieldRef"]["fieldPath"] = "metadata.labels"
        self.assertReports(policy.check_require_rdma_and_podnetinfo, objects, "downward-API")

    def test_networks_and_devices_disagree(self):
        objects = self.objects()
        annotations = self.trainer(objects)["metadata"]["annotations"]
        annotations[policy.NETWORKS_ANNOTATION] = "rdma-rail1,rdma-rail2,rdma-rail3"
        self.assertReports(policy.check_networks_match_resources, objects, "3 network(s)", "4 RDMA device(s)")

    def test_pattern_drift_from_base(self):
        objects = self.objects(workload="jobset")
        c = self.trainer(objects, "JobSet")["spec"]["containers"][0]
        c["securityContext"]["privileged"] = True
        self.assertReports(lambda o: policy.check_same_pattern_as_base(o, base_template(o)), objects, "securityContext")

    def test_resource_the_overlay_does_not_provide(self):
        cluster = kit.render("overlays/openshift-sriov")
        objects = self.objects()
        limits = self.trainer(objects)["spec"]["containers"][0]["resources"]["limits"]
        limits["openshift.io/rdma_rail5"] = limits.pop("openshift.io/rdma_rail4")
        self.assertReports(lambda o: policy.check_overlay_consistency(cluster, o), objects, "openshift.io/rdma_rail5")

    def test_network_the_overlay_does_not_define(self):
        cluster = kit.render("overlays/network-operator")
        objects = self.objects(network="network-operator")
        self.trainer(objects)["metadata"]["annotations"][policy.NETWORKS_ANNOTATION] = \
            "rdma-rail1,rdma-rail2,rdma-rail3,rail4"
        self.assertReports(lambda o: policy.check_overlay_consistency(cluster, o), objects, "network rail4")

    def test_network_whose_pool_is_missing(self):
        cluster = copy.deepcopy(kit.render("overlays/network-operator"))
        cluster = [o for o in cluster if not (o["kind"] == "IPPool" and o["metadata"]["name"] == "rail2")]
        objects = self.objects(network="network-operator", workload="preflight")
        self.assertReports(lambda o: policy.check_overlay_consistency(cluster, o), objects, "network rdma-rail2")

    def test_workload_in_another_namespace(self):
        cluster = kit.render("overlays/openshift-sriov")
        objects = self.objects()
        for o in objects:
            o["metadata"]["namespace"] = "default"
        self.assertReports(lambda o: policy.check_overlay_consistency(cluster, o), objects, "namespace default")

    def test_preflight_ring_size_differs(self):
        objects = self.objects(workload="preflight")
        [o for o in objects if o["kind"] == "Job"][0]["spec"]["completions"] = 8
        self.assertReports(policy.check_preflight_job, objects, "differ")

    def test_preflight_service_selects_nothing(self):
        objects = self.objects(workload="preflight")
        [o for o in objects if o["kind"] == "Service"][0]["spec"]["selector"] = {"app": "other"}
        self.assertReports(policy.check_preflight_job, objects, "does not select")

    def test_preflight_without_anti_affinity(self):
        objects = self.objects(network="network-operator", workload="preflight")
        del [o for o in objects if o["kind"] == "Job"][0]["spec"]["template"]["spec"]["affinity"]
        self.assertReports(policy.check_preflight_job, objects, "anti-affinity")


if __name__ == "__main__":
    unittest.main()
