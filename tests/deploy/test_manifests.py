"""Every kustomization under deploy/ renders, and every object it renders is valid: core objects
against the Kubernetes OpenAPI schemas of each version in kit.KUBERNETES_VERSIONS (strict: unknown
fields are errors), custom resources against their vendored CRD, and the pod templates inside
custom resources against the core schemas too. One test per kustomization, named for it.
"""

import copy
import os
import unittest

import yaml

import kit


class Schemas(unittest.TestCase):
    """The validators themselves: each catches what it is there to catch."""

    def test_every_kind_the_kit_uses_has_a_schema(self):
        kinds = set()
        for path in kit.kustomization_dirs():
            for obj in kit.render(path):
                kinds.add((obj["apiVersion"], obj["kind"]))
        for api_version, kind in sorted(kinds):
            obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}}
            if kit.is_custom(obj):
                continue
            errors = [e for e in kit.validate_core(obj, kit.versions_for(obj)[-1]) if "find schema" in e]
            self.assertEqual(errors, [], f"{api_version} {kind}: neither core nor a vendored CRD")

    def test_core_unknown_field_is_caught(self):
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}, "automountToken": False}
        self.assertTrue(kit.validate_core(sa, "1.30"))

    def test_core_wrong_type_is_caught(self):
        job = [o for o in kit.render("preflight") if o["kind"] == "Job"][0]
        job = copy.deepcopy(job)
        job["spec"]["completions"] = "four"
        self.assertTrue(kit.validate_core(job, "1.28"))

    def test_crd_unknown_field_is_caught(self):
        policy = [o for o in kit.render("overlays/openshift-sriov") if o["kind"] == "SriovNetworkNodePolicy"][0]
        policy = copy.deepcopy(policy)
        policy["spec"]["isRDMA"] = True  # a typo of isRdma: the API server would reject it
        self.assertTrue(any("isRDMA" in e for e in kit.validate_custom(policy)))

    def test_crd_enum_and_required_are_caught(self):
        policy = [o for o in kit.render("overlays/openshift-sriov") if o["kind"] == "SriovNetworkNodePolicy"][0]
        policy = copy.deepcopy(policy)
        policy["spec"]["deviceType"] = "rdma"
        del policy["spec"]["numVfs"]
        errors = " ".join(kit.validate_custom(policy))
        self.assertIn("deviceType", errors)
        self.assertIn("numVfs", errors)

    def test_pod_template_inside_a_custom_resource_is_checked_as_core(self):
        job = copy.deepcopy([o for o in kit.render("launchers/pytorchjob") if o["kind"] == "PyTorchJob"][0])
        template = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
        template["spec"]["containers"][0]["securityContext"]["capabilites"] = {"add": ["IPC_LOCK"]}
        self.assertTrue(kit.validate_pod_template(template, "1.31", "Worker"))

    def test_macvlan_network_fields_are_checked(self):
        # resourceName belongs to HostDeviceNetwork; a MacvlanNetwork has none (the pods request
        # the shared resource themselves), and the API server would reject it.
        net = [o for o in kit.render("overlays/network-operator-shared") if o["kind"] == "MacvlanNetwork"][0]
        net = copy.deepcopy(net)
        net["spec"]["resourceName"] = "rdma_shared_rail1"
        net["spec"]["mode"] = "l2"
        errors = " ".join(kit.validate_custom(net))
        self.assertIn("resourceName", errors)
        self.assertIn("mode", errors)

    def test_ipoib_network_fields_are_checked(self):
        net = [o for o in kit.render("overlays/network-operator-shared-ib") if o["kind"] == "IPoIBNetwork"][0]
        net = copy.deepcopy(net)
        net["spec"]["pkey"] = "0x8001"  # no such field: the child takes its master's partition
        self.assertTrue(any("pkey" in e for e in kit.validate_custom(net)))

    def test_every_vendored_crd_has_its_source_row(self):
        # deploy/schemas/README.md names each file's kind, source repository, path, release and
        # commit; a file without its row (or a row for a missing file, or the wrong kind) fails.
        with open(os.path.join(kit.SCHEMAS, "README.md")) as f:
            rows = [line.split("|")[1:-1] for line in f if line.startswith("| `")]
        table = {r[0].strip().strip("`"): [c.strip() for c in r[1:]] for r in rows}
        files = sorted(n for n in os.listdir(kit.SCHEMAS) if n.endswith(".yaml"))
        self.assertEqual(sorted(table), files)
        for name in files:
            with open(os.path.join(kit.SCHEMAS, name)) as f:
                crd = [d for d in yaml.safe_load_all(f) if d and d.get("kind") == "CustomResourceDefinition"][0]
            spec = crd["spec"]
            kind, repo, path, release, commit = table[name][:5]
            versions = [v["name"] for v in spec["versions"] if v.get("served", True)]
            self.assertTrue(any(kind == f"{spec['names']['kind']} ({spec['group']}/{v})" for v in versions),
                            f"{name}: row says {kind}")
            self.assertTrue(repo and path and release, name)
            self.assertRegex(commit, r"^[0-9a-f]{40}$", name)

    def test_later_kinds_are_validated_from_their_version_on(self):
        for api, since in (("admissionregistration.k8s.io/v1", "1.36"), ("admissionregistration.k8s.io/v1beta1", "1.34")):
            obj = {"apiVersion": api, "kind": "MutatingAdmissionPolicy", "metadata": {"name": "x"}, "spec": {"failurePolicy": "Fail"}}
            self.assertEqual(kit.versions_for(obj)[0], since)
            self.assertEqual(kit.validate_core(obj, kit.versions_for(obj)[-1]), [])
            obj["spec"]["failurPolicy"] = "Fail"
            self.assertTrue(kit.validate_core(obj, since), "a typo in a MutatingAdmissionPolicy is caught")
        self.assertEqual(kit.versions_for({"apiVersion": "v1", "kind": "ConfigMap"}), kit.KUBERNETES_VERSIONS)

    def test_cluster_scope_is_known(self):
        self.assertTrue(kit.is_cluster_scoped({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime"}))
        self.assertTrue(kit.is_cluster_scoped({"apiVersion": "security.openshift.io/v1", "kind": "SecurityContextConstraints"}))
        self.assertFalse(kit.is_cluster_scoped({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob"}))

    def test_unknown_custom_kind_is_an_error(self):
        obj = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "x"}}
        self.assertTrue(kit.validate_custom(obj))


class Rendered(unittest.TestCase):
    pass


def _make_test(path):
    def test(self):
        objects = kit.render(path)
        self.assertTrue(objects, f"{path} renders nothing")
        errors = []
        for obj in objects:
            if kit.is_custom(obj):
                errors += kit.validate_custom(obj)
                for where, template in kit.pod_templates(obj):
                    for version in kit.template_versions(template):
                        errors += kit.validate_pod_template(template, version, f"{kit.name_of(obj)} {where} on Kubernetes {version}")
            else:
                for version in kit.versions_for(obj):
                    errors += kit.validate_core(obj, version)
            if kit.is_cluster_scoped(obj) and (obj.get("metadata") or {}).get("namespace"):
                errors.append(f"{kit.name_of(obj)}: cluster-scoped, but rendered into namespace {obj['metadata']['namespace']}")
        self.assertEqual(errors, [], "\n".join(errors))
    test.__doc__ = f"deploy/{path} renders and validates"
    return test


for _path in kit.kustomization_dirs():
    setattr(Rendered, "test_" + _path.replace("/", "_").replace("-", "_"), _make_test(_path))


if __name__ == "__main__":
    unittest.main()
