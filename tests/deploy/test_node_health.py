"""The node agent's kit and output: the metrics `nccl-wrap watch` writes on each host-* fixture node
read by prometheus_client's own text parser and linted by `promtool check metrics` (Debian's
`prometheus` package; skipped, never passed, without it), every feature line checked against Kubernetes' label
syntax (the API machinery's regular expressions) and NFD's rules (allowed namespace, size, expiry
directive), the DaemonSet's least privilege, and the trainer pods' affinity on the label the agent
writes. Each policy rule is also run on a broken copy and must report it.

The binary is $NCCL_WRAP_BIN, else the one `cargo build` (or `cargo test`, which scripts/test.sh runs
first) left under target/.
"""

import copy
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from prometheus_client.parser import text_string_to_metric_families

import kit
import policy

HEALTHY = "nccl-wrap.feature.node.kubernetes.io/healthy"
FEATURES_D = "/etc/kubernetes/node-feature-discovery/features.d"

# k8s.io/apimachinery/pkg/util/validation: IsQualifiedName and IsValidLabelValue.
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_errors(key, value):
    errors = []
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        errors.append(f"{key}: more than one '/'")
    if prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        errors.append(f"{key}: prefix is not a DNS-1123 subdomain")
    if len(name) > 63 or not QUALIFIED_NAME.match(name):
        errors.append(f"{key}: name is not a qualified name")
    if len(value) > 63 or not LABEL_VALUE.match(value):
        errors.append(f"{key}={value}: not a label value")
    # nfd-master drops *.kubernetes.io names except NFD's own namespaces and their sub-namespaces.
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        if not (prefix.endswith(".feature.node.kubernetes.io") or prefix == "feature.node.kubernetes.io"):
            errors.append(f"{key}: a kubernetes.io namespace NFD denies")
    elif not prefix:
        errors.append(f"{key}: unprefixed (NFD's auto-prefix is deprecated)")
    return errors


def binary():
    env = os.environ.get("NCCL_WRAP_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        path = os.path.join(kit.ROOT, "target", "x86_64-unknown-linux-gnu", profile, "nccl-wrap")
        if os.access(path, os.X_OK):
            return path
    raise RuntimeError("no nccl-wrap binary: run `cargo build` first, or set NCCL_WRAP_BIN")


def watch_once(node):
    """(feature text, metrics text) of one `watch` round on fixtures/nodes/NODE."""
    root = os.path.join(kit.ROOT, "fixtures", "nodes", node)
    with tempfile.TemporaryDirectory(prefix="nccl-wrap-health-") as d:
        features, metrics = os.path.join(d, "nccl-wrap"), os.path.join(d, "nccl-wrap.prom")
        env = {"PATH": "/usr/bin:/bin", "NCCL_WRAP_SYSFS_ROOT": os.path.join(root, "sys"),
               "NCCL_WRAP_PROC_ROOT": os.path.join(root, "proc"), "NCCL_WRAP_DEV_ROOT": os.path.join(root, "dev")}
        proc = subprocess.run([binary(), "watch", "--rounds", "1", "--features", features, "--metrics", metrics],
                              env=env, capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise AssertionError(f"watch on {node} exited {proc.returncode}: {proc.stderr}")
        with open(features) as f, open(metrics) as m:
            return f.read(), m.read()


def feature_lines(text):
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


NODES = {
    # node: (healthy, usable ports, iommu passthrough)
    "host-healthy": ("true", "2", "true"),
    "host-port-down": ("false", "1", "true"),
    "host-translated-iommu": ("false", "2", "false"),
}


class Output(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.out = {node: watch_once(node) for node in NODES}

    def test_metrics_parse_with_prometheus_client(self):
        for node, (healthy, usable, passthrough) in NODES.items():
            with self.subTest(node=node):
                families = list(text_string_to_metric_families(self.out[node][1]))
                names = [f.name for f in families]
                self.assertEqual(len(names), len(set(names)), "a family twice")
                self.assertTrue(all(n.startswith("nccl_wrap_") for n in names), names)
                values = {}
                for fam in families:
                    self.assertTrue(fam.documentation, f"{fam.name} has no HELP")
                    seen = set()
                    for s in fam.samples:
                        key = (s.name, tuple(sorted(s.labels.items())))
                        self.assertNotIn(key, seen, f"{s.name}{s.labels} twice")
                        seen.add(key)
                        values[key] = s.value
                self.assertEqual(values[("nccl_wrap_healthy", ())], 1.0 if healthy == "true" else 0.0)
                self.assertEqual(values[("nccl_wrap_rdma_ports_usable", ())], float(usable))
                self.assertEqual(values[("nccl_wrap_iommu_passthrough", ())], 1.0 if passthrough == "true" else 0.0)
                # One family per port counter, node_exporter's names, device and port only; the
                # IBTA data counters (4-octet words) in bytes. The parser names a counter family
                # without its _total.
                by_name = {f.name: f for f in families}
                for name in ("nccl_wrap_port_data_received_bytes", "nccl_wrap_port_packets_received",
                             "nccl_wrap_symbol_error", "nccl_wrap_out_of_sequence_packets_received"):
                    self.assertIn(name, by_name, "a port counter's family")
                    self.assertEqual(by_name[name].type, "counter", name)
                    self.assertEqual({tuple(sorted(x.labels)) for x in by_name[name].samples}, {("device", "port")}, name)
                rcv = os.path.join(kit.ROOT, "fixtures", "nodes", node, "sys", "class", "infiniband", "mlx5_0", "ports", "1",
                                   "counters", "port_rcv_data")
                with open(rcv) as f:
                    words = int(f.read())
                self.assertEqual(values[("nccl_wrap_port_data_received_bytes_total", (("device", "mlx5_0"), ("port", "1")))],
                                 float(words * 4))
                for fam in families:
                    for x in fam.samples:
                        self.assertFalse({"counter", "source"} & set(x.labels), f"{x.name}: counters under a label")
                memlock = values[("nccl_wrap_memlock_limit_bytes", ())]
                self.assertTrue(memlock > 0, memlock)

    def _promtool_check_metrics(self, text):
        tool = shutil.which("promtool")
        if tool is None:
            print("SKIP: promtool not installed (Debian package prometheus)")
            self.skipTest("promtool not installed")
        return subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)

    def test_promtool_check_metrics_passes_on_the_agents_output(self):
        # promtool's lint (promlint): counters end in _total and do not name their type, no
        # non-base or abbreviated units, HELP on every family.
        for node in NODES:
            with self.subTest(node=node):
                out = self._promtool_check_metrics(self.out[node][1])
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)

    def test_promtool_check_metrics_catches_what_it_is_there_for(self):
        old = ("# HELP nccl_wrap_port_counter_total Every counter\n# TYPE nccl_wrap_port_counter_total counter\n"
               'nccl_wrap_port_counter_total{device="mlx5_0",port="1",counter="symbol_error"} 1\n')
        out = self._promtool_check_metrics(self.out["host-healthy"][1] + old)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("nccl_wrap_port_counter_total", out.stdout + out.stderr)

    def test_feature_lines_are_kubernetes_labels_nfd_takes(self):
        for node, (healthy, usable, _) in NODES.items():
            with self.subTest(node=node):
                text = self.out[node][0]
                self.assertLess(len(text.encode()), 64 * 1024, "NFD ignores feature files over 64 kB")
                labels = feature_lines(text)
                errors = [e for k, v in labels.items() for e in label_errors(k, v)]
                self.assertEqual(errors, [])
                self.assertEqual(labels[HEALTHY], healthy)
                self.assertEqual(labels["nccl-wrap.feature.node.kubernetes.io/rdma-ports-usable"], usable)
                expiry = [line for line in text.splitlines() if line.startswith("# +expiry-time=")]
                self.assertEqual(len(expiry), 1)
                when = datetime.datetime.fromisoformat(expiry[0].split("=", 1)[1].replace("Z", "+00:00"))
                self.assertGreater(when, datetime.datetime.now(datetime.timezone.utc))
                first = text.splitlines().index(expiry[0])
                self.assertTrue(all(line.startswith("#") for line in text.splitlines()[:first]),
                                "the expiry directive precedes every label")

    def test_the_label_checker_catches_what_kubernetes_rejects(self):
        self.assertTrue(label_errors("nccl-wrap.feature.node.kubernetes.io/rate", "400 Gb/sec"))
        self.assertTrue(label_errors("nccl-wrap.feature.node.kubernetes.io/-x", "true"))
        self.assertTrue(label_errors("node.kubernetes.io/healthy", "true"))
        self.assertTrue(label_errors("healthy", "true"))
        self.assertTrue(label_errors("nccl-wrap.feature.node.kubernetes.io/x", "a" * 64))
        self.assertEqual(label_errors(HEALTHY, "true"), [])


# ---- the DaemonSet ------------------------------------------------------------------------------

def daemonset_problems(objects, textfile_on_host=True):
    """What the agent's DaemonSet must keep: host network, no privilege, every capability dropped, a
    read-only root, no token, exactly two hostPath directories mounted where its file options point,
    one of them NFD's features.d; and nccl-wrap on PATH, for `kubectl exec`. With
    textfile_on_host false (OpenShift), NFD's features.d is the only hostPath and the metrics go to
    an emptyDir."""
    bad = []
    sets = [o for o in objects if o["kind"] == "DaemonSet"]
    if len(sets) != 1:
        return [f"{len(sets)} DaemonSets"]
    spec = sets[0]["spec"]["template"]["spec"]
    if spec.get("hostNetwork") is not True:
        bad.append("hostNetwork is not true (exclusive RDMA netns mode shows PFs only to the host namespace)")
    if spec.get("automountServiceAccountToken") is not False:
        bad.append("a service account token is mounted; the agent never calls the API server")
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            bad.append(f"{c['name']}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad.append(f"{c['name']}: allowPrivilegeEscalation is not false")
        if sc.get("readOnlyRootFilesystem") is not True:
            bad.append(f"{c['name']}: root file system writable")
        caps = sc.get("capabilities") or {}
        if caps.get("drop") != ["ALL"] or caps.get("add"):
            bad.append(f"{c['name']}: capabilities {caps}, not drop [ALL] and nothing added")
    hostpaths = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
    empty = {v["name"] for v in spec.get("volumes", []) if "emptyDir" in v}
    if textfile_on_host and (len(hostpaths) != 2 or FEATURES_D not in hostpaths.values()):
        bad.append(f"hostPath volumes {hostpaths}: want exactly NFD's features.d and the textfile directory")
    if not textfile_on_host and list(hostpaths.values()) != [FEATURES_D]:
        bad.append(f"hostPath volumes {hostpaths}: want NFD's features.d alone")
    watch = spec["containers"][0]
    mounts = {m["mountPath"]: m["name"] for m in watch.get("volumeMounts", [])}
    args = dict(a.split("=", 1) for a in watch.get("args", []) if a.startswith("--"))
    for opt, suffix in (("--features", ""), ("--metrics", ".prom")):
        path = args.get(opt)
        if not path or not path.endswith(suffix):
            bad.append(f"{opt} is {path!r}")
            continue
        mount = mounts.get(os.path.dirname(path))
        if opt == "--metrics" and not textfile_on_host:
            if mount not in empty:
                bad.append(f"{opt} {path} is not in an emptyDir mount")
        elif mount not in hostpaths:
            bad.append(f"{opt} {path} is not in a hostPath mount")
        elif opt == "--features" and hostpaths[mount] != FEATURES_D:
            bad.append(f"{opt} {path} is not in NFD's {FEATURES_D}")
    if watch.get("command") != ["/nccl-wrap", "watch"]:
        bad.append(f"command {watch.get('command')}")
    if policy.on_path(sets[0]["spec"]["template"], watch) is None:
        bad.append("nccl-wrap is not on PATH (kubectl exec POD -- nccl-wrap doctor): set PATH to /")
    return bad


class DaemonSet(unittest.TestCase):
    def test_least_privilege(self):
        self.assertEqual(daemonset_problems(kit.render("node-health")), [])

    def test_each_rule_reports_its_fault(self):
        good = kit.render("node-health")

        def broken(edit):
            objs = copy.deepcopy(good)
            edit([o for o in objs if o["kind"] == "DaemonSet"][0]["spec"]["template"]["spec"])
            return daemonset_problems(objs)

        def c0(spec):
            return spec["containers"][0]

        self.assertTrue(broken(lambda s: s.update(hostNetwork=False)))
        self.assertTrue(broken(lambda s: s.pop("automountServiceAccountToken")))
        self.assertTrue(broken(lambda s: c0(s)["securityContext"].update(privileged=True)))
        self.assertTrue(broken(lambda s: c0(s)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"])))
        self.assertTrue(broken(lambda s: c0(s)["securityContext"].update(readOnlyRootFilesystem=False)))
        self.assertTrue(broken(lambda s: s["volumes"].append({"name": "root", "hostPath": {"path": "/"}})))
        self.assertTrue(broken(lambda s: c0(s).update(args=["--features=/tmp/nccl-wrap", "--metrics=/host/textfile/nccl-wrap.prom"])))
        self.assertTrue(broken(lambda s: c0(s).update(env=[e for e in c0(s)["env"] if e["name"] != "PATH"])))

    def test_the_namespace_admits_host_network_and_host_path(self):
        ns = [o for o in kit.render("node-health") if o["kind"] == "Namespace"][0]
        self.assertEqual(ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "privileged")


# ---- the ring overlay ---------------------------------------------------------------------------

RING_PORT = 18517
RING_RESOURCE_PREFIX = "rdma/"


def ring_problems(objects):
    """The opt-in ring keeps every rule of the base but adds exactly what it states: IPC_LOCK, one
    RDMA device-plugin unit (the uverbs nodes), the ring's host port; and a headless Service in the
    agent's namespace over the agent's pods, whose DNS name and port --ring names."""
    bad = []
    objects = copy.deepcopy(objects)
    sets = [o for o in objects if o["kind"] == "DaemonSet"]
    services = [o for o in objects if o["kind"] == "Service"]
    if len(sets) != 1 or len(services) != 1:
        return [f"{len(sets)} DaemonSets and {len(services)} Services, want one of each"]
    ds, svc = sets[0], services[0]
    pod = ds["spec"]["template"]
    watch = pod["spec"]["containers"][0]
    caps = watch["securityContext"]["capabilities"]
    if caps.pop("add", None) != ["IPC_LOCK"]:
        bad.append("capabilities: want exactly IPC_LOCK added (memory registration)")
    if pod["spec"].get("securityContext", {}).get("privileged") or watch["securityContext"].get("privileged"):
        bad.append("privileged")
    res = watch.get("resources") or {}
    rdma = {k: v for k, v in (res.get("limits") or {}).items() if k.startswith(RING_RESOURCE_PREFIX)}
    if len(rdma) != 1 or list(rdma.values()) != ["1"]:
        bad.append(f"limits {res.get('limits')}: want one unit of one RDMA device-plugin resource (the uverbs nodes)")
    ports = watch.get("ports") or []
    if [(p.get("containerPort"), p.get("hostPort"), p.get("protocol")) for p in ports] != [(RING_PORT, RING_PORT, "TCP")]:
        bad.append(f"ports {ports}: want only the ring's {RING_PORT}/TCP as a host port")
    rings = [a.split("=", 1)[1] for a in watch.get("args", []) if a.startswith("--ring=")]
    ns = ds["metadata"].get("namespace")
    want = f"{svc['metadata']['name']}.{ns}.svc:{RING_PORT}"
    if rings != [want]:
        bad.append(f"--ring {rings}: want {want}, the Service's name in the agent's namespace")
    spec = svc["spec"]
    if svc["metadata"].get("namespace") != ns:
        bad.append(f"the Service is in {svc['metadata'].get('namespace')}, the agents in {ns}")
    if spec.get("clusterIP") != "None":
        bad.append("the Service is not headless (clusterIP: None): its name must resolve to every agent")
    labels = pod["metadata"].get("labels") or {}
    sel = spec.get("selector") or {}
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        bad.append(f"the Service's selector {sel} does not select the agent's pods {labels}")
    if [p.get("port") for p in spec.get("ports", [])] != [RING_PORT]:
        bad.append(f"the Service's ports {spec.get('ports')}: want {RING_PORT}")
    # Every other rule of the base: host network, no token, a read-only root, two hostPaths.
    watch.pop("ports", None)
    watch["args"] = [a for a in watch["args"] if not a.startswith("--ring=")]
    bad += daemonset_problems([ds])
    return bad


class Ring(unittest.TestCase):
    def test_the_overlay_adds_only_what_it_states(self):
        self.assertEqual(ring_problems(kit.render("node-health-ring")), [])

    def test_the_base_has_no_ring_and_no_added_privilege(self):
        base = kit.render("node-health")
        self.assertEqual(daemonset_problems(base), [])
        self.assertFalse([o for o in base if o["kind"] == "Service"])
        watch = [o for o in base if o["kind"] == "DaemonSet"][0]["spec"]["template"]["spec"]["containers"][0]
        self.assertFalse([a for a in watch.get("args", []) if a.startswith("--ring")])
        self.assertFalse(watch.get("ports"))

    def test_each_rule_reports_its_fault(self):
        good = kit.render("node-health-ring")

        def broken(edit):
            objs = copy.deepcopy(good)
            edit({o["kind"]: o for o in objs})
            return ring_problems(objs)

        def c0(o):
            return o["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]

        self.assertTrue(broken(lambda o: c0(o)["securityContext"]["capabilities"].update(add=["IPC_LOCK", "NET_ADMIN"])))
        self.assertTrue(broken(lambda o: c0(o)["securityContext"].update(privileged=True)))
        self.assertTrue(broken(lambda o: c0(o)["resources"]["limits"].pop("rdma/rdma_shared_device_a")))
        self.assertTrue(broken(lambda o: c0(o)["ports"].append({"containerPort": 22, "hostPort": 22, "protocol": "TCP"})))
        self.assertTrue(broken(lambda o: c0(o).update(args=[a.replace(":18517", ":18516") for a in c0(o)["args"]])))
        self.assertTrue(broken(lambda o: o["Service"]["spec"].update(clusterIP="10.0.0.1")))
        self.assertTrue(broken(lambda o: o["Service"]["spec"].update(selector={"app": "other"})))
        self.assertTrue(broken(lambda o: o["DaemonSet"]["spec"]["template"]["spec"].update(hostNetwork=False)))

    def test_the_binary_takes_the_overlays_ring_option(self):
        ds = [o for o in kit.render("node-health-ring") if o["kind"] == "DaemonSet"][0]
        watch = ds["spec"]["template"]["spec"]["containers"][0]
        ring = [a for a in watch["args"] if a.startswith("--ring=")]
        env = {e["name"]: e["value"] for e in watch.get("env", [])}
        proc = subprocess.run([binary(), "watch", "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for name in ("--ring ", "--ring-every", "NCCL_WRAP_WATCH_RING_EVERY"):
            self.assertIn(name, proc.stdout)
        self.assertIn("NCCL_WRAP_WATCH_RING_EVERY", env)
        self.assertEqual(len(ring), 1)


# ---- trainer affinity ---------------------------------------------------------------------------

AFFINITY_LEAVES = [f"overlays/{net}/{w}-on-healthy-nodes"
                   for net in ("network-operator", "openshift-sriov") for w in ("pytorchjob", "jobset")]


def affinity_problems(objects, label):
    """Every training pod requires `label` = true on its node."""
    bad = []
    for where, template, _ in policy.training_pods(objects):
        terms = (((template.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}) \
            .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
        ok = terms and all(any(e.get("key") == label and e.get("operator") == "In" and e.get("values") == ["true"]
                               for e in t.get("matchExpressions", [])) for t in terms)
        if not ok:
            bad.append(f"{where}: no required nodeAffinity on {label}=true")
    return bad


class Affinity(unittest.TestCase):
    def test_trainers_require_the_label_the_agent_writes(self):
        written = feature_lines(watch_once("host-healthy")[0])
        self.assertIn(HEALTHY, written)
        for leaf in AFFINITY_LEAVES:
            with self.subTest(leaf=leaf):
                objects = kit.render(leaf)
                self.assertTrue(policy.training_pods(objects))
                self.assertEqual(affinity_problems(objects, HEALTHY), [])
                # Every training rule still holds.
                bad = [b for rule in policy.TRAINING_RULES for b in rule(objects)]
                self.assertEqual(bad, [])

    def test_anti_affinity_survives_and_a_missing_term_is_reported(self):
        objects = copy.deepcopy(kit.render(AFFINITY_LEAVES[0]))
        job = [o for o in objects if o["kind"] == "PyTorchJob"][0]
        for role in ("Master", "Worker"):
            self.assertIn("podAntiAffinity", job["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["affinity"])
        del job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["affinity"]["nodeAffinity"]
        self.assertTrue(affinity_problems(objects, HEALTHY))
        plain = kit.render("overlays/network-operator/pytorchjob")
        self.assertTrue(affinity_problems(plain, HEALTHY), "the launcher alone has no affinity on health")


if __name__ == "__main__":
    unittest.main()
