"""Trust rules over the rendered kit: who may reach nccl-wrap's listeners (the gate on 18516, ping
on 18515, the agents' ring on 18517) and the gate's job secret. One function per rule, each
returning what it found wrong; test_trust.py runs them on every overlay and on broken copies.
"""

import ipaddress
import os

import kit
import policy

PING_PORT = 18515
GATE_PORT = 18516
RING_PORT = 18517
GATE_SECRET_FILE = "NCCL_WRAP_GATE_SECRET_FILE"
PING_ALLOW = "NCCL_WRAP_PING_ALLOW"


def _labels(template):
    return (template.get("metadata") or {}).get("labels") or {}


def _selects(selector, labels):
    """Whether a LabelSelector (matchLabels only: the kit uses no expressions) selects `labels`."""
    if (selector or {}).get("matchExpressions"):
        return False
    match = (selector or {}).get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in match.items())


def _policies_for(objects, labels):
    return [p for p in objects if p.get("kind") == "NetworkPolicy"
            and _selects((p.get("spec") or {}).get("podSelector"), labels)
            and "Ingress" in ((p.get("spec") or {}).get("policyTypes") or ["Ingress"])]


def _covers(rule, port):
    """Whether an ingress rule admits TCP `port` (a rule without ports admits every port)."""
    ports = rule.get("ports")
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != "TCP":
            continue
        start = p.get("port")
        if start is None:
            return True
        if not isinstance(start, int):
            continue  # a named port: the kit's containers name none of these
        if start <= port <= p.get("endPort", start):
            return True
    return False


# The labels a launcher's controller puts on the pods it creates, with the object's name: what a
# NetworkPolicy can select them by (the template in the object carries none of them).
LAUNCHER_POD_LABELS = {"PyTorchJob": "training.kubeflow.org/job-name", "JobSet": "jobset.sigs.k8s.io/jobset-name"}


def _pods(objects, want):
    """(label, template with the labels its pods get) of the pod templates `want` keeps."""
    out = []
    for obj in objects:
        for where, template in kit.pod_templates(obj):
            label = f"{kit.name_of(obj)} {where}"
            if want(label, template):
                template = dict(template, metadata=dict(template.get("metadata") or {}))
                labels = dict(_labels(template))
                if obj.get("kind") in LAUNCHER_POD_LABELS:
                    labels[LAUNCHER_POD_LABELS[obj["kind"]]] = obj["metadata"]["name"]
                template["metadata"]["labels"] = labels
                out.append((label, template))
    return out


def check_listeners_admit_only_the_job(objects):
    """Every launcher and preflight pod is selected by a NetworkPolicy, and each rule of those that
    admits 18515 or 18516 admits only pods of the same job: a podSelector the pods themselves
    match, no namespaceSelector (another namespace), no ipBlock (anything by address)."""
    bad = []
    pods = _pods(objects, lambda label, t: label.startswith(policy.LAUNCHER_KINDS) or policy.is_preflight(t))
    for label, template in pods:
        labels = _labels(template)
        found = _policies_for(objects, labels)
        if not found:
            bad.append(f"{label}: no NetworkPolicy selects these pods: anyone in the cluster reaches ports {PING_PORT} and {GATE_PORT}")
            continue
        own = (found[0].get("spec") or {}).get("podSelector")
        for pol in found:
            for i, rule in enumerate((pol.get("spec") or {}).get("ingress") or []):
                ports = [p for p in (PING_PORT, GATE_PORT) if _covers(rule, p)]
                if not ports:
                    continue
                where = f"{kit.name_of(pol)} ingress[{i}] (ports {ports})"
                peers = rule.get("from") or []
                if not peers:
                    bad.append(f"{label}: {where} admits every source")
                for peer in peers:
                    if "ipBlock" in peer or "namespaceSelector" in peer:
                        bad.append(f"{label}: {where} admits {sorted(peer)} beyond the job's own pods")
                    elif not _selects(peer.get("podSelector"), labels) or not (peer.get("podSelector") or {}).get("matchLabels"):
                        bad.append(f"{label}: {where} admits pods {peer.get('podSelector')} that are not this job's")
                    elif (peer.get("podSelector") or {}) != own and not all(
                            k in (peer.get("podSelector") or {}).get("matchLabels", {}) for k in (own or {}).get("matchLabels", {})):
                        bad.append(f"{label}: {where} admits a wider set of pods than the job's")
    return bad


def check_gate_secret(objects):
    """Every launcher pod that runs the gate (in its trainer or in an init container) reads its job
    secret from a file of a Secret volume mounted read-only, and that Secret is rendered with the kit, named for the job (one per job),
    and holds the key the file names."""
    bad = []
    secrets = {o["metadata"]["name"]: o for o in objects if o.get("kind") == "Secret"}
    launchers = {kit.name_of(o): o for o in objects if o.get("kind") in policy.LAUNCHER_KINDS}
    for label, template, trainers in policy.training_pods(objects):
        if not label.startswith(policy.LAUNCHER_KINDS):
            continue
        job = launchers[label.split(" ")[0]]["metadata"]["name"]
        for c in policy.gate_runners(template, trainers):
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            path = env.get(GATE_SECRET_FILE)
            if not path:
                bad.append(f"{label} {c['name']}: the gate runs without {GATE_SECRET_FILE}: any process that knows the job id can join as a rank")
                continue
            mount = policy.mount_of(c, os.path.dirname(path))
            vol = policy.volume(template, mount["name"]) if mount else None
            secret_name = ((vol or {}).get("secret") or {}).get("secretName")
            if not mount or not secret_name:
                bad.append(f"{label} {c['name']}: {GATE_SECRET_FILE}={path} is not in a mounted Secret volume")
                continue
            if not mount.get("readOnly"):
                bad.append(f"{label} {c['name']}: the gate secret's volume is mounted writable")
            secret = secrets.get(secret_name)
            if secret is None:
                bad.append(f"{label}: the gate secret {secret_name} is not rendered with the kit")
            elif not secret_name.startswith(f"{job}-"):
                bad.append(f"{label}: the gate secret {secret_name} is not named for the job {job} (one Secret per job)")
            elif os.path.basename(path) not in (secret.get("data") or {}):
                bad.append(f"{label}: Secret/{secret_name} has no key {os.path.basename(path)}")
    return bad


def _cidrs(text):
    try:
        return [ipaddress.ip_network(c.strip(), strict=False) for c in (text or "").split(",") if c.strip()]
    except ValueError:
        return None


def check_ping_allow(objects):
    """The preflight's ping listener is told whom to answer: NCCL_WRAP_PING_ALLOW, CIDRs, none of
    them everything (0.0.0.0/0, ::/0)."""
    bad = []
    for label, template in _pods(objects, lambda label, t: policy.is_preflight(t)):
        for c in (template.get("spec") or {}).get("containers") or []:
            env = {e.get("name"): e.get("value") for e in c.get("env") or []}
            nets = _cidrs(env.get(PING_ALLOW))
            if not nets:
                bad.append(f"{label} {c['name']}: {PING_ALLOW} is {env.get(PING_ALLOW)!r}, not a list of CIDRs: ping answers anyone")
            elif any(n.prefixlen == 0 for n in nets):
                bad.append(f"{label} {c['name']}: {PING_ALLOW} admits every address")
    return bad


def check_ring_port(objects):
    """The node agents' ring port is admitted only from address blocks (the agents run with
    hostNetwork, so their peers are nodes), never from everywhere, pods or other namespaces."""
    bad = []
    for ds in [o for o in objects if o.get("kind") == "DaemonSet"]:
        template = ds["spec"]["template"]
        ports = [p.get("containerPort") for c in template["spec"]["containers"] for p in c.get("ports") or []]
        if RING_PORT not in ports:
            continue
        found = _policies_for(objects, _labels(template))
        admitted = False
        for pol in found:
            for i, rule in enumerate((pol.get("spec") or {}).get("ingress") or []):
                if not _covers(rule, RING_PORT):
                    continue
                admitted = True
                peers = rule.get("from") or []
                where = f"{kit.name_of(pol)} ingress[{i}]"
                if not peers:
                    bad.append(f"{kit.name_of(ds)}: {where} admits every source to {RING_PORT}")
                for peer in peers:
                    block = peer.get("ipBlock")
                    if not block:
                        bad.append(f"{kit.name_of(ds)}: {where} admits {sorted(peer)}, not the nodes' addresses")
                    elif _cidrs(block.get("cidr")) in (None, []) or any(n.prefixlen == 0 for n in _cidrs(block.get("cidr"))):
                        bad.append(f"{kit.name_of(ds)}: {where} admits every address to {RING_PORT}")
        if not admitted:
            bad.append(f"{kit.name_of(ds)}: no NetworkPolicy admits the ring port {RING_PORT} between the agents")
    return bad
