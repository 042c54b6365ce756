"""The rules every training pod of the kit keeps, as functions from rendered objects to violations
(strings; none when the rule holds). test_policy.py runs them on every workload overlay and shows
each one failing on a deliberately broken copy.

A training container is one that asks for GPUs (`nvidia.com/gpu` in its limits): that is the
container NCCL runs in, so it is the one nccl-wrap must start.
"""

import json
import re

import kit

NCCL_WRAP = "/opt/nccl-wrap/nccl-wrap"
INSTALL_DIR = "/opt/nccl-wrap"
PODNETINFO = "/etc/podnetinfo"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
PREFLIGHT_LABEL = ("app.kubernetes.io/component", "nccl-preflight")
PREFLIGHT_COMMAND = ["/bin/sh", "/opt/nccl-preflight/preflight.sh"]
GPU = "nvidia.com/gpu"
# Device-plugin resources that carry an RDMA device: the SR-IOV device plugin under OpenShift's
# prefix or the Network Operator's, and the RDMA shared device plugin's rdma/ prefix.
RDMA_RESOURCE = re.compile(r"^(openshift\.io|nvidia\.com|intel\.com|mellanox\.com)/(?!gpu$|mig-)[A-Za-z0-9_.-]+$|^rdma/[A-Za-z0-9_.-]+$")


def training_pods(objects):
    """(label, pod template, [training containers]) for every pod template that asks for GPUs."""
    out = []
    for obj in objects:
        for where, template in kit.pod_templates(obj):
            spec = template.get("spec") or {}
            trainers = [c for c in spec.get("containers") or []
                        if GPU in ((c.get("resources") or {}).get("limits") or {})]
            if trainers:
                out.append((f"{kit.name_of(obj)} {where}", template, trainers))
    return out


def is_preflight(template):
    labels = (template.get("metadata") or {}).get("labels") or {}
    return labels.get(PREFLIGHT_LABEL[0]) == PREFLIGHT_LABEL[1]


def rdma_resources(container):
    limits = (container.get("resources") or {}).get("limits") or {}
    return {k: v for k, v in limits.items() if RDMA_RESOURCE.match(k)}


def mount_of(container, path):
    for m in container.get("volumeMounts") or []:
        if m.get("mountPath") == path:
            return m
    return None


def volume(template, name):
    for v in (template.get("spec") or {}).get("volumes") or []:
        if v.get("name") == name:
            return v
    return None


# ---- one rule each -----------------------------------------------------------------------------

def check_command(objects):
    """The training command goes through nccl-wrap: [nccl-wrap, --, the user's command...]. The
    preflight pod runs its script instead, which runs nccl-wrap doctor and ping."""
    bad = []
    for label, template, trainers in training_pods(objects):
        for c in trainers:
            command = c.get("command") or []
            if is_preflight(template):
                if command != PREFLIGHT_COMMAND:
                    bad.append(f"{label} {c['name']}: preflight command is {command}, not {PREFLIGHT_COMMAND}")
                continue
            if command[:2] != [NCCL_WRAP, "--"]:
                bad.append(f"{label} {c['name']}: command {command} does not start with [{NCCL_WRAP}, --]")
            elif not (command[2:] or c.get("args")):
                bad.append(f"{label} {c['name']}: nothing to run after `nccl-wrap --`")
    return bad


def check_ipc_lock(objects):
    bad = []
    for label, _, trainers in training_pods(objects):
        for c in trainers:
            added = (((c.get("securityContext") or {}).get("capabilities") or {}).get("add")) or []
            if "IPC_LOCK" not in added and "CAP_IPC_LOCK" not in added:
                bad.append(f"{label} {c['name']}: IPC_LOCK is not added (RDMA registration bound by RLIMIT_MEMLOCK)")
    return bad


def check_rdma_resource(objects):
    bad = []
    for label, _, trainers in training_pods(objects):
        for c in trainers:
            if not rdma_resources(c):
                bad.append(f"{label} {c['name']}: no RDMA device-plugin resource in limits "
                           f"(openshift.io/..., nvidia.com/..., rdma/...)")
    return bad


def check_init_container(objects):
    """An init container runs `nccl-wrap install /opt/nccl-wrap` into an emptyDir that the training
    container mounts at /opt/nccl-wrap."""
    bad = []
    for label, template, trainers in training_pods(objects):
        spec = template.get("spec") or {}
        installers = [i for i in spec.get("initContainers") or []
                      if (i.get("command") or [])[1:] == ["install", INSTALL_DIR]
                      and (i.get("command") or [""])[0].endswith("nccl-wrap")]
        if not installers:
            bad.append(f"{label}: no init container runs `nccl-wrap install {INSTALL_DIR}`")
            continue
        install_mount = mount_of(installers[0], INSTALL_DIR)
        if install_mount is None:
            bad.append(f"{label}: the install init container mounts nothing at {INSTALL_DIR}")
            continue
        v = volume(template, install_mount.get("name"))
        if v is None or "emptyDir" not in v:
            bad.append(f"{label}: volume {install_mount.get('name')} is not an emptyDir")
        for c in trainers:
            m = mount_of(c, INSTALL_DIR)
            if m is None or m.get("name") != install_mount.get("name"):
                bad.append(f"{label} {c['name']}: does not mount the install volume at {INSTALL_DIR}")
    return bad


def check_require_rdma_and_podnetinfo(objects):
    """NCCL_WRAP_REQUIRE_RDMA=1, and the network-status annotation at /etc/podnetinfo/annotations."""
    bad = []
    for label, template, trainers in training_pods(objects):
        for c in trainers:
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            if env.get("NCCL_WRAP_REQUIRE_RDMA") != "1":
                bad.append(f"{label} {c['name']}: NCCL_WRAP_REQUIRE_RDMA is not \"1\"")
            m = mount_of(c, PODNETINFO)
            v = volume(template, m.get("name")) if m else None
            items = ((v or {}).get("downwardAPI") or {}).get("items") or []
            if not any(i.get("path") == "annotations" and (i.get("fieldRef") or {}).get("fieldPath") == "metadata.annotations"
                       for i in items):
                bad.append(f"{label} {c['name']}: no downward-API annotations file at {PODNETINFO}/annotations")
    return bad


def check_networks_match_resources(objects):
    """Each training pod names as many Multus networks as it holds RDMA devices: a network without
    its device, or a device without its network, leaves a rail unused."""
    bad = []
    for label, template, trainers in training_pods(objects):
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        networks = [n.strip() for n in (annotations.get(NETWORKS_ANNOTATION) or "").split(",") if n.strip()]
        devices = sum(int(v) for c in trainers for v in rdma_resources(c).values())
        if len(networks) != devices:
            bad.append(f"{label}: {len(networks)} network(s) in {NETWORKS_ANNOTATION} for {devices} RDMA device(s)")
    return bad


def check_same_pattern_as_base(objects, base_template):
    """The nccl-wrap parts of every training pod are those of deploy/base's PodTemplate: the install
    init container, the volumes it and the trainer share, the trainer's capabilities and mounts."""
    bad = []
    base_spec = base_template["spec"]
    base_trainer = base_spec["containers"][0]
    want_init = base_spec["initContainers"]
    shared = {m["name"] for m in base_trainer["volumeMounts"]}
    want_volumes = {v["name"]: v for v in base_spec["volumes"] if v["name"] in shared}
    for label, template, trainers in training_pods(objects):
        spec = template.get("spec") or {}
        if spec.get("initContainers") != want_init:
            bad.append(f"{label}: init containers differ from deploy/base's pattern")
        for name, want in want_volumes.items():
            got = volume(template, name)
            if name == "dshm" and is_preflight(template):
                continue  # the preflight runs no NCCL collective, so it needs no large /dev/shm
            if got != want:
                bad.append(f"{label}: volume {name} differs from deploy/base's pattern")
        for c in trainers:
            if (c.get("securityContext") or {}) != base_trainer["securityContext"]:
                bad.append(f"{label} {c['name']}: securityContext differs from deploy/base's pattern")
            if c.get("envFrom") != base_trainer["envFrom"]:
                bad.append(f"{label} {c['name']}: envFrom differs from deploy/base's pattern (site NCCL settings)")
    return bad


GATE_PORT = 18516
LAUNCHER_KINDS = ("PyTorchJob", "JobSet")


def check_gate(objects):
    """The launchers' training containers turn the gate on (NCCL_WRAP_GATE=1) and declare its TCP
    port (NCCL_WRAP_GATE_PORT, default 18516), never the launcher's MASTER_PORT."""
    bad = []
    for label, template, trainers in training_pods(objects):
        if not label.startswith(LAUNCHER_KINDS):
            continue
        for c in trainers:
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            if env.get("NCCL_WRAP_GATE") != "1":
                bad.append(f"{label} {c['name']}: NCCL_WRAP_GATE is not \"1\"")
            port = int(env.get("NCCL_WRAP_GATE_PORT") or GATE_PORT)
            if str(port) in (env.get("MASTER_PORT"), env.get("PET_MASTER_PORT")):
                bad.append(f"{label} {c['name']}: the gate's port {port} is the launcher's MASTER_PORT")
            if not any(p.get("containerPort") == port and p.get("protocol", "TCP") == "TCP" for p in c.get("ports") or []):
                bad.append(f"{label} {c['name']}: the gate's port {port}/TCP is not among the container's ports")
    return bad


TRAINING_RULES = [check_command, check_ipc_lock, check_rdma_resource, check_init_container,
                  check_require_rdma_and_podnetinfo, check_networks_match_resources]


# ---- the cluster side of an overlay and its workloads agree -------------------------------------

def _by_kind(objects, kind):
    return [o for o in objects if o.get("kind") == kind]


def cluster_names(cluster):
    """(resource names pods may request, network names pods may attach, namespace the networks
    are rendered into) that an overlay's cluster objects provide."""
    resources, networks, namespaces = set(), set(), set()
    policy_resources = {p["spec"]["resourceName"] for p in _by_kind(cluster, "SriovNetworkNodePolicy")}
    for p in policy_resources:
        resources.add(f"openshift.io/{p}")
    for n in _by_kind(cluster, "SriovNetwork"):
        if n["spec"]["resourceName"] in policy_resources:
            networks.add(n["metadata"]["name"])
        namespaces.add(n["spec"].get("networkNamespace"))
    plugin = {}
    for ncp in _by_kind(cluster, "NicClusterPolicy"):
        config = json.loads(ncp["spec"]["sriovDevicePlugin"]["config"])
        for r in config["resourceList"]:
            plugin[r["resourceName"]] = r.get("resourcePrefix", "nvidia.com")
            resources.add(f"{r.get('resourcePrefix', 'nvidia.com')}/{r['resourceName']}")
    pools = {p["metadata"]["name"] for p in _by_kind(cluster, "IPPool")}
    for n in _by_kind(cluster, "HostDeviceNetwork"):
        pool = json.loads(n["spec"]["ipam"]).get("poolName")
        if n["spec"]["resourceName"] in plugin and pool in pools:
            networks.add(n["metadata"]["name"])
        namespaces.add(n["spec"].get("networkNamespace"))
    return resources, networks, namespaces


def check_overlay_consistency(cluster, workloads):
    """Every RDMA resource a pod requests is one the overlay's device plugin advertises, every
    network it names is one the overlay defines (tied to an advertised resource and, for nv-ipam,
    an existing pool), and in the namespace the pods run in."""
    bad = []
    resources, networks, namespaces = cluster_names(cluster)
    for label, template, trainers in training_pods(workloads):
        for c in trainers:
            for r in rdma_resources(c):
                if r not in resources:
                    bad.append(f"{label} {c['name']}: requests {r}, which no device-plugin resource of the overlay provides")
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        for n in (annotations.get(NETWORKS_ANNOTATION) or "").split(","):
            if n.strip() and n.strip() not in networks:
                bad.append(f"{label}: network {n.strip()} is not defined by the overlay (or not tied to its resources)")
    for obj in workloads:
        if training_pods([obj]) and obj.get("metadata", {}).get("namespace") not in namespaces:
            bad.append(f"{kit.name_of(obj)}: namespace {obj.get('metadata', {}).get('namespace')} "
                       f"is not where the networks are rendered ({sorted(namespaces)})")
    return bad


def check_preflight_job(objects):
    """completions = parallelism = ping's ring size; the headless Service selects the pods and is
    their subdomain; the peer template names the Job and the Service."""
    bad = []
    services = {s["metadata"]["name"]: s for s in _by_kind(objects, "Service")}
    for job in _by_kind(objects, "Job"):
        template = job["spec"]["template"]
        if not is_preflight(template):
            continue
        name = job["metadata"]["name"]
        container = template["spec"]["containers"][0]
        env = {e.get("name"): e.get("value") for e in container.get("env") or []}
        size = env.get("NCCL_WRAP_PING_SIZE")
        if not (job["spec"].get("completions") == job["spec"].get("parallelism") == (int(size) if (size or "").isdigit() else None)):
            bad.append(f"Job/{name}: completions {job['spec'].get('completions')}, parallelism "
                       f"{job['spec'].get('parallelism')} and NCCL_WRAP_PING_SIZE {size} differ")
        if job["spec"].get("completionMode") != "Indexed":
            bad.append(f"Job/{name}: not an Indexed Job (no JOB_COMPLETION_INDEX, no stable host names)")
        subdomain = template["spec"].get("subdomain")
        service = services.get(subdomain)
        labels = template.get("metadata", {}).get("labels") or {}
        if service is None:
            bad.append(f"Job/{name}: subdomain {subdomain} is no Service of the kit")
        else:
            if service["spec"].get("clusterIP") != "None":
                bad.append(f"Service/{subdomain}: not headless, so pods get no per-pod DNS names")
            selector = service["spec"].get("selector") or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                bad.append(f"Service/{subdomain}: selector {selector} does not select the preflight pods")
        want = f"{name}-{{index}}.{subdomain}"
        if env.get("NCCL_WRAP_PING_PEER_TEMPLATE") != want:
            bad.append(f"Job/{name}: NCCL_WRAP_PING_PEER_TEMPLATE {env.get('NCCL_WRAP_PING_PEER_TEMPLATE')} is not {want}")
        port = env.get("NCCL_WRAP_PING_PORT") or "18515"
        ports = {str(p.get("containerPort")) for p in container.get("ports") or []}
        if port not in ports:
            bad.append(f"Job/{name}: ping listens on {port}, which the container does not declare ({sorted(ports)})")
        for wanted in ("NODE_NAME", "POD_NAME"):
            if wanted not in {e.get("name") for e in container.get("env") or []}:
                bad.append(f"Job/{name}: {wanted} is not set (the report tells nodes apart by it)")
        anti = (((template["spec"].get("affinity") or {}).get("podAntiAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution")) or []
        if not any(t.get("topologyKey") == "kubernetes.io/hostname"
                   and all(labels.get(k) == v for k, v in ((t.get("labelSelector") or {}).get("matchLabels") or {}).items())
                   for t in anti):
            bad.append(f"Job/{name}: no required anti-affinity on kubernetes.io/hostname: two pods could share a node")
    return bad
