"""Kubeflow Trainer v2 and the API server's MutatingAdmissionPolicy, as far as the kit depends on
them, written after their sources so the tests can follow a TrainJob to the pod the kubelet starts:

- `effective_jobset(runtime, trainjob)`: the JobSet Trainer (kubeflow/trainer v2.3.0) builds from a
  ClusterTrainingRuntime and a TrainJob: runtime patches merged into the template by strategic
  merge (pkg/runtime/core/trainingruntime.go, mergeRuntimePatches; list merge keys as the Kubernetes
  types declare them); for the replicated Job labelled `trainjob-ancestor-step: trainer`, the `node`
  container's image, command and args replaced by the TrainJob's `trainer` fields when set, its env
  upserted, resourcesPerNode merged (plugins/jobset/builder.go, Trainer; core/trainingruntime.go);
  the PET_* variables set in `node` and in every container `mlPolicy.torch.envInjection` names
  (plugins/torch/torch.go, KEP-3416); the JobSet named after the TrainJob.
- `pod_of(jobset)`: one pod of its first replicated Job, with the labels and annotations JobSet and
  the Job controller give it.
- `admit(policy, pod)`: a MutatingAdmissionPolicy applied to a pod CREATE: matchConstraints
  (resourceRules, objectSelector), matchConditions, variables and JSONPatch mutations, its CEL
  expressions evaluated by cel-python (with the Kubernetes CEL library's `indexOf`, the one function
  the kit's policy uses beyond standard CEL), and reinvocation while the policy asks for it.
"""

import copy
import functools
import json

import celpy
from celpy import celtypes

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
NODE = "node"
MASTER_PORT = 29500

# The merge keys of the lists a runtime patch can reach (Kubernetes' patchMergeKey tags; JobSet's
# replicatedJobs is keyed by name).
MERGE_KEYS = {"replicatedJobs": "name", "containers": "name", "initContainers": "name", "env": "name",
              "volumes": "name", "volumeMounts": "mountPath", "ports": "containerPort", "tolerations": None}


def smp(base, patch, key=None):
    """A strategic merge patch of JSON values, for the fields runtime patches use: maps merged
    recursively, lists with a merge key merged item by item, other lists and scalars replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = smp(base.get(k), v, k) if k in base else copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and MERGE_KEYS.get(key):
        mk = MERGE_KEYS[key]
        out = [copy.deepcopy(x) for x in base]
        for item in patch:
            at = [i for i, x in enumerate(out) if isinstance(x, dict) and x.get(mk) == item.get(mk)]
            if at:
                out[at[0]] = smp(out[at[0]], item, None)
            else:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


def _upsert_env(env, extra):
    names = [e.get("name") for e in extra]
    return [e for e in env if e.get("name") not in names] + copy.deepcopy(extra)


def effective_jobset(runtime, trainjob):
    """The JobSet Trainer makes for `trainjob` on `runtime` (see the module's docstring)."""
    name = trainjob["metadata"]["name"]
    spec = copy.deepcopy(((runtime.get("spec") or {}).get("template") or {}).get("spec") or {})
    for patch in (trainjob.get("spec") or {}).get("runtimePatches") or []:
        tmpl = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
        if tmpl:
            spec = smp(spec, tmpl)
    trainer = (trainjob.get("spec") or {}).get("trainer") or {}
    ml = (runtime.get("spec") or {}).get("mlPolicy") or {}
    nodes = trainer.get("numNodes") or ml.get("numNodes") or 1
    targets = {t["jobName"]: t["containerNames"] for t in
               (((ml.get("torch") or {}).get("envInjection") or {}).get("targets") or [])}
    for rj in spec.get("replicatedJobs") or []:
        job = rj.setdefault("template", {}).setdefault("spec", {})
        if ((rj["template"].get("metadata") or {}).get("labels") or {}).get(ANCESTOR) != "trainer":
            continue
        rj["replicas"] = 1
        job.update(parallelism=nodes, completions=nodes, completionMode="Indexed")
        pod = job.setdefault("template", {}).setdefault("spec", {})
        for c in pod.get("containers") or []:
            if c.get("name") != NODE:
                continue
            for field in ("image", "command", "args"):
                if trainer.get(field) is not None:
                    c[field] = copy.deepcopy(trainer[field])
            c["env"] = _upsert_env(c.get("env") or [], trainer.get("env") or [])
            if trainer.get("resourcesPerNode"):
                res = c.setdefault("resources", {})
                for kind in ("limits", "requests"):
                    if trainer["resourcesPerNode"].get(kind):
                        res[kind] = dict(res.get(kind) or {}, **trainer["resourcesPerNode"][kind])
        gpus = next((c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu") for c in pod.get("containers") or []
                     if c.get("name") == NODE), None)
        pet = [
            {"name": "PET_NNODES", "value": str(nodes)},
            {"name": "PET_NPROC_PER_NODE", "value": str(gpus) if gpus else "auto"},
            {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
            {"name": "PET_MASTER_ADDR", "value": f"{name}-{rj['name']}-0-0.{name}"},
            {"name": "PET_MASTER_PORT", "value": str(MASTER_PORT)},
        ]
        wanted = {NODE} | set(targets.get(rj["name"], []))
        for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
            if c.get("name") in wanted:
                c["env"] = _upsert_env(c.get("env") or [], pet)
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": trainjob["metadata"].get("namespace")}, "spec": spec}


def pod_of(jobset, index=0):
    """Pod `index` of the first replicated Job of `jobset`, as created: the template with the
    labels and annotations JobSet and the Job controller add."""
    rj = jobset["spec"]["replicatedJobs"][0]
    template = copy.deepcopy(rj["template"]["spec"]["template"])
    meta = template.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    labels.update({"jobset.sigs.k8s.io/jobset-name": jobset["metadata"]["name"],
                   "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
                   "batch.kubernetes.io/job-completion-index": str(index)})
    meta.setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = str(index)
    meta["name"] = f"{jobset['metadata']['name']}-{rj['name']}-0-{index}-x7k2p"
    meta["namespace"] = jobset["metadata"].get("namespace") or "training"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.get("spec") or {}}


# ---- MutatingAdmissionPolicy ----------------------------------------------------------------------

class JSONPatch(celtypes.MessageType):
    """CEL's `JSONPatch{op, path, value}`, the type a JSONPatch mutation's expression returns."""

    def __init__(self, fields=None):
        super().__init__(fields or {})


def _index_of(lst, value):
    """The Kubernetes CEL lists library's `<list>.indexOf(<T>) int`: the first index, or -1."""
    for i, x in enumerate(lst):
        if x == value:
            return celtypes.IntType(i)
    return celtypes.IntType(-1)


FUNCTIONS = {"indexOf": _index_of}


@functools.lru_cache(maxsize=None)
def _program(expression):
    env = celpy.Environment(annotations={"JSONPatch": JSONPatch})
    return env.program(env.compile(expression), functions=FUNCTIONS)


def cel(expression, activation):
    return _program(expression).evaluate(activation)


def to_python(v):
    if isinstance(v, (celtypes.MapType, dict)):
        return {to_python(k): to_python(x) for k, x in v.items()}
    if isinstance(v, (celtypes.ListType, list)):
        return [to_python(x) for x in v]
    if isinstance(v, celtypes.BoolType):
        return bool(v)
    if isinstance(v, celtypes.IntType):
        return int(v)
    if isinstance(v, (celtypes.StringType, str)):
        return str(v)
    return v


def selects(selector, labels):
    """A LabelSelector (matchLabels, matchExpressions In, NotIn, Exists, DoesNotExist)."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
    return True


def matches(policy, obj, operation="CREATE"):
    """Whether the policy's matchConstraints take this pod request."""
    mc = policy["spec"].get("matchConstraints") or {}
    rule_hit = any(("" in r.get("apiGroups", []) or "*" in r.get("apiGroups", []))
                   and ("pods" in r.get("resources", []) or "*" in r.get("resources", []))
                   and (operation in r.get("operations", []) or "*" in r.get("operations", []))
                   for r in mc.get("resourceRules") or [])
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return rule_hit and selects(mc.get("objectSelector"), labels)


def apply_json_patch(obj, ops):
    obj = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        parent = obj
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] in ("replace", "add"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif op["op"] == "add":
                    parent.insert(int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                if op["op"] == "replace" and last not in parent:
                    raise ValueError(f"replace of a missing {op['path']}")
                parent[last] = op["value"]
        elif op["op"] == "remove":
            del parent[int(last) if isinstance(parent, list) else last]
        else:
            raise ValueError(f"JSON patch op {op['op']} not modelled")
    return obj


def admit_once(policy, pod, operation="CREATE"):
    """(pod after the policy, whether it mutated). Raises on an expression error (the kit's
    failurePolicy Fail would refuse the pod)."""
    if not matches(policy, pod, operation):
        return pod, False
    spec = policy["spec"]
    activation = {"object": celpy.json_to_cel(pod), "oldObject": None,
                  "request": celpy.json_to_cel({"operation": operation})}
    for cond in spec.get("matchConditions") or []:
        if not bool(cel(cond["expression"], activation)):
            return pod, False
    variables = {}
    for v in spec.get("variables") or []:
        activation["variables"] = celpy.json_to_cel(variables)
        variables[v["name"]] = to_python(cel(v["expression"], activation))
    activation["variables"] = celpy.json_to_cel(variables)
    out = pod
    for m in spec.get("mutations") or []:
        if m.get("patchType") != "JSONPatch":
            raise ValueError(f"patchType {m.get('patchType')} not modelled")
        ops = to_python(cel(m["jsonPatch"]["expression"], activation))
        out = apply_json_patch(out, ops)
    return out, out != pod


def admit(policy, pod, operation="CREATE"):
    """The pod after the policy, reinvoked once more when it changed the pod and its
    reinvocationPolicy is IfNeeded (the API server runs it again when a later plugin changed the
    object; the kit's policy must then leave its own work alone)."""
    out, changed = admit_once(policy, pod, operation)
    if changed and policy["spec"].get("reinvocationPolicy") == "IfNeeded":
        out, _ = admit_once(policy, out, operation)
    return out


def to_json(obj):
    return json.loads(json.dumps(obj))
