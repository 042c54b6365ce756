"""What JobSet and the Job controller do with the kit's JobSet specs, as pure functions: which pod
is the coordinator and what its annotation says, and what a container's exit code does to the
JobSet (fail it, or restart it against maxRestarts). Written after the sources, so the tests can
run the kit's failure policy on sample failures offline:

- the Job controller's podFailurePolicy (kubernetes pkg/controller/job/pod_failure_policy.go):
  rules in order, the first match decides; FailJob fails the Job with reason `PodFailurePolicy`
  and the message "Container C for pod NS/P failed with exit code N matching FailJob rule at
  index I"; with no rule matching, a failure counts against backoffLimit, and past it the Job
  fails with reason `BackoffLimitExceeded`;
- JobSet's failurePolicy (kubernetes-sigs/jobset v0.12.0, pkg/controllers/failure_policy.go):
  rules in order, the first whose onJobFailureReasons holds the Job's reason (empty: any) and one
  of whose onJobFailureMessagePatterns (Go regular expressions, unanchored; empty: any) matches its
  message, and whose targetReplicatedJobs holds the Job's (empty: any); no rule: RestartJobSet;
- the coordinator (pkg/controllers/jobset_controller.go, CoordinatorEndpoint):
  `<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>`, written to every pod as the
  `jobset.sigs.k8s.io/coordinator` label and annotation; the subdomain is spec.network.subdomain,
  else the JobSet's name.
"""

import re

COORDINATOR_KEY = "jobset.sigs.k8s.io/coordinator"
REFUSAL = 125
# Actions that count a restart against maxRestarts, and the ones that do not.
COUNTED = ("RestartJobSet", "RestartJob")
NOT_COUNTED = ("RestartJobSetAndIgnoreMaxRestarts", "RestartJobAndIgnoreMaxRestarts")


def job_failure(job_spec, namespace, pod, container, exit_code):
    """(reason, message) of the Job's Failed condition when `container` of its pod exits with
    `exit_code` (restartPolicy Never), or None when the Job does not fail (an Ignore rule, or
    backoffLimit not yet reached: the kit's is 0)."""
    rules = ((job_spec.get("podFailurePolicy") or {}).get("rules")) or []
    for index, rule in enumerate(rules):
        codes = rule.get("onExitCodes")
        if not codes:
            continue  # onPodConditions: not a container exit
        if codes.get("containerName") not in (None, container):
            continue
        values = codes.get("values") or []
        hit = exit_code in values if codes.get("operator") == "In" else exit_code not in values
        if not hit or exit_code == 0:
            continue
        action = rule.get("action")
        if action == "FailJob":
            return ("PodFailurePolicy",
                    f"Container {container} for pod {namespace}/{pod} failed with exit code {exit_code} "
                    f"matching FailJob rule at index {index}")
        if action == "Ignore":
            return None
        break  # Count (or FailIndex, which the kit does not use): the backoff limit decides
    if exit_code != 0 and (job_spec.get("backoffLimit", 6) or 0) == 0:
        return ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
    return None


def jobset_action(jobset_spec, replicated_job, reason, message):
    """The action JobSet takes for a Job of `replicated_job` failed with (reason, message), and
    the name of the rule that decided it (None: the default)."""
    policy = jobset_spec.get("failurePolicy")
    if policy is None:
        return "FailJobSet", None
    for rule in policy.get("rules") or []:
        if rule.get("onJobFailureReasons") and reason not in rule["onJobFailureReasons"]:
            continue
        patterns = rule.get("onJobFailureMessagePatterns") or []
        if patterns and not any(re.search(p, message) for p in patterns):
            continue
        if rule.get("targetReplicatedJobs") and replicated_job not in rule["targetReplicatedJobs"]:
            continue
        return rule["action"], rule.get("name")
    return "RestartJobSet", None


def restarts_in_place(container, exit_code):
    """Whether the kubelet restarts `container` in its pod when it exits with `exit_code`, by its
    own restartPolicy and restartPolicyRules (ContainerRestartRules, KEP-5307: the first rule whose
    exitCodes match decides; no match: the container's restartPolicy, else the pod's, which the
    kit sets to Never)."""
    for rule in container.get("restartPolicyRules") or []:
        codes = rule.get("exitCodes") or {}
        values = codes.get("values") or []
        if (exit_code in values) == (codes.get("operator") == "In"):
            return rule.get("action") == "Restart"
    policy = container.get("restartPolicy", "Never")
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


def outcome(jobset_spec, container, exit_code, namespace="training", jobset_name="llm-train", restarts=0):
    """What happens to the JobSet when `container` of the first replicated Job's pod exits with
    `exit_code`: "fails" (no restart), "restarts (counted)", "restarts (not counted)", "restarts
    in place" (the container, in its pod), or "continues" (the Job did not fail), after `restarts`
    restarts so far."""
    rj = (jobset_spec.get("replicatedJobs") or [{}])[0]
    job_spec = (rj.get("template") or {}).get("spec") or {}
    pod_spec = ((job_spec.get("template") or {}).get("spec")) or {}
    mine = [c for c in pod_spec.get("containers") or [] if c.get("name") == container]
    if mine and exit_code != 0 and restarts_in_place(mine[0], exit_code):
        return "restarts in place"
    pod = f"{jobset_name}-{rj.get('name')}-0-0-abcde"
    failure = job_failure(job_spec, namespace, pod, container, exit_code)
    if failure is None:
        return "continues"
    action, _ = jobset_action(jobset_spec, rj.get("name"), *failure)
    if action == "FailJobSet":
        return "fails"
    if action in NOT_COUNTED:
        return "restarts (not counted)"
    max_restarts = (jobset_spec.get("failurePolicy") or {}).get("maxRestarts", 0)
    return "restarts (counted)" if restarts < max_restarts else "fails"


def coordinator_endpoint(jobset_name, jobset_spec):
    """What JobSet writes into the coordinator label and annotation, or None without
    spec.coordinator."""
    c = jobset_spec.get("coordinator")
    if not c:
        return None
    subdomain = (jobset_spec.get("network") or {}).get("subdomain") or jobset_name
    return f"{jobset_name}-{c['replicatedJob']}-{c.get('jobIndex', 0)}-{c.get('podIndex', 0)}.{subdomain}"


LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def env_from_annotation(container, name, key):
    """Whether the container's variable `name` comes from the pod's annotation `key` through the
    downward API."""
    for e in container.get("env") or []:
        if e.get("name") == name:
            ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            return ref == f"metadata.annotations['{key}']"
    return False


def check_coordinator(jobset_name, jobset_spec, container_name):
    """spec.coordinator names a pod that exists (a replicated Job of the spec, a Job index below its
    replicas, a completion index below its completions, Indexed), its endpoint is a DNS name that
    fits a label value (JobSet's webhook refuses longer ones), and the trainer reads it for the
    gate (NCCL_WRAP_GATE_COORDINATOR) and torchrun (PET_MASTER_ADDR) from the annotation."""
    bad = []
    c = jobset_spec.get("coordinator")
    if not c:
        return ["no spec.coordinator: the pods get no coordinator annotation"]
    rjs = {rj.get("name"): rj for rj in jobset_spec.get("replicatedJobs") or []}
    rj = rjs.get(c.get("replicatedJob"))
    if rj is None:
        return [f"spec.coordinator names replicatedJob {c.get('replicatedJob')!r}, not one of {sorted(rjs)}"]
    job = (rj.get("template") or {}).get("spec") or {}
    if not 0 <= c.get("jobIndex", 0) < rj.get("replicas", 1):
        bad.append(f"spec.coordinator.jobIndex {c.get('jobIndex')} is not below replicas {rj.get('replicas', 1)}")
    if job.get("completionMode") != "Indexed" or not 0 <= c.get("podIndex", 0) < job.get("completions", 1):
        bad.append(f"spec.coordinator.podIndex {c.get('podIndex')} is no completion index of an Indexed Job "
                   f"of {job.get('completions')}")
    endpoint = coordinator_endpoint(jobset_name, jobset_spec)
    if len(endpoint) > 63 or not LABEL_VALUE.match(endpoint) or not DNS_SUBDOMAIN.match(endpoint):
        bad.append(f"coordinator endpoint {endpoint} is not a DNS name that fits a label value")
    pod = (job.get("template") or {}).get("spec") or {}
    containers = [x for x in pod.get("containers") or [] if x.get("name") == container_name]
    if not containers:
        return bad + [f"no container {container_name}"]
    for var in ("NCCL_WRAP_GATE_COORDINATOR", "PET_MASTER_ADDR"):
        if not env_from_annotation(containers[0], var, COORDINATOR_KEY):
            bad.append(f"{container_name}: {var} does not come from the {COORDINATOR_KEY} annotation")
    return bad


def check_refusal_fails_without_restarts(jobset_spec, container_name):
    """nccl-wrap's 125 fails the JobSet at once, whatever restarts are left; any other failure is
    restarted (and there are restarts to burn, else the rule would say nothing)."""
    bad = []
    if ((jobset_spec.get("failurePolicy") or {}).get("maxRestarts") or 0) < 1:
        bad.append("failurePolicy.maxRestarts is 0: no failure is restarted, so 125 is not told apart")
    got = outcome(jobset_spec, container_name, REFUSAL)
    if got != "fails":
        bad.append(f"{container_name} exiting {REFUSAL} (nccl-wrap's refusal): the JobSet {got}, not fails at once")
    in_place = (jobset_spec.get("failurePolicy") or {}).get("restartStrategy") == "InPlaceRestart"
    want = "restarts in place" if in_place else "restarts (counted)"
    for code in (1, 137):
        got = outcome(jobset_spec, container_name, code)
        if got != want:
            bad.append(f"{container_name} exiting {code}: the JobSet {got}, not {want}")
    return bad


def check_in_place_agent(objects, container_name):
    """The in-place restart launcher: JobSet's agent is the container's entrypoint and starts
    nccl-wrap (exec'd, supervising: it is not PID 1) in front of the worker; the agent reads its
    JobSet and pod names from the downward API, and its service account may read JobSets and patch
    pods, as the agent needs (kubernetes-sigs/jobset cmd/in-place-restart-agent)."""
    bad = []
    js = [o for o in objects if o["kind"] == "JobSet"][0]
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    c = [x for x in pod["containers"] if x["name"] == container_name][0]
    env = {e["name"]: e for e in c.get("env") or []}
    if c.get("command") != ["/in-place-restart-agent"] or c.get("args"):
        bad.append(f"the container runs {c.get('command')} {c.get('args')}, not the in-place restart agent")
    worker = (env.get("WORKER_COMMAND") or {}).get("value", "").split()
    if worker[:2] != ["exec", "/opt/nccl-wrap/nccl-wrap"] or "--" not in worker or \
            "--supervise" not in worker[:worker.index("--")]:
        bad.append(f"WORKER_COMMAND {' '.join(worker)!r} does not exec nccl-wrap --supervise in front of the worker")
    for name, path in (("JOBSET_NAME", "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"),
                       ("POD_NAME", "metadata.name")):
        if ((env.get(name) or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") != path:
            bad.append(f"{name} does not come from {path}")
    account = pod.get("serviceAccountName")
    roles = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Role"}
    granted = set()
    for b in (o for o in objects if o["kind"] == "RoleBinding"):
        if any(s.get("kind") == "ServiceAccount" and s.get("name") == account for s in b.get("subjects") or []):
            for rule in (roles.get(b["roleRef"]["name"]) or {}).get("rules") or []:
                for group in rule.get("apiGroups") or []:
                    for res in rule.get("resources") or []:
                        granted |= {(group, res, v) for v in rule.get("verbs") or []}
    need = {("", "pods", "patch")} | {("jobset.x-k8s.io", "jobsets", v) for v in ("get", "list", "watch")}
    if not need <= granted:
        bad.append(f"service account {account} lacks {sorted(need - granted)}")
    return bad
