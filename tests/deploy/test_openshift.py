"""The node agent on OpenShift (deploy/node-health-openshift): its SCC admits the rendered pod, as
OpenShift's SCC admission would, and allows nothing the pod does not use; it is granted to the
agent's service account alone; the agent keeps the base's least privilege with NFD's features.d as
its only hostPath; its metrics reach user-workload monitoring (an exporter beside it reading the
agent's emptyDir, a Service, a ServiceMonitor, the alerts as a PrometheusRule in the same
namespace); the MachineConfig labels exactly the features.d directory the pod mounts, for the
gpu-worker pool the OpenShift overlay defines. Each rule also on a broken copy.
"""

import copy
import re
import unittest

import kit
import test_node_health

LEAF = "node-health-openshift"


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def pod_of(objects):
    return by_kind(objects, "DaemonSet")[0]["spec"]["template"]


def volume_type(v):
    return next(k for k in v if k != "name")


def admission_problems(scc, template):
    """Why OpenShift's SCC admission would refuse the pod under `scc` (a subset of its rules: the
    ones the kit's pods touch): host namespaces and ports, volume types, privilege, capabilities,
    privilege escalation, read-only root, the user, seccomp."""
    bad = []
    spec = template["spec"]
    for field, allow in (("hostNetwork", "allowHostNetwork"), ("hostPID", "allowHostPID"), ("hostIPC", "allowHostIPC")):
        if spec.get(field) and not scc.get(allow):
            bad.append(f"{field} not allowed")
    allowed_volumes = set(scc.get("volumes") or [])
    for v in spec.get("volumes") or []:
        t = volume_type(v)
        if "*" not in allowed_volumes and t not in allowed_volumes:
            bad.append(f"volume {v['name']}: {t} not allowed")
        if t == "hostPath" and not scc.get("allowHostDirVolumePlugin"):
            bad.append(f"volume {v['name']}: hostPath not allowed")
    pod_sc = spec.get("securityContext") or {}
    seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("privileged") and not scc.get("allowPrivilegedContainer"):
            bad.append(f"{name}: privileged not allowed")
        for p in c.get("ports") or []:
            # On the host network every container port is a host port.
            if (p.get("hostPort") or spec.get("hostNetwork")) and not scc.get("allowHostPorts"):
                bad.append(f"{name}: port {p.get('containerPort')} on the host not allowed")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        allowed = set(scc.get("allowedCapabilities") or []) | set(scc.get("defaultAddCapabilities") or [])
        required_drop = set(scc.get("requiredDropCapabilities") or [])
        for cap in added:
            if cap not in allowed or cap in required_drop or "ALL" in required_drop:
                bad.append(f"{name}: capability {cap} not allowed")
        if sc.get("allowPrivilegeEscalation") is not False and scc.get("allowPrivilegeEscalation") is False:
            bad.append(f"{name}: allowPrivilegeEscalation must be false")
        if scc.get("readOnlyRootFilesystem") and sc.get("readOnlyRootFilesystem") is False:
            bad.append(f"{name}: a writable root is not allowed")
        uid = sc.get("runAsUser", pod_sc.get("runAsUser"))
        rule = (scc.get("runAsUser") or {}).get("type")
        if rule == "MustRunAsNonRoot" and (uid == 0 or uid is None):
            bad.append(f"{name}: runs as root")
        if rule == "MustRunAs" and uid != (scc.get("runAsUser") or {}).get("uid"):
            bad.append(f"{name}: UID {uid} not the SCC's")
        if rule == "MustRunAsRange" and uid is not None and uid < 1000:
            bad.append(f"{name}: UID {uid} outside the namespace's range")
        profile = (sc.get("seccompProfile") or {}).get("type") or seccomp
        want = scc.get("seccompProfiles") or []
        if want and "*" not in want and {"RuntimeDefault": "runtime/default"}.get(profile) not in want:
            bad.append(f"{name}: seccomp {profile} not allowed")
    return bad


def excess_problems(scc, template):
    """What the SCC allows that the pod does not use: least privilege means none."""
    bad = []
    spec = template["spec"]
    containers = (spec.get("initContainers") or []) + spec["containers"]
    types = {volume_type(v) for v in spec.get("volumes") or []}
    if set(scc.get("volumes") or []) != types:
        bad.append(f"volumes {scc.get('volumes')}: the pod uses {sorted(types)}")
    checks = (("allowHostNetwork", spec.get("hostNetwork")), ("allowHostPID", spec.get("hostPID")),
              ("allowHostIPC", spec.get("hostIPC")), ("allowHostDirVolumePlugin", "hostPath" in types),
              ("allowHostPorts", any(c.get("ports") for c in containers)),
              ("allowPrivilegedContainer", any((c.get("securityContext") or {}).get("privileged") for c in containers)),
              ("allowPrivilegeEscalation", any((c.get("securityContext") or {}).get("allowPrivilegeEscalation") for c in containers)))
    for field, used in checks:
        if scc.get(field) and not used:
            bad.append(f"{field} is true, the pod does not need it")
    if scc.get("allowedCapabilities") or scc.get("defaultAddCapabilities"):
        bad.append(f"capabilities {scc.get('allowedCapabilities')} {scc.get('defaultAddCapabilities')} allowed, none is added")
    if "ALL" not in (scc.get("requiredDropCapabilities") or []):
        bad.append("requiredDropCapabilities is not [ALL]")
    if not scc.get("readOnlyRootFilesystem"):
        bad.append("a writable root file system is allowed")
    if (scc.get("runAsUser") or {}).get("type") == "RunAsAny":
        uids = {(c.get("securityContext") or {}).get("runAsUser", (spec.get("securityContext") or {}).get("runAsUser"))
                for c in containers}
        if 0 not in uids:
            bad.append("runAsUser RunAsAny, but no container runs as UID 0")
    if scc.get("users") or scc.get("groups"):
        bad.append(f"granted to users {scc.get('users')} / groups {scc.get('groups')} directly, not by RBAC to the agent")
    if (scc.get("seLinuxContext") or {}).get("type") != "MustRunAs" or (scc.get("seLinuxContext") or {}).get("seLinuxOptions"):
        bad.append(f"seLinuxContext {scc.get('seLinuxContext')}: want MustRunAs with the namespace's level (container_t)")
    return bad


def grant_problems(objects):
    """The SCC is usable by the agent's service account alone: a ClusterRole with `use` on this SCC
    only, bound in the agent's namespace to the DaemonSet's service account."""
    bad = []
    scc = by_kind(objects, "SecurityContextConstraints")[0]["metadata"]["name"]
    ds = by_kind(objects, "DaemonSet")[0]
    sa, ns = ds["spec"]["template"]["spec"].get("serviceAccountName"), ds["metadata"]["namespace"]
    roles = {r["metadata"]["name"]: r for r in by_kind(objects, "ClusterRole")}
    bindings = [b for b in by_kind(objects, "RoleBinding") + by_kind(objects, "ClusterRoleBinding")
                if b["roleRef"]["name"] in roles]
    if not bindings:
        return ["no binding grants the SCC"]
    for b in bindings:
        role = roles[b["roleRef"]["name"]]
        if role["rules"] != [{"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
                              "resourceNames": [scc], "verbs": ["use"]}]:
            bad.append(f"ClusterRole/{role['metadata']['name']}: more than `use` on {scc}")
        if b["kind"] != "RoleBinding" or b["metadata"].get("namespace") != ns:
            bad.append(f"{kit.name_of(b)}: not a RoleBinding in {ns}")
        if b.get("subjects") != [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]:
            bad.append(f"{kit.name_of(b)}: subjects {b.get('subjects')}, not the agent's service account {ns}/{sa}")
    return bad


def metrics_path_problems(objects):
    """The agent's metrics file reaches user-workload monitoring: an exporter in the pod reads the
    agent's --metrics directory (read-only, the same emptyDir) with its textfile collector and
    nothing else, listens on the node's address at the Service's target port, as a non-root user
    without capabilities; the Service selects the agents; the ServiceMonitor selects the Service and
    scrapes its port by name, in the same namespace; the alerts come along as a PrometheusRule."""
    bad = []
    ds = by_kind(objects, "DaemonSet")[0]
    template = ds["spec"]["template"]
    watch, *others = template["spec"]["containers"]
    exporters = [c for c in others if any(a.startswith("--collector.textfile.directory=") for a in c.get("args") or [])]
    if len(exporters) != 1:
        return [f"{len(exporters)} textfile exporters in the pod"]
    exp = exporters[0]
    args = dict(a.split("=", 1) if "=" in a else (a, "") for a in exp.get("args") or [])
    metrics = [a.split("=", 1)[1] for a in watch["args"] if a.startswith("--metrics=")][0]
    watch_mount = {m["mountPath"]: m for m in watch["volumeMounts"]}.get(metrics.rsplit("/", 1)[0])
    exp_mount = {m["mountPath"]: m for m in exp.get("volumeMounts") or []}.get(args.get("--collector.textfile.directory"))
    if not watch_mount or not exp_mount or watch_mount["name"] != exp_mount["name"]:
        bad.append("the exporter does not read the volume the agent writes its metrics into")
    elif not exp_mount.get("readOnly"):
        bad.append("the exporter mounts the metrics directory writable")
    if "--collector.disable-defaults" not in args:
        bad.append("the exporter runs node_exporter's default collectors (OpenShift's node-exporter has those)")
    listen = args.get("--web.listen-address", "")
    port = int(listen.rsplit(":", 1)[-1]) if re.search(r":\d+$", listen) else None
    if not listen.startswith("$(NODE_IP)") and not listen.startswith("[$(NODE_IP)]"):
        bad.append(f"the exporter listens on {listen!r}, not the node's address only")
    sc = exp.get("securityContext") or {}
    if not sc.get("runAsNonRoot") or (sc.get("runAsUser") or 0) == 0:
        bad.append("the exporter runs as root")
    services = [s for s in by_kind(objects, "Service")
                if all(template["metadata"]["labels"].get(k) == v for k, v in (s["spec"].get("selector") or {}).items())
                and s["spec"].get("selector")]
    if len(services) != 1:
        return bad + [f"{len(services)} Services select the agents"]
    svc = services[0]
    sport = svc["spec"]["ports"][0]
    if sport.get("targetPort") != port:
        bad.append(f"the Service targets {sport.get('targetPort')}, the exporter listens on {port}")
    monitors = by_kind(objects, "ServiceMonitor")
    if len(monitors) != 1:
        return bad + [f"{len(monitors)} ServiceMonitors"]
    sm = monitors[0]
    if sm["metadata"].get("namespace") != svc["metadata"].get("namespace"):
        bad.append("the ServiceMonitor is not in the Service's namespace (user-workload monitoring looks only there)")
    if any(svc["metadata"].get("labels", {}).get(k) != v for k, v in sm["spec"]["selector"].get("matchLabels", {}).items()):
        bad.append("the ServiceMonitor does not select the Service")
    if [e.get("port") for e in sm["spec"]["endpoints"]] != [sport.get("name")]:
        bad.append(f"the ServiceMonitor scrapes {[e.get('port') for e in sm['spec']['endpoints']]}, not {sport.get('name')}")
    rules = by_kind(objects, "PrometheusRule")
    if not rules or rules[0]["metadata"].get("namespace") != svc["metadata"].get("namespace"):
        bad.append("the alerts are not a PrometheusRule in the agents' namespace")
    return bad


def machineconfig_problems(objects, pools):
    """The MachineConfig labels the directory the pod mounts from the host (container_file_t, level
    s0), before the kubelet starts, for a pool that exists."""
    bad = []
    ds = by_kind(objects, "DaemonSet")[0]
    host = [v["hostPath"]["path"] for v in ds["spec"]["template"]["spec"]["volumes"] if "hostPath" in v]
    mcs = by_kind(objects, "MachineConfig")
    if len(mcs) != 1:
        return [f"{len(mcs)} MachineConfigs"]
    mc = mcs[0]
    role = mc["metadata"]["labels"].get("machineconfiguration.openshift.io/role")
    if not any(role in e.get("values", []) for p in pools for e in p["spec"]["machineConfigSelector"].get("matchExpressions", [])):
        bad.append(f"role {role}: no MachineConfigPool of the OpenShift overlay takes it")
    units = mc["spec"]["config"]["systemd"]["units"]
    text = "\n".join(u.get("contents", "") for u in units if u.get("enabled"))
    for path in host:
        if not re.search(rf"chcon -t container_file_t -l s0 {re.escape(path)}$", text, re.M):
            bad.append(f"{path}: not labelled container_file_t (s0)")
    if "Before=kubelet.service" not in text:
        bad.append("the unit does not run before the kubelet")
    return bad


class OpenShift(unittest.TestCase):
    def setUp(self):
        self.objects = copy.deepcopy(kit.render(LEAF))
        self.scc = by_kind(self.objects, "SecurityContextConstraints")[0]

    def test_the_scc_admits_the_agent_and_allows_nothing_more(self):
        template = pod_of(self.objects)
        self.assertEqual(admission_problems(self.scc, template), [])
        self.assertEqual(excess_problems(self.scc, template), [])
        self.assertEqual(grant_problems(self.objects), [])

    def test_restricted_v2_would_not_admit_it(self):
        # Why an SCC at all: restricted-v2 (OpenShift's default) allows no host network, no
        # hostPath and no UID 0.
        restricted = {"allowHostNetwork": False, "allowHostDirVolumePlugin": False, "volumes": [
            "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"],
            "runAsUser": {"type": "MustRunAsRange"}, "requiredDropCapabilities": ["ALL"],
            "allowPrivilegeEscalation": False, "seccompProfiles": ["runtime/default"]}
        bad = " ".join(admission_problems(restricted, pod_of(self.objects)))
        for what in ("hostNetwork", "hostPath", "UID 0"):
            self.assertIn(what, bad)

    def test_the_agent_keeps_its_least_privilege(self):
        self.assertEqual(test_node_health.daemonset_problems(self.objects, textfile_on_host=False), [])

    def test_the_metrics_reach_user_workload_monitoring(self):
        self.assertEqual(metrics_path_problems(self.objects), [])

    def test_the_machineconfig_labels_the_hostpath(self):
        pools = by_kind(kit.render("overlays/openshift-sriov"), "MachineConfigPool")
        self.assertEqual(machineconfig_problems(self.objects, pools), [])

    def test_each_rule_reports_its_fault(self):
        def edit(change):
            objects = copy.deepcopy(self.objects)
            change({(o["kind"]): o for o in objects}, pod_of(objects)["spec"])
            return objects

        def scc_of(o):
            return by_kind(o, "SecurityContextConstraints")[0]

        def c(spec, i=0):
            return spec["containers"][i]

        # Admission: an added capability, a privileged exporter, a port on the host.
        for change in (lambda k, s: c(s)["securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
                       lambda k, s: c(s, 1)["securityContext"].update(privileged=True),
                       lambda k, s: c(s, 1).update(ports=[{"containerPort": 18518}])):
            o = edit(change)
            self.assertTrue(admission_problems(scc_of(o), pod_of(o)))
        # Excess: each allowance the pod does not use.
        for change in (lambda k, s: k["SecurityContextConstraints"].update(allowHostPID=True),
                       lambda k, s: k["SecurityContextConstraints"].update(allowHostPorts=True),
                       lambda k, s: k["SecurityContextConstraints"].update(allowedCapabilities=["IPC_LOCK"]),
                       lambda k, s: k["SecurityContextConstraints"].update(volumes=["*"]),
                       lambda k, s: k["SecurityContextConstraints"].update(readOnlyRootFilesystem=False),
                       lambda k, s: k["SecurityContextConstraints"].update(users=["system:admin"]),
                       lambda k, s: k["SecurityContextConstraints"].update(seLinuxContext={"type": "MustRunAs", "seLinuxOptions": {"type": "spc_t"}})):
            o = edit(change)
            self.assertTrue(excess_problems(scc_of(o), pod_of(o)))
        # Grant: to every service account of the namespace.
        o = edit(lambda k, s: k["RoleBinding"].update(subjects=[{"kind": "Group", "name": "system:serviceaccounts:nccl-node-health",
                                                                  "apiGroup": "rbac.authorization.k8s.io"}]))
        self.assertTrue(grant_problems(o))
        # The metrics path: the exporter reading another directory, listening everywhere, as root.
        for change in (lambda k, s: c(s, 1)["volumeMounts"][0].update(mountPath="/elsewhere"),
                       lambda k, s: c(s, 1)["args"].__setitem__(-1, "--web.listen-address=:18518"),
                       lambda k, s: c(s, 1)["securityContext"].update(runAsUser=0, runAsNonRoot=False),
                       lambda k, s: k["ServiceMonitor"]["spec"]["endpoints"][0].update(port="http"),
                       lambda k, s: k["Service"]["spec"]["ports"][0].update(targetPort=9100)):
            self.assertTrue(metrics_path_problems(edit(change)))
        # The agent: its metrics back on a second hostPath.
        o = edit(lambda k, s: s["volumes"].__setitem__(1, {"name": "textfile", "hostPath": {"path": "/var/lib/node_exporter"}}))
        self.assertTrue(test_node_health.daemonset_problems(o, textfile_on_host=False))
        # The MachineConfig: another directory, or a pool nobody has.
        pools = by_kind(kit.render("overlays/openshift-sriov"), "MachineConfigPool")
        o = edit(lambda k, s: s["volumes"][0]["hostPath"].update(path="/etc/nfd/features.d"))
        self.assertTrue(machineconfig_problems(o, pools))
        o = edit(lambda k, s: k["MachineConfig"]["metadata"]["labels"].update({"machineconfiguration.openshift.io/role": "gpu"}))
        self.assertTrue(machineconfig_problems(o, pools))


if __name__ == "__main__":
    unittest.main()
