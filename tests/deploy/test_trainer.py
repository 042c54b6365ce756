"""Kubeflow Trainer v2 through nccl-wrap: the kit's MutatingAdmissionPolicy (deploy/trainer/admission)
evaluated with cel-python on sample pods, and the kit's ClusterTrainingRuntime followed from a
TrainJob to the pod the kubelet starts (trainer.py says what Trainer and the API server do, after
their sources).

The mutation: a TrainJob pod whose command is `["bash", "-c", "torchrun ..."]` (or `["bash", "-c"]`
with the script in args, as the SDK may write it) gets `/opt/nccl-wrap/nccl-wrap --` in front of it,
args untouched; a command that already starts nccl-wrap is left alone (no double wrap, also when the
API server reinvokes the policy); a pod without the label, a label that names no container, a
container without a command, and an UPDATE are left alone; with a sidecar ahead of the trainer,
only the trainer changes. The same checks run on broken copies of the policy, and must fail.

The runtime: the TrainJob's command overwrites the runtime's (the bypass), the policy restores
nccl-wrap, and then every rule of the kit holds on the pod; the gate runs once, in the init container
that envInjection (KEP-3416) hands the PET_* variables, with the trainer's RDMA devices; nccl-wrap's
125 from either container fails the JobSet without a restart; the job's NetworkPolicy and gate
secret hold as for the other launchers.
"""

import copy
import os
import unittest

import yaml

import jobset
import kit
import policy
import trainer
import trust
from test_policy import NETWORKS

WRAP = "/opt/nccl-wrap/nccl-wrap"
LABEL = "nccl-wrap.dev/wrap-container"
ADMISSION = os.path.join(kit.DEPLOY, "trainer", "admission", "mutatingadmissionpolicy.yaml")
ADMISSION_BETA = os.path.join(kit.DEPLOY, "trainer", "admission-v1beta1", "mutatingadmissionpolicy.yaml")


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def the_policy(path=ADMISSION):
    return [d for d in load(path) if d["kind"] == "MutatingAdmissionPolicy"][0]


def sample_pod(command=None, args=None, label="node", sidecar=False, name="node"):
    trainer_c = {"name": name, "image": "training-image"}
    if command is not None:
        trainer_c["command"] = command
    if args is not None:
        trainer_c["args"] = args
    containers = ([{"name": "istio-proxy", "image": "proxy", "command": ["/usr/local/bin/pilot-agent"]}] if sidecar else []) \
        + [trainer_c]
    labels = {"jobset.sigs.k8s.io/jobset-name": "llm-train"}
    if label is not None:
        labels[LABEL] = label
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "llm-train-node-0-0-x7k2p", "namespace": "training", "labels": labels},
            "spec": {"containers": containers}}


def container(pod, name="node"):
    return [c for c in pod["spec"]["containers"] if c["name"] == name][0]


def mutation_problems(map_policy):
    """What is wrong with the policy's mutation on the sample pods (empty when it does what the kit
    needs)."""
    bad = []

    def run(pod, operation="CREATE"):
        try:
            return trainer.admit(map_policy, pod, operation)
        except Exception as e:  # an expression error: the API server would refuse the pod (failurePolicy Fail)
            bad.append(f"{e.__class__.__name__}: {e}")
            return pod

    script = "torchrun --nnodes 4 /workspace/train.py"
    # The TrainJob's command, the script inline.
    got = container(run(sample_pod(["bash", "-c", script])))
    if got.get("command") != [WRAP, "--", "bash", "-c", script] or "args" in got:
        bad.append(f"bash -c script: command {got.get('command')}, args {got.get('args')}")
    # The script in args.
    got = container(run(sample_pod(["bash", "-c"], [script])))
    if got.get("command") != [WRAP, "--", "bash", "-c"] or got.get("args") != [script]:
        bad.append(f"bash -c + args: command {got.get('command')}, args {got.get('args')}")
    # Already wrapped, by the runtime or by hand: unchanged.
    for cmd in ([WRAP, "--", "torchrun", "/workspace/train.py"], ["nccl-wrap", "--", "python", "x.py"],
                ["/usr/local/bin/nccl-wrap", "--gate", "--", "bash", "-c", script]):
        pod = sample_pod(cmd)
        if run(pod) != pod:
            bad.append(f"{cmd[0]}: an already wrapped command was changed: {container(run(pod)).get('command')}")
    # Reinvocation: the policy on its own output changes nothing.
    once = run(sample_pod(["bash", "-c", script]))
    if trainer.admit_once(map_policy, once)[1]:
        bad.append("a second invocation wraps again")
    # Not selected, or nothing to wrap: unchanged.
    for why, pod in (("no label", sample_pod(["bash", "-c", script], label=None)),
                     ("a label naming no container", sample_pod(["bash", "-c", script], label="trainer")),
                     ("no command (the image's ENTRYPOINT)", sample_pod(None, ["x.py"])),
                     ("an empty command", sample_pod([]))):
        if run(pod) != pod:
            bad.append(f"{why}: the pod was changed")
    pod = sample_pod(["bash", "-c", script])
    if run(pod, "UPDATE") != pod:
        bad.append("an UPDATE was changed (the command of a running pod is immutable)")
    # A sidecar ahead of the trainer: only the trainer changes.
    got = run(sample_pod(["bash", "-c", script], sidecar=True))
    if container(got, "istio-proxy")["command"] != ["/usr/local/bin/pilot-agent"]:
        bad.append("the sidecar's command was changed")
    if container(got)["command"][:2] != [WRAP, "--"]:
        bad.append(f"the trainer behind a sidecar: {container(got)['command']}")
    return bad


class AdmissionPolicy(unittest.TestCase):
    def test_the_mutation_does_what_the_kit_needs(self):
        self.assertEqual(mutation_problems(the_policy()), [])

    def test_the_v1beta1_policy_is_the_v1_policy(self):
        v1, beta = load(ADMISSION), load(ADMISSION_BETA)
        self.assertEqual([d["kind"] for d in v1], [d["kind"] for d in beta])
        for a, b in zip(v1, beta):
            self.assertEqual(a["apiVersion"], "admissionregistration.k8s.io/v1")
            self.assertEqual(b["apiVersion"], "admissionregistration.k8s.io/v1beta1")
            self.assertEqual({k: v for k, v in a.items() if k != "apiVersion"}, {k: v for k, v in b.items() if k != "apiVersion"})
        self.assertEqual(mutation_problems(the_policy(ADMISSION_BETA)), [])

    def test_the_binding_binds_the_policy_everywhere(self):
        for path in (ADMISSION, ADMISSION_BETA):
            docs = {d["kind"]: d for d in load(path)}
            binding = docs["MutatingAdmissionPolicyBinding"]["spec"]
            self.assertEqual(binding["policyName"], docs["MutatingAdmissionPolicy"]["metadata"]["name"])
            self.assertNotIn("paramRef", binding)
            self.assertEqual(docs["MutatingAdmissionPolicy"]["spec"]["failurePolicy"], "Fail",
                             "a labelled pod the policy cannot handle is refused, not started without nccl-wrap")

    def test_a_broken_mutation_is_caught(self):
        good = the_policy()

        def broken(edit):
            p = copy.deepcopy(good)
            edit(p["spec"])
            return mutation_problems(p)

        def expr(spec):
            return spec["mutations"][0]["jsonPatch"]

        # The wrong binary; a wrapper without its `--`.
        self.assertTrue(broken(lambda s: expr(s).update(expression=expr(s)["expression"].replace(WRAP, "/opt/nccl-wrap/bin/nccl-wrap"))))
        self.assertTrue(broken(lambda s: expr(s).update(expression=expr(s)["expression"].replace(f'"{WRAP}", "--"', f'"{WRAP}"'))))
        # Always the first container (the sidecar gets wrapped).
        self.assertTrue(broken(lambda s: s["variables"][0].update(expression="0")))
        # No guard against wrapping twice.
        self.assertTrue(broken(lambda s: s.update(matchConditions=[c for c in s["matchConditions"] if c["name"] != "not-yet-wrapped"])))
        # No check for a command: a pod without one is refused (a replace of a missing path).
        self.assertTrue(broken(lambda s: s.update(matchConditions=[c for c in s["matchConditions"] if c["name"] != "sets-a-command"])))
        # The command replaced instead of prefixed.
        self.assertTrue(broken(lambda s: expr(s).update(expression=expr(s)["expression"].replace(
            " + object.spec.containers[variables.index].command", ""))))
        # Matching UPDATE too.
        self.assertTrue(broken(lambda s: s["matchConstraints"]["resourceRules"][0].update(operations=["CREATE", "UPDATE"])))

    def test_the_runtime_sets_the_label_the_policy_selects(self):
        runtime = [o for o in kit.render("trainer/runtime") if o["kind"] == "ClusterTrainingRuntime"][0]
        labels = kit.pod_templates(runtime)[0][1]["metadata"]["labels"]
        self.assertTrue(trainer.selects(the_policy()["spec"]["matchConstraints"]["objectSelector"], labels))
        names = [c["name"] for c in kit.pod_templates(runtime)[0][1]["spec"]["containers"]]
        self.assertIn(labels[LABEL], names)


# ---- the runtime, from a TrainJob to its pods ------------------------------------------------------

def rendered(network):
    runtime = [o for o in kit.render(f"overlays/{network}/trainer") if o["kind"] == "ClusterTrainingRuntime"][0]
    job_objects = kit.render(f"overlays/{network}/trainjob")
    trainjob = [o for o in job_objects if o["kind"] == "TrainJob"][0]
    return runtime, trainjob, job_objects


def as_jobset(js, pod):
    """The JobSet with its first replicated Job's pod template replaced by `pod` (admitted)."""
    js = copy.deepcopy(js)
    template = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    template["spec"] = pod["spec"]
    return js


def runtime_problems(runtime, trainjob):
    """The runtime's own promises, on the JobSet Trainer makes for `trainjob`: envInjection hands
    the PET_* variables to the init container that runs the gate, after the install; it holds the
    trainer's RDMA devices and IPC_LOCK and reads the network-status file; the trainer runs no
    second gate; nccl-wrap's 125 from either fails the JobSet at once."""
    bad = []
    js = trainer.effective_jobset(runtime, trainjob)
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    spec = pod["spec"]
    trainers = [c for c in spec["containers"] if policy.GPU in ((c.get("resources") or {}).get("limits") or {})]
    gates = [c for c in spec.get("initContainers") or [] if policy.runs_gate(c)]
    if len(gates) != 1:
        return bad + [f"{len(gates)} init containers run the gate, not 1"]
    gate = gates[0]
    targets = (((runtime["spec"].get("mlPolicy") or {}).get("torch") or {}).get("envInjection") or {}).get("targets") or []
    if not any(t["jobName"] == js["spec"]["replicatedJobs"][0]["name"] and gate["name"] in t["containerNames"] for t in targets):
        bad.append(f"mlPolicy.torch.envInjection does not name {gate['name']}")
    env = {e["name"] for e in gate.get("env") or []}
    for var in ("PET_NODE_RANK", "PET_NNODES", "PET_MASTER_ADDR"):
        if var not in env:
            bad.append(f"{gate['name']}: no {var} (the gate's rank, size and coordinator)")
    names = [c["name"] for c in spec.get("initContainers") or []]
    if names.index(gate["name"]) == 0:
        bad.append(f"{gate['name']} runs before the install")
    for t in trainers:
        if policy.runs_gate(t):
            bad.append(f"{t['name']}: runs the gate too")
        if policy.rdma_resources(gate) != policy.rdma_resources(t):
            bad.append(f"{gate['name']} holds {policy.rdma_resources(gate)}, the trainer {policy.rdma_resources(t)}: "
                       f"the gate would test other devices, or none")
    caps = ((gate.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
    if "IPC_LOCK" not in caps:
        bad.append(f"{gate['name']}: no IPC_LOCK (the pair test registers memory)")
    if not policy.mount_of(gate, policy.PODNETINFO):
        bad.append(f"{gate['name']}: does not read the network-status file")
    if {e.get("name"): e.get("value") for e in gate.get("env") or []}.get("NCCL_WRAP_REQUIRE_RDMA") != "1":
        bad.append(f"{gate['name']}: NCCL_WRAP_REQUIRE_RDMA is not \"1\"")
    for name in [gate["name"]] + [t["name"] for t in trainers]:
        bad += jobset.check_refusal_fails_without_restarts(js["spec"], name)
    return bad


class Runtime(unittest.TestCase):
    def test_the_trainjob_bypasses_nccl_wrap_and_the_policy_puts_it_back(self):
        for network in NETWORKS:
            with self.subTest(network=network):
                runtime, trainjob, _ = rendered(network)
                js = trainer.effective_jobset(runtime, trainjob)
                pod = trainer.pod_of(js)
                self.assertEqual(container(pod)["command"], ["bash", "-c", "torchrun /workspace/train.py"],
                                 "Trainer gives the TrainJob's command, not the runtime's")
                self.assertTrue(policy.check_command([as_jobset(js, pod)]), "without the policy: not through nccl-wrap")
                admitted = trainer.admit(the_policy(), pod)
                self.assertEqual(container(admitted)["command"], [WRAP, "--", "bash", "-c", "torchrun /workspace/train.py"])
                objects = [as_jobset(js, admitted)]
                bad = [b for rule in policy.TRAINING_RULES for b in rule(objects)] + policy.check_gate(objects)
                self.assertEqual(bad, [], "\n".join(bad))

    def test_a_trainjob_without_a_command_runs_the_runtimes_wrapped_one(self):
        runtime, trainjob, _ = rendered("network-operator")
        trainjob = copy.deepcopy(trainjob)
        del trainjob["spec"]["trainer"]["command"]
        pod = trainer.pod_of(trainer.effective_jobset(runtime, trainjob))
        self.assertEqual(container(pod)["command"], [WRAP, "--", "torchrun", "/workspace/train.py"])
        self.assertEqual(trainer.admit(the_policy(), pod), pod, "already wrapped: left alone")

    def test_the_runtime_keeps_its_promises(self):
        for network in NETWORKS:
            with self.subTest(network=network):
                runtime, trainjob, _ = rendered(network)
                self.assertEqual(runtime_problems(runtime, trainjob), [])
                # The base pattern, and the network's resources and networks.
                objects = kit.render(f"overlays/{network}/trainer")
                base = [o for o in objects if o["kind"] == "PodTemplate"][0]["template"]
                bad = policy.check_same_pattern_as_base(objects, base) + policy.check_networks_match_resources(objects) \
                    + policy.check_overlay_consistency(kit.render(f"overlays/{network}"), objects) \
                    + policy.check_networks_pair_with_resources(kit.render(f"overlays/{network}"), objects)
                self.assertEqual(bad, [], "\n".join(bad))
                # The runtime is cluster-scoped; its pods run in the TrainJob's namespace, which must
                # be where the networks are.
                _, _, namespaces = policy.cluster_names(kit.render(f"overlays/{network}"))
                self.assertIn(trainjob["metadata"].get("namespace"), namespaces)

    def test_each_runtime_promise_reports_its_fault(self):
        good, trainjob, _ = rendered("openshift-sriov")

        def broken(edit):
            runtime = copy.deepcopy(good)
            edit(runtime["spec"], kit.pod_templates(runtime)[0][1]["spec"])
            return runtime_problems(runtime, trainjob)

        def gate(pod):
            return [c for c in pod["initContainers"] if c["name"] == "nccl-wrap-gate"][0]

        self.assertTrue(broken(lambda s, p: s["mlPolicy"]["torch"].pop("envInjection")))
        self.assertTrue(broken(lambda s, p: gate(p)["resources"]["limits"].pop("openshift.io/rdma_rail2")))
        self.assertTrue(broken(lambda s, p: gate(p)["securityContext"]["capabilities"].update(add=[])))
        self.assertTrue(broken(lambda s, p: p["containers"][0]["env"].append({"name": "NCCL_WRAP_GATE", "value": "1"})))
        self.assertTrue(broken(lambda s, p: p["initContainers"].reverse()))
        self.assertTrue(broken(lambda s, p: s["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]
                               ["rules"].pop(0)))
        self.assertTrue(broken(lambda s, p: gate(p).update(command=["/nccl-wrap", "--", "/nccl-wrap", "--version"])))

    def test_the_job_keeps_the_trust_rules(self):
        for network in NETWORKS:
            with self.subTest(network=network):
                runtime, trainjob, job_objects = rendered(network)
                js = trainer.effective_jobset(runtime, trainjob)
                objects = [js] + [o for o in job_objects if o["kind"] in ("NetworkPolicy", "Secret")]
                bad = trust.check_listeners_admit_only_the_job(objects) + trust.check_gate_secret(objects)
                self.assertEqual(bad, [], "\n".join(bad))
                # A TrainJob without the runtime patch (as the SDK makes one): the gate runs
                # unauthenticated, and the rule says so.
                bare = copy.deepcopy(trainjob)
                del bare["spec"]["runtimePatches"]
                objects = [trainer.effective_jobset(runtime, bare)] + [o for o in job_objects if o["kind"] != "TrainJob"]
                self.assertTrue(any(trust.GATE_SECRET_FILE in b for b in trust.check_gate_secret(objects)))

    def test_the_runtime_patch_reaches_the_gate(self):
        runtime, trainjob, job_objects = rendered("network-operator")
        pod = trainer.pod_of(trainer.effective_jobset(runtime, trainjob))
        gate = [c for c in pod["spec"]["initContainers"] if c["name"] == "nccl-wrap-gate"][0]
        env = {e["name"]: e.get("value") for e in gate["env"]}
        self.assertEqual(env[trust.GATE_SECRET_FILE], "/etc/nccl-wrap/gate/secret")
        secret = [o for o in job_objects if o["kind"] == "Secret"][0]["metadata"]["name"]
        self.assertEqual(policy.volume(pod, "gate-secret")["secret"]["secretName"], secret)
        self.assertTrue(secret.startswith("llm-train-gate-"), "the generated, hash-suffixed name")
        # The strategic merge keeps the runtime's own variables and mounts beside the patch's.
        self.assertEqual(env["NCCL_WRAP_REQUIRE_RDMA"], "1")
        self.assertTrue(policy.mount_of(gate, policy.PODNETINFO))

    def test_every_network_has_the_runtime_and_the_trainjob(self):
        for network in NETWORKS:
            for leaf in ("trainer", "trainjob"):
                self.assertIn(f"overlays/{network}/{leaf}", kit.kustomization_dirs())
        # Without a network's component the runtime holds no RDMA device: nccl-wrap would refuse.
        self.assertTrue(policy.check_rdma_resource(kit.render("trainer/runtime")))

    def test_the_model_of_trainer_is_what_its_sources_say(self):
        # runtimePatches: a strategic merge by name and mountPath; trainer.command replaces the
        # command only, trainer.args the args only.
        merged = trainer.smp({"env": [{"name": "A", "value": "1"}], "volumeMounts": [{"name": "x", "mountPath": "/x"}]},
                             {"env": [{"name": "B", "value": "2"}, {"name": "A", "value": "3"}],
                              "volumeMounts": [{"name": "y", "mountPath": "/y"}]})
        self.assertEqual(merged["env"], [{"name": "A", "value": "3"}, {"name": "B", "value": "2"}])
        self.assertEqual([m["mountPath"] for m in merged["volumeMounts"]], ["/x", "/y"])
        runtime, trainjob, _ = rendered("network-operator")
        trainjob = copy.deepcopy(trainjob)
        trainjob["spec"]["trainer"] = {"numNodes": 2, "command": ["bash", "-c"], "args": ["python x.py"]}
        js = trainer.effective_jobset(runtime, trainjob)
        node = container(trainer.pod_of(js))
        self.assertEqual((node["command"], node["args"]), (["bash", "-c"], ["python x.py"]))
        env = {e["name"]: e.get("value") for e in node["env"]}
        self.assertEqual((env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["PET_MASTER_ADDR"]),
                         ("2", "8", "llm-train-node-0-0.llm-train"))
        self.assertEqual(js["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"], 2)


if __name__ == "__main__":
    unittest.main()
