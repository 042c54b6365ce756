"""Every kustomization under deploy/ renders, and every object it renders is valid: core objects
against the Kubernetes OpenAPI schemas of each version in kit.KUBERNETES_VERSIONS (strict: unknown
fields are errors), custom resources against their vendored CRD, and the pod templates inside
custom resources against the core schemas too. One test per kustomization, named for it.
"""

import copy
import unittest

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
            errors = [e for e in kit.validate_core(obj, kit.KUBERNETES_VERSIONS[-1]) if "find schema" in e]
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
                for version in kit.KUBERNETES_VERSIONS:
                    for where, template in kit.pod_templates(obj):
                        errors += kit.validate_pod_template(template, version, f"{kit.name_of(obj)} {where} on Kubernetes {version}")
            else:
                for version in kit.KUBERNETES_VERSIONS:
                    errors += kit.validate_core(obj, version)
        self.assertEqual(errors, [], "\n".join(errors))
    test.__doc__ = f"deploy/{path} renders and validates"
    return test


for _path in kit.kustomization_dirs():
    setattr(Rendered, "test_" + _path.replace("/", "_").replace("-", "_"), _make_test(_path))


if __name__ == "__main__":
    unittest.main()
