"""Workload manifests, waits and the prediction check shared by the scenarios and the
differential run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from tests.e2e.controlplane import wait_for
from tests.e2e.fake_kubelet import MANUAL_LABEL
from tests.e2e.harness import POOL_LABEL, Environment, is_active
from tests.e2e.rule_judge import MISSED_DENIAL, OVER_DENIAL

IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: there is no kubelet


def pod_template(app: str, *, pools: Sequence[str] | None = None, manual: bool = False,
                 annotations: Mapping[str, str] | None = None, spread_pools: bool = False,
                 scheduler: str | None = None, sidecar: bool = False,
                 extra_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    labels = {"app": app, **(extra_labels or {})}
    if manual:
        labels[MANUAL_LABEL] = "true"
    spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": 30,
        "containers": [{"name": "server", "image": IMAGE}],
    }
    if sidecar:
        spec["initContainers"] = [{"name": "proxy", "image": IMAGE, "restartPolicy": "Always"}]
    if scheduler:
        spec["schedulerName"] = scheduler
    if pools:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": POOL_LABEL, "operator": "In", "values": list(pools)}]}]}}}
    if spread_pools:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": POOL_LABEL, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": app}}}]
    metadata: dict[str, Any] = {"labels": labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"metadata": metadata, "spec": spec}


def deployment(name: str, replicas: int, template: dict[str, Any], *,
               max_surge: int | str = 1, max_unavailable: int | str = 0,
               paused: bool = False, min_ready_seconds: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "paused": paused, "minReadySeconds": min_ready_seconds,
                 # The API server wants the deadline above minReadySeconds.
                 "progressDeadlineSeconds": max(600, 2 * min_ready_seconds),
                 "selector": {"matchLabels": {"app": template["metadata"]["labels"]["app"]}},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                     "maxSurge": max_surge, "maxUnavailable": max_unavailable}},
                 "template": template},
    }


def replicaset(name: str, replicas: int, template: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas,
                     "selector": {"matchLabels": {"app": template["metadata"]["labels"]["app"]}},
                     "template": template}}


def statefulset(name: str, replicas: int, template: dict[str, Any], *,
                policy: str = "OrderedReady", start: int = 0) -> dict[str, Any]:
    """A StatefulSet; `start` is spec.ordinals.start (its pods are NAME-start, ...)."""
    spec: dict[str, Any] = {
        "replicas": replicas, "serviceName": name, "podManagementPolicy": policy,
        "selector": {"matchLabels": {"app": template["metadata"]["labels"]["app"]}},
        "template": template}
    if start:
        spec["ordinals"] = {"start": start}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": spec}


def apply(env: Environment, namespace: str, *objects: Mapping[str, Any]) -> None:
    text = "\n---\n".join(json.dumps(o) for o in objects)
    env.kubectl("-n", namespace, "apply", "--server-side", "--field-manager=e2e", "-f", "-",
                stdin=text, check=True)


def running_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c["type"] == "Ready"]
    return (status.get("phase") == "Running" and bool(ready) and ready[0]["status"] == "True"
            and is_active(pod))


def wait_running(env: Environment, namespace: str, selector: str, count: int,
                 timeout: float = 120) -> list[dict[str, Any]]:
    """Exactly `count` active pods, all Running and Ready."""
    def check() -> list[dict[str, Any]] | None:
        env.plane.check_alive()
        pods = [p for p in env.pods(namespace, selector) if is_active(p)]
        if len(pods) == count and all(running_ready(p) for p in pods):
            return pods
        return None

    return wait_for(f"{count} running pods {selector} in {namespace}", check, timeout=timeout)


def replica_sets(env: Environment, namespace: str) -> list[dict[str, Any]]:
    return env.api_get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"]


def owner_uid(obj: Mapping[str, Any]) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref["uid"])
    return None


def settled(env: Environment, namespace: str) -> tuple[Any, ...] | None:
    """A fingerprint of the namespace when its controllers have caught up, else None.

    Caught up: every Deployment/ReplicaSet/StatefulSet observed its generation, and every
    ReplicaSet/StatefulSet has exactly spec.replicas active pods."""
    base = f"/apis/apps/v1/namespaces/{namespace}"
    pods = env.pods(namespace)
    active: dict[str, int] = {}
    created: dict[str, int] = {}  # not terminating, whatever the phase
    for pod in pods:
        key = owner_uid(pod) or ""
        if is_active(pod):
            active[key] = active.get(key, 0) + 1
        if not pod["metadata"].get("deletionTimestamp"):
            created[key] = created.get(key, 0) + 1
    fingerprint: list[Any] = []
    for kind in ("deployments", "replicasets", "statefulsets"):
        for obj in env.api_get(f"{base}/{kind}")["items"]:
            meta, spec, status = obj["metadata"], obj["spec"], obj.get("status") or {}
            if status.get("observedGeneration", 0) < meta["generation"]:
                return None
            if kind == "deployments":
                fingerprint.append((meta["name"], spec["replicas"]))
                continue
            # A StatefulSet may legitimately stop short of spec.replicas (OrderedReady
            # waits for an unready pod); a ReplicaSet always creates them all. A
            # StatefulSet's status.replicas counts its Failed pods too (an OrderedReady
            # scale-down can stall on one and keep it); a ReplicaSet ignores them.
            wanted = status.get("replicas", 0) if kind == "statefulsets" else spec["replicas"]
            counted = created if kind == "statefulsets" else active
            if counted.get(meta["uid"], 0) != wanted:
                return None
            if status.get("replicas", 0) != wanted:
                return None
            fingerprint.append((meta["name"], spec["replicas"]))
    uids = sorted(p["metadata"]["uid"] + str(p["metadata"].get("deletionTimestamp"))
                  for p in pods)
    return (tuple(sorted(fingerprint)), tuple(uids))


def wait_settled(env: Environment, namespace: str, timeout: float = 90,
                 quiet: float = 1.5) -> None:
    """Until `settled` gives the same fingerprint for `quiet` seconds."""
    state: dict[str, Any] = {"print": None, "since": 0.0}

    def check() -> bool:
        env.plane.check_alive()
        now = settled(env, namespace)
        if now is None or now != state["print"]:
            state.update({"print": now, "since": time.monotonic()})
            return False
        return time.monotonic() - state["since"] >= quiet

    wait_for(f"the controllers in {namespace} to settle", check, timeout=timeout,
             interval=0.5)


def plan(env: Environment, workload: str, replicas: int, *extra: str) -> dict[str, Any]:
    result = env.poolguard("plan", "--kubeconfig", env.plane.kubeconfig(), "--workload",
                           workload, "--replicas", str(replicas), "-o", "json", *extra)
    assert result.code == 0, str(result)
    return json.loads(result.stdout)


@dataclass
class PlanComparison:
    """How a real scale-down compared with plan."""

    deleted: set[str]
    victims: set[str]
    possible: set[str]
    certain: set[str]
    problems: list[str] = field(default_factory=list)
    blocked: set[str] = field(default_factory=set)  # condemned, but the controller waits
    # Precision (not a failure): plan's victims and possible victims were every active pod
    # of the workload (the verdict's precision is tests/e2e/rule_judge.py's).
    all_possible: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def precision(self) -> list[str]:
        """The precision classes of this scale-down's prediction (PRECISION's names)."""
        return [ALL_POSSIBLE] if self.all_possible else []


ALL_POSSIBLE = "every active pod a victim or possible victim"
# What the summary counts for each differential (the verdict's from the rule judge).
PRECISION = (OVER_DENIAL, MISSED_DENIAL, ALL_POSSIBLE)


def compare(document: Mapping[str, Any], deleted: set[str]) -> PlanComparison:
    """Pass: every deleted pod is a victim or a possible victim, and every victim plan
    marked `certain` (no other pod of its controller may go in its place) was deleted.

    Blocked (StatefulSets under OrderedReady, LeaderWorkerSet surge groups, CloneSet
    specified pods): pods the controller deletes only once what they wait on is ready. None
    of them may be deleted while that lasts (the caller observes long enough for a deletion
    to have happened), except one plan also lists as a possible victim: a CloneSet's ready
    specified pods tied for one deleteReadyLimit slot, where the controller's list order
    picks which goes now and which waits."""
    victims = {v["name"] for v in document["victims"]}
    possible = set(document["possibleVictims"])
    blocked = {b["name"] for b in document.get("blocked") or []}
    certain = {v["name"] for v in document["victims"] if v["certain"]}
    verdict = PlanComparison(deleted, victims, possible, certain, blocked=blocked)
    everyone = {p["name"] for p in document.get("pods") or []}
    verdict.all_possible = bool(possible) and everyone <= victims | possible
    unexpected = deleted - victims - possible - blocked
    if unexpected:
        verdict.problems.append(f"deleted but not predicted: {sorted(unexpected)}")
    if (deleted & blocked) - possible:
        verdict.problems.append(
            f"predicted blocked but deleted: {sorted((deleted & blocked) - possible)}")
    missed = certain - deleted
    if missed:
        verdict.problems.append(f"certain victims not deleted: {sorted(missed)}")
    return verdict


def precision_counts(classes: Iterable[Iterable[str]]) -> dict[str, int]:
    """How many states fell in each PRECISION class (every class listed, 0 too)."""
    counts = dict.fromkeys(PRECISION, 0)
    for each in classes:
        for name in each:
            if name in counts:
                counts[name] += 1
    return counts


def active_pods(env: Environment, namespace: str) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in env.pods(namespace) if is_active(p)}


class PodRecorder:
    """Every version of every pod in a namespace, in watch order (list + watch)."""

    def __init__(self, env: Environment, namespace: str, timeout: int = 120) -> None:
        """Records for up to `timeout` seconds (the watch's own end)."""
        self.core = client.CoreV1Api(env.api)
        self.namespace = namespace
        self.versions: list[dict[str, Any]] = []
        self._stop = threading.Event()
        listed = json.loads(self.core.list_namespaced_pod(
            namespace, _preload_content=False).data)
        self.versions.extend(listed["items"])
        self.listed = len(listed["items"])  # the first versions: the pods as listed
        self._response = self.core.list_namespaced_pod(
            namespace, watch=True, resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=timeout, _preload_content=False,
            _request_timeout=(5, timeout + 60))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for line in self._response:
                if self._stop.is_set():
                    return
                event = json.loads(line)
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.versions.append(event["object"])
        except Exception:  # closed by stop()
            return

    def recording(self) -> bool:
        """Is the watch still delivering (not ended by its timeout or an error)?"""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop recording (closing a response another thread reads blocks: the watch ends
        on its own timeout, the daemon thread with it)."""
        self._stop.set()

    def first_bound_versions(self, names: set[str]) -> dict[str, dict[str, Any]]:
        """For each pod in `names`, the first version seen with spec.nodeName set (waits
        until the watch has delivered one for each)."""
        def complete() -> dict[str, dict[str, Any]] | None:
            found = self._first_bound()
            return found if names <= set(found) else None

        return wait_for("the watch to deliver every bound pod", complete, timeout=30)

    def _first_bound(self) -> dict[str, dict[str, Any]]:
        first: dict[str, dict[str, Any]] = {}
        for version in list(self.versions):
            if version["spec"].get("nodeName"):
                first.setdefault(version["metadata"]["name"], version)
        return first


def bind(env: Environment, namespace: str, pod: str, node: str) -> None:
    """What a scheduler does: a Binding through pods/binding (poolguard's binding webhook
    sees it as the scheduler's would be seen)."""
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    response = env.core.create_namespaced_pod_binding(pod, namespace, body,
                                                      _preload_content=False)
    if response.status >= 300:  # unread, the client raises nothing: the caller must know
        raise client.ApiException(status=response.status, reason=response.reason,
                                  body=response.data)
