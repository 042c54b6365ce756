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
        if (spec.get("initContainers") or [])[:len(want_init)] != want_init:
            bad.append(f"{label}: init containers differ from deploy/base's pattern (which come first, unchanged)")
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


def runs_gate(container):
    """Whether a container runs nccl-wrap's gate: NCCL_WRAP_GATE=1, or `--gate` before its `--`."""
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    argv = (container.get("command") or []) + (container.get("args") or [])
    before = argv[:argv.index("--")] if "--" in argv else argv
    return env.get("NCCL_WRAP_GATE") == "1" or (bool(before) and before[0].endswith("nccl-wrap") and "--gate" in before)


def gate_runners(template, trainers):
    """The containers of a pod that run the gate: its init containers (the Trainer v2 runtime's
    preflight slot) and its training containers."""
    spec = template.get("spec") or {}
    return [c for c in (spec.get("initContainers") or []) + trainers if runs_gate(c)]


def check_gate(objects):
    """Every launcher pod runs the gate once: in its training container (NCCL_WRAP_GATE=1) or in an
    init container before it (`nccl-wrap --gate`); the container that runs it declares its TCP
    port (NCCL_WRAP_GATE_PORT, default 18516), never the launcher's MASTER_PORT."""
    bad = []
    for label, template, trainers in training_pods(objects):
        if not label.startswith(LAUNCHER_KINDS):
            continue
        runners = gate_runners(template, trainers)
        if not runners:
            names = ", ".join(c["name"] for c in trainers)
            bad.append(f"{label} {names}: NCCL_WRAP_GATE is not \"1\" and no init container runs `nccl-wrap --gate`")
        elif len(runners) > 1:
            bad.append(f"{label}: the gate runs {len(runners)} times ({', '.join(c['name'] for c in runners)})")
        for c in runners:
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            port = int(env.get("NCCL_WRAP_GATE_PORT") or GATE_PORT)
            if str(port) in (env.get("MASTER_PORT"), env.get("PET_MASTER_PORT")):
                bad.append(f"{label} {c['name']}: the gate's port {port} is the launcher's MASTER_PORT")
            if not any(p.get("containerPort") == port and p.get("protocol", "TCP") == "TCP" for p in c.get("ports") or []):
                bad.append(f"{label} {c['name']}: the gate's port {port}/TCP is not among the container's ports")
    return bad


# The directories of the PATH a container runtime sets when the image sets none, and every
# training image keeps: a file mounted at one of them is found by `kubectl exec POD -- nccl-wrap`.
STANDARD_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def on_path(template, container):
    """Where `nccl-wrap` resolves on the container's PATH: the install volume's file mounted into a
    standard PATH directory, or a directory the container's own PATH names that holds the image's
    binary (its command's). None when it does not resolve."""
    install = None
    for i in (template.get("spec") or {}).get("initContainers") or []:
        if (i.get("command") or [])[1:] == ["install", INSTALL_DIR]:
            m = mount_of(i, INSTALL_DIR)
            install = m and m.get("name")
    for m in container.get("volumeMounts") or []:
        directory, _, name = (m.get("mountPath") or "").rpartition("/")
        if name == "nccl-wrap" and directory in STANDARD_PATH and m.get("name") == install \
                and m.get("subPath") == "nccl-wrap":
            return m["mountPath"]
    env = {e.get("name"): e.get("value") for e in container.get("env") or []}
    binary = (container.get("command") or [""])[0]
    if binary.endswith("/nccl-wrap") and env.get("PATH"):
        directory = binary.rpartition("/")[0] or "/"
        if directory in env["PATH"].split(":"):
            return binary
    return None


def check_nccl_wrap_on_path(objects):
    """`nccl-wrap` is on PATH in every training and preflight container, so `kubectl exec POD --
    nccl-wrap status` works (the binary itself lives at /opt/nccl-wrap/nccl-wrap)."""
    bad = []
    for label, template, trainers in training_pods(objects):
        for c in trainers:
            if on_path(template, c) is None:
                bad.append(f"{label} {c['name']}: nccl-wrap is not on PATH (mount the installed file at "
                           f"/usr/local/bin/nccl-wrap with subPath nccl-wrap)")
    return bad


STALL_MS_MIN = 1000


def check_supervision(objects):
    """Every training container (the preflight aside: it runs doctor and ping, no job) has the
    supervisor name stalled ranks (NCCL_WRAP_STALL_MS: 1000 or more), and writes no --report
    where nothing can read it after the container ends (an emptyDir or the container's own file
    system): only into a PersistentVolumeClaim's mount."""
    bad = []
    for label, template, trainers in training_pods(objects):
        if is_preflight(template):
            continue
        for c in trainers:
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            stall = env.get("NCCL_WRAP_STALL_MS")
            if not (stall or "").isdigit() or int(stall) < STALL_MS_MIN:
                bad.append(f"{label} {c['name']}: NCCL_WRAP_STALL_MS is {stall!r}, not {STALL_MS_MIN} ms or more")
            report = env.get("NCCL_WRAP_REPORT")
            if report:
                mounts = sorted((m for m in c.get("volumeMounts") or [] if report.startswith(m["mountPath"].rstrip("/") + "/")),
                                key=lambda m: -len(m["mountPath"]))
                v = volume(template, mounts[0]["name"]) if mounts else None
                if v is None or "persistentVolumeClaim" not in v:
                    bad.append(f"{label} {c['name']}: NCCL_WRAP_REPORT {report} is not on a PersistentVolumeClaim: "
                               f"the report would be gone with the container")
    return bad


TRAINING_RULES = [check_command, check_ipc_lock, check_rdma_resource, check_init_container,
                  check_require_rdma_and_podnetinfo, check_networks_match_resources,
                  check_nccl_wrap_on_path, check_supervision]


# ---- the cluster side of an overlay and its workloads agree -------------------------------------

def _by_kind(objects, kind):
    return [o for o in objects if o.get("kind") == kind]


# The RDMA shared device plugin's default resource prefix (k8s-rdma-shared-dev-plugin).
SHARED_PREFIX = "rdma"
# The Network Operator's networks that give a pod a child of a host net device (`master`) on a
# shared HCA: macvlan for RoCE, IPoIB for InfiniBand. Their NetworkAttachmentDefinitions name no
# device-plugin resource, so the pod must request the HCA's resource itself.
SHARED_NETWORK_KINDS = ("MacvlanNetwork", "IPoIBNetwork")


def shared_device_config(ncp):
    """The RDMA shared device plugin's configList entries of a NicClusterPolicy ([] without the
    plugin or its config)."""
    plugin = (ncp.get("spec") or {}).get("rdmaSharedDevicePlugin") or {}
    if not plugin.get("config"):
        return []
    return json.loads(plugin["config"]).get("configList") or []


def shared_resources_by_ifname(cluster):
    """{net device name: rdma/<resourceName>} from the ifNames selectors (or the older `devices`
    list) of the shared device plugin's resources."""
    by_ifname = {}
    for ncp in _by_kind(cluster, "NicClusterPolicy"):
        for r in shared_device_config(ncp):
            names = ((r.get("selectors") or {}).get("ifNames") or []) + (r.get("devices") or [])
            for name in names:
                by_ifname[name] = f"{r.get('resourcePrefix', SHARED_PREFIX)}/{r['resourceName']}"
    return by_ifname


def network_resources(cluster):
    """{network name: the device-plugin resource a pod attaching it must hold} for every network
    an overlay defines that is tied to a resource the overlay advertises and, for nv-ipam, to an
    existing pool. SR-IOV and host-device networks name their resource; a macvlan or IPoIB
    network is tied to the shared resource that selects its master."""
    out = {}
    policy_resources = {p["spec"]["resourceName"] for p in _by_kind(cluster, "SriovNetworkNodePolicy")}
    for n in _by_kind(cluster, "SriovNetwork"):
        if n["spec"]["resourceName"] in policy_resources:
            out[n["metadata"]["name"]] = f"openshift.io/{n['spec']['resourceName']}"
    plugin = {}
    for ncp in _by_kind(cluster, "NicClusterPolicy"):
        sriov = (ncp.get("spec") or {}).get("sriovDevicePlugin") or {}
        for r in (json.loads(sriov["config"]).get("resourceList") or []) if sriov.get("config") else []:
            plugin[r["resourceName"]] = r.get("resourcePrefix", "nvidia.com")
    pools = {p["metadata"]["name"] for p in _by_kind(cluster, "IPPool")}

    def pool_ok(n):
        ipam = json.loads(n["spec"].get("ipam") or "{}")
        return ipam.get("type") != "nv-ipam" or ipam.get("poolName") in pools

    for n in _by_kind(cluster, "HostDeviceNetwork"):
        if n["spec"]["resourceName"] in plugin and pool_ok(n):
            out[n["metadata"]["name"]] = f"{plugin[n['spec']['resourceName']]}/{n['spec']['resourceName']}"
    by_ifname = shared_resources_by_ifname(cluster)
    for kind in SHARED_NETWORK_KINDS:
        for n in _by_kind(cluster, kind):
            if n["spec"].get("master") in by_ifname and pool_ok(n):
                out[n["metadata"]["name"]] = by_ifname[n["spec"]["master"]]
    return out


def cluster_names(cluster):
    """(resource names pods may request, network names pods may attach, namespace the networks
    are rendered into) that an overlay's cluster objects provide."""
    resources, namespaces = set(), set()
    for p in _by_kind(cluster, "SriovNetworkNodePolicy"):
        resources.add(f"openshift.io/{p['spec']['resourceName']}")
    for ncp in _by_kind(cluster, "NicClusterPolicy"):
        sriov = (ncp.get("spec") or {}).get("sriovDevicePlugin") or {}
        for r in (json.loads(sriov["config"]).get("resourceList") or []) if sriov.get("config") else []:
            resources.add(f"{r.get('resourcePrefix', 'nvidia.com')}/{r['resourceName']}")
        for r in shared_device_config(ncp):
            resources.add(f"{r.get('resourcePrefix', SHARED_PREFIX)}/{r['resourceName']}")
    for kind in ("SriovNetwork", "HostDeviceNetwork") + SHARED_NETWORK_KINDS:
        for n in _by_kind(cluster, kind):
            namespaces.add(n["spec"].get("networkNamespace"))
    return resources, set(network_resources(cluster)), namespaces


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
        # A cluster-scoped runtime's pods run in each TrainJob's namespace, checked with the TrainJob.
        if training_pods([obj]) and not kit.is_cluster_scoped(obj) and obj.get("metadata", {}).get("namespace") not in namespaces:
            bad.append(f"{kit.name_of(obj)}: namespace {obj.get('metadata', {}).get('namespace')} "
                       f"is not where the networks are rendered ({sorted(namespaces)})")
    return bad


def pod_networks(template):
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    return [n.strip() for n in (annotations.get(NETWORKS_ANNOTATION) or "").split(",") if n.strip()]


def check_networks_pair_with_resources(cluster, workloads):
    """Each network a training pod attaches comes with its device: the pod holds the resource the
    network is tied to (for a macvlan or IPoIB network, the shared resource selecting its master;
    nothing adds it for the pod), and holds no RDMA resource that none of its networks uses. A
    pod that attaches rail 3's network but holds rail 2's HCA twice has an address on a device it
    cannot open."""
    bad = []
    needs = network_resources(cluster)
    for label, template, trainers in training_pods(workloads):
        held = {}
        for c in trainers:
            for r, v in rdma_resources(c).items():
                held[r] = held.get(r, 0) + int(v)
        wanted = {}
        for n in pod_networks(template):
            if n in needs:
                wanted[needs[n]] = wanted.get(needs[n], 0) + 1
        for r, count in sorted(wanted.items()):
            if held.get(r, 0) < count:
                bad.append(f"{label}: attaches {count} network(s) on {r} but holds {held.get(r, 0)} of it")
        for r in sorted(set(held) - set(wanted)):
            bad.append(f"{label}: holds {r}, which none of its networks uses")
    return bad


def check_shared_devices(cluster, workloads):
    """The shared-device variant: the NicClusterPolicy runs the RDMA shared device plugin and not
    the SR-IOV one; each of its resources selects one HCA by net device name (a unit is then one
    HCA, one rail) and admits at most as many pods per node as the rail's pool gives a node
    addresses; each macvlan or IPoIB network sits on the net device of one such resource, and
    the CNI it needs is deployed; no SR-IOV or host-device object is rendered; training pods hold
    one unit of each shared resource they use and no other RDMA resource."""
    bad = []
    policies = _by_kind(cluster, "NicClusterPolicy")
    if len(policies) != 1:
        return [f"{len(policies)} NicClusterPolicy objects, not 1"]
    spec = policies[0].get("spec") or {}
    if "sriovDevicePlugin" in spec:
        bad.append("NicClusterPolicy: deploys sriovDevicePlugin: SR-IOV, not shared devices")
    if not (spec.get("rdmaSharedDevicePlugin") or {}).get("config"):
        bad.append("NicClusterPolicy: no rdmaSharedDevicePlugin with a config")
    for kind in ("SriovNetworkNodePolicy", "SriovNetwork", "HostDeviceNetwork"):
        for o in _by_kind(cluster, kind):
            bad.append(f"{kit.name_of(o)}: an SR-IOV or host-device object in the shared-device variant")
    entries = shared_device_config(policies[0])
    if not entries:
        bad.append("NicClusterPolicy: the shared device plugin's configList is empty")
    names, ifnames, max_pods = set(), {}, {}
    for r in entries:
        name = r.get("resourceName")
        if not name or name in names:
            bad.append(f"rdmaSharedDevicePlugin: resourceName {name!r} is missing or repeated")
        names.add(name)
        selectors = r.get("selectors") or {}
        devices = (selectors.get("ifNames") or []) + (r.get("devices") or [])
        if len(devices) != 1:
            bad.append(f"rdmaSharedDevicePlugin {name}: selects {len(devices)} net devices {devices}, "
                       f"not one (a unit would not be one HCA, one rail)")
        for d in devices:
            if d in ifnames:
                bad.append(f"rdmaSharedDevicePlugin {name}: {d} is also {ifnames[d]}'s device")
            ifnames[d] = name
        if "15b3" not in (selectors.get("vendors") or ["15b3"]):
            bad.append(f"rdmaSharedDevicePlugin {name}: vendors {selectors.get('vendors')} leave out 15b3 (NVIDIA/Mellanox)")
        hca_max = r.get("rdmaHcaMax")
        if not isinstance(hca_max, int) or isinstance(hca_max, bool) or hca_max < 1:
            bad.append(f"rdmaSharedDevicePlugin {name}: rdmaHcaMax {hca_max!r} is not a positive integer")
        else:
            max_pods[f"{r.get('resourcePrefix', SHARED_PREFIX)}/{name}"] = hca_max
    secondary = spec.get("secondaryNetwork") or {}
    if not secondary.get("multus"):
        bad.append("NicClusterPolicy: no secondaryNetwork.multus: nothing attaches the pods' networks")
    pools = {p["metadata"]["name"]: p for p in _by_kind(cluster, "IPPool")}
    by_ifname = shared_resources_by_ifname(cluster)
    shared_networks = [n for kind in SHARED_NETWORK_KINDS for n in _by_kind(cluster, kind)]
    if not shared_networks:
        bad.append("no MacvlanNetwork or IPoIBNetwork: the pods have no rail networks")
    for n in shared_networks:
        label, nspec = kit.name_of(n), n.get("spec") or {}
        if n["kind"] == "MacvlanNetwork":
            if not secondary.get("cniPlugins"):
                bad.append(f"{label}: no secondaryNetwork.cniPlugins, which ships the macvlan CNI")
            if nspec.get("mode") == "passthru":
                bad.append(f"{label}: passthru mode hands the PF to one pod: nothing is shared")
        if n["kind"] == "IPoIBNetwork" and not secondary.get("ipoib"):
            bad.append(f"{label}: no secondaryNetwork.ipoib, which ships the IPoIB CNI")
        master = nspec.get("master")
        if master not in by_ifname:
            bad.append(f"{label}: master {master!r} is the device of no shared resource ({sorted(by_ifname)})")
        ipam = json.loads(nspec.get("ipam") or "{}")
        if ipam.get("type") == "nv-ipam":
            if not spec.get("nvIpam"):
                bad.append(f"{label}: uses nv-ipam, which the NicClusterPolicy does not deploy")
            pool = pools.get(ipam.get("poolName"))
            if pool is None:
                bad.append(f"{label}: nv-ipam pool {ipam.get('poolName')} is not defined")
            elif master in by_ifname and pool["spec"].get("perNodeBlockSize", 0) < max_pods.get(by_ifname[master], 0):
                bad.append(f"{label}: pool {ipam.get('poolName')} gives a node {pool['spec'].get('perNodeBlockSize')} "
                           f"addresses for the {max_pods[by_ifname[master]]} pods {by_ifname[master]} admits (rdmaHcaMax)")
        elif not ipam:
            bad.append(f"{label}: no ipam: the pods' rail interfaces would have no address, and RoCE no GID")
    for label, _, trainers in training_pods(workloads):
        for c in trainers:
            for r, v in rdma_resources(c).items():
                if not r.startswith(SHARED_PREFIX + "/"):
                    bad.append(f"{label} {c['name']}: requests {r}, not a shared rdma/ resource")
                elif int(v) != 1:
                    bad.append(f"{label} {c['name']}: requests {v} of {r}; one unit is the whole HCA")
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
