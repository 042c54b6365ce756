"""Policy over the rendered kit: every training container of every workload overlay goes through
nccl-wrap, adds IPC_LOCK, holds an RDMA resource, gets nccl-wrap from the install init container,
and so on (policy.py). Each rule is also run on a deliberately broken copy and must report it, so
none of these tests can pass by finding nothing to look at.
"""

import copy
import json
import unittest

import kit
import policy

NETWORKS = ["openshift-sriov", "network-operator", "network-operator-shared", "network-operator-shared-ib"]
# The RDMA shared device plugin variants and the kind of network each gives its pods: macvlan
# children of the PFs (RoCE) or IPoIB children (InfiniBand).
SHARED = {"network-operator-shared": "MacvlanNetwork", "network-operator-shared-ib": "IPoIBNetwork"}
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
                    bad += policy.check_networks_pair_with_resources(cluster, objects)
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

    def test_nccl_wrap_not_on_path(self):
        for workload, kind in (("pytorchjob", "PyTorchJob"), ("jobset", "JobSet"), ("preflight", "Job")):
            with self.subTest(workload=workload):
                objects = self.objects(workload=workload)
                self.assertEqual(policy.check_nccl_wrap_on_path(objects), [])
                c = self.trainer(objects, kind)["spec"]["containers"][0]
                c["volumeMounts"] = [m for m in c["volumeMounts"] if m["mountPath"] != "/usr/local/bin/nccl-wrap"]
                self.assertReports(policy.check_nccl_wrap_on_path, objects, "not on PATH")
        # A directory that is not on a standard PATH, or the whole volume instead of the file.
        for mount in ({"name": "nccl-wrap", "mountPath": "/opt/tools/nccl-wrap", "subPath": "nccl-wrap"},
                      {"name": "nccl-wrap", "mountPath": "/usr/local/bin/nccl-wrap"}):
            objects = self.objects()
            c = self.trainer(objects)["spec"]["containers"][0]
            c["volumeMounts"] = [m for m in c["volumeMounts"] if m["mountPath"] != "/usr/local/bin/nccl-wrap"] + [mount]
            self.assertReports(policy.check_nccl_wrap_on_path, objects, "not on PATH")

    def test_supervision_without_stall_detection_or_with_a_lost_report(self):
        for workload, kind in (("pytorchjob", "PyTorchJob"), ("jobset", "JobSet")):
            with self.subTest(workload=workload):
                objects = self.objects(workload=workload)
                self.assertEqual(policy.check_supervision(objects), [])
                c = self.trainer(objects, kind)["spec"]["containers"][0]
                c["env"] = [e for e in c["env"] if e["name"] != "NCCL_WRAP_STALL_MS"]
                self.assertReports(policy.check_supervision, objects, "NCCL_WRAP_STALL_MS")
                objects = self.objects(workload=workload)
                c = self.trainer(objects, kind)["spec"]["containers"][0]
                c["env"].append({"name": "NCCL_WRAP_REPORT", "value": "/dev/shm/postmortem.json"})
                self.assertReports(policy.check_supervision, objects, "PersistentVolumeClaim")
        # A report on a claim's mount is what the rule asks for.
        objects = self.objects()
        template = self.trainer(objects)
        c = template["spec"]["containers"][0]
        c["env"].append({"name": "NCCL_WRAP_REPORT", "value": "/checkpoints/nccl-wrap/report.json"})
        c["volumeMounts"].append({"name": "checkpoints", "mountPath": "/checkpoints"})
        template["spec"]["volumes"].append({"name": "checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}})
        self.assertEqual([b for b in policy.check_supervision(objects) if "Master" in b], [])

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


class SharedDevices(unittest.TestCase):
    """The RDMA shared device plugin variants (RoCE over macvlan, InfiniBand over IPoIB): what makes
    them shared-device kits, and the names that must agree between the NicClusterPolicy, the
    networks and the pods, each also shown failing on a broken copy."""

    def cluster(self, network="network-operator-shared"):
        return copy.deepcopy(kit.render(f"overlays/{network}"))

    def workloads(self, network="network-operator-shared", workload="pytorchjob"):
        return copy.deepcopy(kit.render(leaf(network, workload)))

    def ncp(self, cluster):
        return [o for o in cluster if o["kind"] == "NicClusterPolicy"][0]

    def config(self, cluster):
        return json.loads(self.ncp(cluster)["spec"]["rdmaSharedDevicePlugin"]["config"])

    def set_config(self, cluster, config):
        self.ncp(cluster)["spec"]["rdmaSharedDevicePlugin"]["config"] = json.dumps(config)

    def trainer(self, objects, kind="PyTorchJob"):
        obj = [o for o in objects if o["kind"] == kind][0]
        return kit.pod_templates(obj)[-1][1]

    def assertReports(self, bad, *words):
        self.assertTrue(bad, "found nothing wrong")
        for w in words:
            self.assertTrue(any(w in b for b in bad), f"{w!r} not in {bad}")

    def test_each_variant_is_a_shared_device_kit(self):
        for network, kind in SHARED.items():
            cluster = kit.render(f"overlays/{network}")
            kinds = {o["kind"] for o in cluster}
            self.assertIn(kind, kinds)
            self.assertFalse(kinds & ({"MacvlanNetwork", "IPoIBNetwork"} - {kind}), kinds)
            self.assertEqual(len([o for o in cluster if o["kind"] == kind]), 4)
            for workload in WORKLOADS:
                with self.subTest(network=network, workload=workload):
                    objects = kit.render(leaf(network, workload))
                    bad = policy.check_shared_devices(cluster, objects)
                    self.assertEqual(bad, [], "\n".join(bad))

    def test_trainer_and_preflight_request_the_shared_resources_the_policy_advertises(self):
        for network in SHARED:
            cluster = kit.render(f"overlays/{network}")
            advertised = {f"rdma/{r['resourceName']}" for r in self.config(copy.deepcopy(cluster))["configList"]}
            self.assertEqual(advertised, {f"rdma/rdma_shared_rail{i}" for i in range(1, 5)})
            networks = {o["metadata"]["name"] for o in cluster if o["kind"] == SHARED[network]}
            for workload in WORKLOADS:
                with self.subTest(network=network, workload=workload):
                    pods = policy.training_pods(kit.render(leaf(network, workload)))
                    self.assertEqual(len(pods), EXPECTED_TRAINING_PODS[workload])
                    self.assertEqual(sum(policy.is_preflight(t) for _, t, _ in pods), int(workload == "preflight"))
                    for label, template, trainers in pods:
                        held = {r for c in trainers for r in policy.rdma_resources(c)}
                        self.assertEqual(held, advertised, label)
                        self.assertEqual(sorted(policy.pod_networks(template)), sorted(networks), label)
                        for c in trainers:
                            # The preflight's script runs nccl-wrap doctor and ping; every other
                            # training container runs its command through `nccl-wrap --`.
                            want = policy.PREFLIGHT_COMMAND if policy.is_preflight(template) else [policy.NCCL_WRAP, "--"]
                            self.assertEqual(c["command"][:len(want)], want, label)

    def test_the_sriov_kits_are_not_shared_device_kits(self):
        # The check is not vacuous: on the SR-IOV and host-device overlays it reports what they are.
        bad = policy.check_shared_devices(kit.render("overlays/network-operator"),
                                          kit.render(leaf("network-operator", "pytorchjob")))
        self.assertReports(bad, "sriovDevicePlugin", "no rdmaSharedDevicePlugin", "HostDeviceNetwork/rdma-rail1",
                           "requests nvidia.com/rdma_rail1")
        bad = policy.check_shared_devices(kit.render("overlays/openshift-sriov"),
                                          kit.render(leaf("openshift-sriov", "preflight")))
        self.assertReports(bad, "0 NicClusterPolicy")

    def test_sriov_device_plugin_in_the_policy(self):
        cluster = self.cluster()
        sriov = [o for o in kit.render("overlays/network-operator") if o["kind"] == "NicClusterPolicy"][0]
        self.ncp(cluster)["spec"]["sriovDevicePlugin"] = copy.deepcopy(sriov["spec"]["sriovDevicePlugin"])
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "deploys sriovDevicePlugin")

    def test_no_shared_device_plugin(self):
        cluster = self.cluster("network-operator-shared-ib")
        del self.ncp(cluster)["spec"]["rdmaSharedDevicePlugin"]
        objects = self.workloads("network-operator-shared-ib", "preflight")
        self.assertReports(policy.check_shared_devices(cluster, objects), "no rdmaSharedDevicePlugin")
        # and the pods now request resources nothing advertises, on networks tied to nothing
        self.assertReports(policy.check_overlay_consistency(cluster, objects),
                           "requests rdma/rdma_shared_rail1", "network rdma-shared-rail1")

    def test_pod_requesting_an_sriov_resource(self):
        objects = self.workloads(workload="jobset")
        limits = self.trainer(objects, "JobSet")["spec"]["containers"][0]["resources"]["limits"]
        limits["nvidia.com/rdma_rail1"] = limits.pop("rdma/rdma_shared_rail1")
        cluster = self.cluster()
        self.assertReports(policy.check_shared_devices(cluster, objects), "requests nvidia.com/rdma_rail1, not a shared")
        self.assertReports(policy.check_overlay_consistency(cluster, objects), "requests nvidia.com/rdma_rail1")
        self.assertReports(policy.check_networks_pair_with_resources(cluster, objects),
                           "1 network(s) on rdma/rdma_shared_rail1 but holds 0", "holds nvidia.com/rdma_rail1")

    def test_pod_requesting_two_units(self):
        objects = self.workloads()
        self.trainer(objects)["spec"]["containers"][0]["resources"]["limits"]["rdma/rdma_shared_rail2"] = 2
        self.assertReports(policy.check_shared_devices(self.cluster(), objects), "requests 2 of rdma/rdma_shared_rail2")

    def test_network_without_its_resource(self):
        # Rail 3's network attached, rail 3's HCA not held (rail 2's held twice instead): the pod's
        # net3 would sit on a device whose uverbs it cannot open.
        objects = self.workloads(workload="preflight")
        limits = self.trainer(objects, "Job")["spec"]["containers"][0]["resources"]["limits"]
        del limits["rdma/rdma_shared_rail3"]
        limits["rdma/rdma_shared_rail2"] = 2
        self.assertEqual(policy.check_networks_match_resources(objects), [])  # the counts still agree
        self.assertReports(policy.check_networks_pair_with_resources(self.cluster(), objects),
                           "on rdma/rdma_shared_rail3 but holds 0")

    def test_resource_without_its_network(self):
        objects = self.workloads()
        template = self.trainer(objects)
        template["metadata"]["annotations"][policy.NETWORKS_ANNOTATION] = \
            "rdma-shared-rail1,rdma-shared-rail2,rdma-shared-rail3,rdma-shared-rail3"
        self.assertReports(policy.check_networks_pair_with_resources(self.cluster(), objects),
                           "2 network(s) on rdma/rdma_shared_rail3 but holds 1", "holds rdma/rdma_shared_rail4")

    def test_network_master_not_the_resources_device(self):
        # The macvlan sits on a PF that no shared resource selects: pods would hold rail 2's HCA
        # while their net2 sits on another.
        cluster = self.cluster()
        [n for n in cluster if n["metadata"]["name"] == "rdma-shared-rail2"][0]["spec"]["master"] = "enp61s0np0"
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "master 'enp61s0np0'")
        self.assertReports(policy.check_overlay_consistency(cluster, self.workloads()), "network rdma-shared-rail2")

    def test_pairing_follows_the_master_not_the_name(self):
        # Rails 1 and 4 swap devices: rdma-shared-rail4 now sits on rail 1's port. A pod that
        # leaves out rail 1 (its network and resource) then attaches a network on rail 1's HCA
        # without holding it.
        cluster = self.cluster("network-operator-shared-ib")
        nets = {n["metadata"]["name"]: n["spec"] for n in cluster if n["kind"] == "IPoIBNetwork"}
        nets["rdma-shared-rail1"]["master"], nets["rdma-shared-rail4"]["master"] = \
            nets["rdma-shared-rail4"]["master"], nets["rdma-shared-rail1"]["master"]
        self.assertEqual(policy.network_resources(cluster)["rdma-shared-rail4"], "rdma/rdma_shared_rail1")
        objects = self.workloads("network-operator-shared-ib", "jobset")
        template = self.trainer(objects, "JobSet")
        del template["spec"]["containers"][0]["resources"]["limits"]["rdma/rdma_shared_rail1"]
        template["metadata"]["annotations"][policy.NETWORKS_ANNOTATION] = "rdma-shared-rail2,rdma-shared-rail3,rdma-shared-rail4"
        self.assertReports(policy.check_networks_pair_with_resources(cluster, objects),
                           "on rdma/rdma_shared_rail1 but holds 0", "holds rdma/rdma_shared_rail4")

    def test_resource_selecting_several_devices(self):
        cluster = self.cluster()
        config = self.config(cluster)
        config["configList"][0]["selectors"]["ifNames"].append("enp61s0np0")
        self.set_config(cluster, config)
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "selects 2 net devices")

    def test_two_resources_on_one_device(self):
        cluster = self.cluster()
        config = self.config(cluster)
        config["configList"][1]["selectors"]["ifNames"] = list(config["configList"][0]["selectors"]["ifNames"])
        self.set_config(cluster, config)
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "is also rdma_shared_rail1's device")

    def test_rdma_hca_max_beyond_the_pool(self):
        cluster = self.cluster()
        config = self.config(cluster)
        config["configList"][3]["rdmaHcaMax"] = 63
        self.set_config(cluster, config)
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()),
                           "rdma-shared-rail4: pool shared-rail4 gives a node 32 addresses for the 63 pods")

    def test_rdma_hca_max_missing(self):
        cluster = self.cluster("network-operator-shared-ib")
        config = self.config(cluster)
        del config["configList"][0]["rdmaHcaMax"]
        self.set_config(cluster, config)
        self.assertReports(policy.check_shared_devices(cluster, self.workloads("network-operator-shared-ib")),
                           "rdmaHcaMax None")

    def test_ipoib_without_its_cni(self):
        cluster = self.cluster("network-operator-shared-ib")
        del self.ncp(cluster)["spec"]["secondaryNetwork"]["ipoib"]
        self.assertReports(policy.check_shared_devices(cluster, self.workloads("network-operator-shared-ib")),
                           "no secondaryNetwork.ipoib")

    def test_macvlan_without_its_cni_or_multus(self):
        cluster = self.cluster()
        secondary = self.ncp(cluster)["spec"]["secondaryNetwork"]
        del secondary["cniPlugins"], secondary["multus"]
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()),
                           "no secondaryNetwork.cniPlugins", "no secondaryNetwork.multus")

    def test_macvlan_passthru(self):
        cluster = self.cluster()
        [n for n in cluster if n["kind"] == "MacvlanNetwork"][0]["spec"]["mode"] = "passthru"
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "passthru")

    def test_network_pool_missing(self):
        cluster = [o for o in self.cluster() if not (o["kind"] == "IPPool" and o["metadata"]["name"] == "shared-rail3")]
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "pool shared-rail3 is not defined")
        self.assertReports(policy.check_overlay_consistency(cluster, self.workloads()), "network rdma-shared-rail3")

    def test_nv_ipam_not_deployed(self):
        cluster = self.cluster()
        del self.ncp(cluster)["spec"]["nvIpam"]
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "uses nv-ipam")

    def test_network_without_ipam(self):
        cluster = self.cluster("network-operator-shared-ib")
        del [n for n in cluster if n["kind"] == "IPoIBNetwork"][2]["spec"]["ipam"]
        self.assertReports(policy.check_shared_devices(cluster, self.workloads("network-operator-shared-ib")), "no ipam")

    def test_no_rail_networks(self):
        cluster = [o for o in self.cluster() if o["kind"] != "MacvlanNetwork"]
        self.assertReports(policy.check_shared_devices(cluster, self.workloads()), "no MacvlanNetwork or IPoIBNetwork")

    def test_networks_rendered_into_another_namespace(self):
        cluster = self.cluster()
        for n in cluster:
            if n["kind"] == "MacvlanNetwork":
                n["spec"]["networkNamespace"] = "default"
        self.assertReports(policy.check_overlay_consistency(cluster, self.workloads()), "namespace training")
