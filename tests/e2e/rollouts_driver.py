"""The Argo Rollouts controller's ReplicaSet handling, driven from the tests.

The e2e tier does not build the real controller (github.com/argoproj/argo-rollouts; see
docs/development.md for what its cold build costs). This driver takes its place for the
Rollouts a test makes: it runs the controller's reconcile passes with the controller's
identity (ServiceAccount argo-rollouts/argo-rollouts) and writes what the controller
writes: the ReplicaSets it creates (name, `rollouts-pod-template-hash` label and selector,
revision and desired-replicas annotations, controller ownerReference), their
`spec.replicas`, the `scale-down-deadline` annotation, the Services' selectors and the
Rollout's status. The real ReplicaSet controller then picks the pods that go.

Transcribed from argo-rollouts v1.10.2, independently of poolguard's own prediction (the
point is an independent check):
- rollout/context.go `reconcile`: a scaling event (the desired-replicas annotation of the
  new or stable ReplicaSet differs from spec.replicas) syncs replicas only
  (rollout/sync.go `isScalingEvent`, `syncReplicasOnly`); otherwise the strategy's pass.
- rollout/canary.go `reconcileCanaryReplicaSets`: unless halted (`spec.paused`), the stable
  ReplicaSet first, then the new one, then the others, one scaled ReplicaSet per pass;
  `scaleDownOldReplicaSetsForCanary` with `cleanupUnhealthyReplicas`
  (rollout/replicaset.go).
- the canary split and the fences (tests/e2e/rollouts_canary.py), and
  utils/replicaset/replicaset.go `NewRSNewReplicas`.
- rollout/bluegreen.go `reconcileBlueGreenReplicaSets`: stable to spec.replicas, the new
  ReplicaSet to its count, the others through `scaleDownDelayHelper` (an old ReplicaSet
  within its scale-down deadline follows spec.replicas); the pause and the active switch.

Covered: basic canary (setWeight and pause steps, maxSurge/maxUnavailable as ints or
percentages, spec.paused) and blue-green (active/preview Services, autoPromotionEnabled,
previewReplicaCount, scaleDownDelaySeconds). Not covered (the tests make none): traffic
routing (so no dynamicStableScale or setCanaryScale), analysis, experiments, abort,
anti-affinity injection, ephemeral metadata. The template hash is fnv32a over this
driver's JSON of the template (the controller hashes Go's JSON of the struct): the same
shape of label value, not the same value.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.e2e.harness import Environment, api_client
from tests.e2e.rollouts_canary import (
    available,
    basic_canary_counts,
    max_unavailable,
    pod_hash,
    revision,
    rs_annotations,
    spec_replicas,
    status_replicas,
    steps_hash,
    template_hash,
)
from tests.e2e.rollouts_manifests import (
    API_VERSION,
    BLUE_GREEN_PAUSE,
    CANARY_PAUSE,
    DEADLINE,
    DESIRED,
    GROUP,
    HASH_LABEL,
    MANAGED_BY,
    PLURAL,
    REVISION,
)
from tests.e2e.workloads import settled

JSON_PATCH = "application/json-patch+json"

def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clean(value: Any) -> Any:
    """A status without its empty and null fields (the server drops them)."""
    if isinstance(value, dict):
        kept = {k: _clean(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, {}, [], False)}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


class Pass:
    """What one reconcile pass read (the controller's rolloutContext)."""

    def __init__(self, rollout: dict[str, Any], replicasets: list[dict[str, Any]]) -> None:
        self.rollout = rollout
        self.status: dict[str, Any] = copy.deepcopy(rollout.get("status") or {})
        by_age = sorted(replicasets, key=lambda rs: (rs["metadata"]["creationTimestamp"],
                                                     rs["metadata"]["name"]))
        wanted = template_hash(rollout["spec"]["template"],
                               self.status.get("collisionCount"))
        self.new = next((rs for rs in by_age if pod_hash(rs) == wanted), None)
        self.all = replicasets
        stable_hash = self.status.get("stableRS", "")
        self.stable = None
        if stable_hash:
            self.stable = (self.new if pod_hash(self.new) == stable_hash else
                           next((rs for rs in replicasets if pod_hash(rs) == stable_hash), None))
        names = {rs["metadata"]["name"] for rs in (self.new, self.stable) if rs is not None}
        self.others = [rs for rs in replicasets if rs["metadata"]["name"] not in names]
        self.add_pause: list[str] = []
        self.remove_pause: list[str] = []
        self.clear_pause = False

    @property
    def replicas(self) -> int:
        return spec_replicas(self.rollout)

    @property
    def strategy(self) -> dict[str, Any]:
        return self.rollout["spec"]["strategy"]

    def pause_condition(self, reason: str) -> dict[str, Any] | None:
        return next((c for c in self.rollout.get("status", {}).get("pauseConditions") or []
                     if c.get("reason") == reason), None)

    def halted(self) -> bool:
        """`haltProgress`: spec.paused (analysis is not used here)."""
        return bool(self.rollout["spec"].get("paused"))

    def stable_is_separate(self) -> bool:
        """`CheckStableRSExists`."""
        if self.stable is None:
            return False
        return self.new is None or self.new["metadata"]["name"] != self.stable["metadata"]["name"]


class RolloutsController:
    """Reconcile passes of the Argo Rollouts controller for one Rollout."""

    def __init__(self, env: Environment, kubeconfig: Path, namespace: str, name: str) -> None:
        self.env, self.namespace, self.name = env, namespace, name
        api = api_client(kubeconfig, pool_size=4)
        self.apps = client.AppsV1Api(api)
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.scaled: list[tuple[str, int, int]] = []  # (ReplicaSet, from, to), every write
        self._wrote = False

    # -- reading and writing --

    def _rollout(self) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, API_VERSION, self.namespace,
                                                        PLURAL, self.name)

    def _replicasets(self, uid: str) -> list[dict[str, Any]]:
        items = self.env.api_get(
            f"/apis/apps/v1/namespaces/{self.namespace}/replicasets")["items"]
        return [rs for rs in items if any(ref.get("uid") == uid and ref.get("controller")
                                          for ref in rs["metadata"].get("ownerReferences") or [])]

    def _patch_rs(self, rs: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
        self._wrote = True
        return self.apps.patch_namespaced_replica_set(
            rs["metadata"]["name"], self.namespace, patch, _content_type=JSON_PATCH)

    # -- rollout/sync.go --

    def create_replicaset(self, p: Pass) -> dict[str, Any]:
        """`createDesiredReplicaSet`: 0 replicas, revision max+1, the hash label on the
        template, the selector and the ReplicaSet itself."""
        rollout = p.rollout
        digest = template_hash(rollout["spec"]["template"], p.status.get("collisionCount"))
        template = copy.deepcopy(rollout["spec"]["template"])
        template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
        selector = copy.deepcopy(rollout["spec"]["selector"])
        selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
        annotations = {k: v for k, v in (rollout["metadata"].get("annotations") or {}).items()
                       if k not in (REVISION, "kubectl.kubernetes.io/last-applied-configuration")}
        annotations[REVISION] = str(max([revision(rs) for rs in p.all] or [0]) + 1)
        body = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
            "name": f"{self.name}-{digest}", "namespace": self.namespace,
            "labels": dict(template["metadata"]["labels"]), "annotations": annotations,
            "ownerReferences": [{"apiVersion": f"{GROUP}/{API_VERSION}", "kind": "Rollout",
                                 "name": self.name, "uid": rollout["metadata"]["uid"],
                                 "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"replicas": 0,
                     "minReadySeconds": rollout["spec"].get("minReadySeconds", 0),
                     "selector": selector, "template": template}}
        self._wrote = True
        created = self.apps.create_namespaced_replica_set(self.namespace, body,
                                                          _preload_content=False)
        return json.loads(created.data)

    def is_scaling_event(self, p: Pass) -> bool:
        for rs in (p.new, p.stable):
            if rs is None or spec_replicas(rs) == 0:  # FilterActiveReplicaSets
                continue
            desired = rs_annotations(rs).get(DESIRED)
            if desired is not None and desired.lstrip("-").isdigit() and int(desired) != p.replicas:
                return True
        return False

    def scale(self, p: Pass, rs: dict[str, Any], count: int) -> bool:
        """`scaleReplicaSetAndRecordEvent`: writes when the size or the desired-replicas
        annotation is off (or a deadline sits on a ReplicaSet going to 0); True when the
        size changed."""
        notes = rs_annotations(rs)
        annotation_off = (notes.get(DESIRED) != str(p.replicas)
                          or (p.replicas == 0 and bool(notes.get(DEADLINE))))
        size_off = spec_replicas(rs) != count
        if not size_off and not annotation_off:
            return False
        body = copy.deepcopy(rs)
        body["metadata"].setdefault("annotations", {})[DESIRED] = str(p.replicas)
        if count == 0:  # and not delayed on abort: no abort here
            body["metadata"]["annotations"].pop(DEADLINE, None)
        body["spec"]["replicas"] = count
        body.pop("status", None)
        # An Update with the read's resourceVersion, as the controller's: a stale read
        # conflicts and the pass is retried
        self._wrote = True
        updated = json.loads(self.apps.replace_namespaced_replica_set(
            rs["metadata"]["name"], self.namespace, body, _preload_content=False).data)
        if size_off:
            self.scaled.append((rs["metadata"]["name"], spec_replicas(rs), count))
        # The pass goes on with its own read (the controller keeps its stale copies); only
        # what it wrote is carried, so a second write of the same ReplicaSet is consistent.
        rs["spec"]["replicas"] = count
        rs["metadata"]["annotations"] = updated["metadata"].get("annotations") or {}
        rs["metadata"]["resourceVersion"] = updated["metadata"]["resourceVersion"]
        return size_off

    def remove_deadlines(self, p: Pass) -> None:
        """`removeScaleDownDeadlines` (no abort delay here): from the new and stable."""
        for rs in {id(r): r for r in (p.new, p.stable) if r is not None}.values():
            if rs_annotations(rs).get(DEADLINE):
                updated = self._patch_rs(rs, [{"op": "remove",
                                               "path": f"/metadata/annotations/{DEADLINE}"}])
                rs["metadata"]["annotations"] = dict(updated.metadata.annotations or {})
                rs["metadata"]["resourceVersion"] = updated.metadata.resource_version

    def new_rs_count(self, p: Pass) -> int:
        """`NewRSNewReplicas`."""
        bg = p.strategy.get("blueGreen")
        if bg is None:
            return basic_canary_counts(p.rollout, p.new, p.stable, p.others)[0]
        preview = bg.get("previewReplicaCount")
        if preview is None:
            return p.replicas
        active = next((rs for rs in p.all if pod_hash(rs) and pod_hash(rs) == p.status.get(
            "blueGreen", {}).get("activeSelector")), None)
        if active is None or active["metadata"]["name"] == p.new["metadata"]["name"]:
            return p.replicas
        if p.status.get("promoteFull"):
            return p.replicas
        if pod_hash(p.new) != p.status.get("currentPodHash"):
            return int(preview)
        unpaused = (not p.rollout["spec"].get("paused")
                    and not p.rollout.get("status", {}).get("pauseConditions"))
        if unpaused and p.status.get("blueGreen", {}).get("scaleUpPreviewCheckPoint"):
            return p.replicas
        return int(preview)

    def referenced(self, p: Pass, rs: Mapping[str, Any]) -> bool:
        """`isReplicaSetReferenced`: by the status' hashes or a Service's selector."""
        digest = pod_hash(rs)
        if not digest:
            return False
        status = p.rollout.get("status") or {}
        refs = {status.get("stableRS"), status.get("currentPodHash"),
                (status.get("blueGreen") or {}).get("activeSelector"),
                (status.get("blueGreen") or {}).get("previewSelector")}
        if digest in refs:
            return True
        bg = p.strategy.get("blueGreen") or {}
        for name in (bg.get("activeService"), bg.get("previewService")):
            if name and self._service_hash(name) == digest:
                return True
        return False

    def delay_helper(self, p: Pass, rs: dict[str, Any], annotated: int) -> tuple[int, int]:
        """`scaleDownDelayHelper`: (annotated ReplicaSets, desired count). No revision
        limit is set here (MaxInt32)."""
        deadline = rs_annotations(rs).get(DEADLINE)
        if not deadline and spec_replicas(rs) > 0:
            delay = (p.strategy.get("blueGreen") or {}).get("scaleDownDelaySeconds", 30)
            if delay:
                when = rfc3339(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay))
                updated = self._patch_rs(rs, [{"op": "add", "path": "/metadata/annotations/"
                                               + DEADLINE, "value": when}])
                rs["metadata"]["annotations"] = dict(updated.metadata.annotations or {})
                rs["metadata"]["resourceVersion"] = updated.metadata.resource_version
            return annotated + 1, spec_replicas(rs)
        if deadline:
            at = dt.datetime.strptime(deadline, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
            if at > dt.datetime.now(dt.UTC):
                return annotated + 1, p.replicas
            return annotated + 1, 0
        return annotated, 0

    # -- rollout/canary.go --

    def reconcile_canary_replicasets(self, p: Pass) -> bool:
        if p.halted():
            return False
        self.remove_deadlines(p)
        if p.stable_is_separate():
            _, stable_count = basic_canary_counts(p.rollout, p.new, p.stable, p.others)
            if self.scale(p, p.stable, stable_count):
                return True
        if p.new is not None and self.scale(p, p.new, self.new_rs_count(p)):
            return True
        active = [rs for rs in p.others if spec_replicas(rs) > 0]
        if not active:
            return False
        return self.scale_down_old_canary(p, active) > 0

    def scale_down_old_canary(self, p: Pass, olds: list[dict[str, Any]]) -> int:
        """`scaleDownOldReplicaSetsForCanary` after `cleanupUnhealthyReplicas` (basic
        canary: every other ReplicaSet goes down, within maxUnavailable)."""
        total = 0
        olds.sort(key=lambda rs: (rs["metadata"]["creationTimestamp"], rs["metadata"]["name"]))
        for rs in olds:
            if spec_replicas(rs) == 0 or spec_replicas(rs) == available(rs):
                continue
            total += spec_replicas(rs) - available(rs)
            self.scale(p, rs, available(rs))
        budget = sum(available(rs) for rs in p.all) - (p.replicas - max_unavailable(p.rollout))
        if budget <= 0:
            return total
        for rs in sorted(olds, key=lambda r: (revision(r), r["metadata"]["creationTimestamp"]),
                         reverse=True):
            if budget <= 0:
                break
            current = spec_replicas(rs)
            if current == 0:
                continue
            desired = current - budget if current > budget else 0
            self.scale(p, rs, desired)
            budget -= current - desired
            total += current - desired
        return total

    def at_desired_counts(self, p: Pass) -> bool:
        """`AtDesiredReplicaCountsForCanary` (basic canary, no progress threshold)."""
        new_count, stable_count = basic_canary_counts(p.rollout, p.new, p.stable, p.others)
        if p.new is None or not (spec_replicas(p.new) == new_count == available(p.new)):
            return False
        if p.stable is None or not (spec_replicas(p.stable) == stable_count
                                    == status_replicas(p.stable)):
            return False
        return sum(available(rs) for rs in p.others) == 0

    def rollout_canary(self, p: Pass) -> None:
        steps = p.strategy["canary"].get("steps") or []
        changed = (not p.status.get("currentStepHash") or p.status["currentStepHash"] != steps_hash(
            p.rollout)) or (p.status.get("currentPodHash") and p.status["currentPodHash"]
                            != pod_hash(p.new))
        if changed:  # PodTemplateOrStepsChanged: reset, then the next pass acts
            p.clear_pause = True
            p.status["promoteFull"] = False
            p.status["currentStepIndex"] = 0 if steps else None
            self.persist(p)
            return
        if self.reconcile_canary_replicasets(p):
            self.persist(p)
            return
        index = int(p.status.get("currentStepIndex") or 0)
        step = steps[index] if index < len(steps) else None
        if (not p.rollout["spec"].get("paused") and not p.status.get("promoteFull")
                and step is not None and "pause" in step
                and p.pause_condition(CANARY_PAUSE) is None
                and not (p.rollout.get("status") or {}).get("controllerPause")):
            p.add_pause.append(CANARY_PAUSE)
        self.sync_canary_status(p, steps, index, step)

    def sync_canary_status(self, p: Pass, steps: list[dict[str, Any]], index: int,
                           step: dict[str, Any] | None) -> None:
        """`syncRolloutStatusCanary`: promote, or advance a completed step."""
        if p.status.get("promoteFull"):
            p.clear_pause = True
            index = len(steps) if steps else index
        if self.should_promote_canary(p, steps, index):
            self.promote(p)
        elif step is not None and not p.rollout["spec"].get("paused") and (
                ("setWeight" in step and self.at_desired_counts(p))
                or ("pause" in step and (p.rollout.get("status") or {}).get("controllerPause")
                    and p.pause_condition(CANARY_PAUSE) is None)):
            p.status["currentStepIndex"] = index + 1
            p.remove_pause.append(CANARY_PAUSE)
        self.persist(p)

    def should_promote_canary(self, p: Pass, steps: list[dict[str, Any]], index: int) -> bool:
        if p.stable is None:
            return True  # initial deploy
        if p.status.get("abort") or p.new is None or available(p.new) < p.replicas:
            return False
        return p.status.get("promoteFull") or not steps or index == len(steps)

    def promote(self, p: Pass) -> None:
        """`promoteStable`."""
        p.clear_pause = True
        p.status["promoteFull"] = False
        p.status.setdefault("blueGreen", {})["scaleUpPreviewCheckPoint"] = False
        canary = p.strategy.get("canary")
        if canary is not None:
            steps = canary.get("steps") or []
            p.status["currentStepIndex"] = len(steps) if steps else None
        p.status["stableRS"] = p.status.get("currentPodHash")

    # -- rollout/bluegreen.go --

    def _service_hash(self, name: str) -> str:
        try:
            svc = self.core.read_namespaced_service(name, self.namespace)
        except ApiException as err:
            if err.status == 404:
                return ""
            raise
        return (svc.spec.selector or {}).get(HASH_LABEL, "")

    def switch_service(self, name: str, digest: str) -> None:
        """`switchServiceSelector`."""
        if not digest or self._service_hash(name) == digest:
            return
        self._wrote = True
        self.core.patch_namespaced_service(name, self.namespace, {
            "metadata": {"annotations": {MANAGED_BY: self.name}},
            "spec": {"selector": {HASH_LABEL: digest}}})

    def reconcile_blue_green_replicasets(self, p: Pass) -> None:
        self.remove_deadlines(p)
        if p.stable is not None:
            self.scale(p, p.stable, p.replicas)
        if p.new is not None:
            self.scale(p, p.new, self.new_rs_count(p))
        olds = [rs for rs in p.others if spec_replicas(rs) > 0]
        annotated = 0
        for rs in sorted(olds, key=lambda r: (revision(r), r["metadata"]["creationTimestamp"]),
                         reverse=True):
            if self.referenced(p, rs) or spec_replicas(rs) == 0:
                continue
            annotated, desired = self.delay_helper(p, rs, annotated)
            if spec_replicas(rs) != desired:
                self.scale(p, rs, desired)

    def ready_for_pause(self, p: Pass) -> bool:
        count = self.new_rs_count(p)
        return p.new is not None and spec_replicas(p.new) == count == available(p.new)

    def completed_blue_green_pause(self, p: Pass) -> bool:
        bg = p.strategy["blueGreen"]
        status = p.rollout.get("status") or {}
        if BLUE_GREEN_PAUSE in p.add_pause:
            return False
        if (status.get("blueGreen") or {}).get("scaleUpPreviewCheckPoint"):
            return True
        if bg.get("autoPromotionEnabled", True):
            return not bg.get("autoPromotionSeconds")  # no timed promotion here
        return bool(status.get("controllerPause")) and p.pause_condition(BLUE_GREEN_PAUSE) is None

    def rollout_blue_green(self, p: Pass) -> None:
        bg = p.strategy["blueGreen"]
        if not p.halted():
            self.switch_service(bg["previewService"], pod_hash(p.new))
        if p.status.get("currentPodHash") and p.status["currentPodHash"] != pod_hash(p.new):
            p.clear_pause = True
            p.status["promoteFull"] = False
            p.status.setdefault("blueGreen", {})["scaleUpPreviewCheckPoint"] = False
            self.sync_blue_green_status(p)
            return
        self.reconcile_blue_green_replicasets(p)
        active_hash = self._service_hash(bg["activeService"])
        fast_tracked = (p.status.get("promoteFull") or not active_hash
                        or active_hash == pod_hash(p.new))
        if (not p.status.get("abort") and self.ready_for_pause(p) and not p.halted()
                and not fast_tracked and not bg.get("autoPromotionEnabled", True)
                and p.pause_condition(BLUE_GREEN_PAUSE) is None
                and not (p.rollout.get("status") or {}).get("controllerPause")):
            p.add_pause.append(BLUE_GREEN_PAUSE)
        saturated = (p.new is not None and spec_replicas(p.new) == p.replicas
                     and rs_annotations(p.new).get(DESIRED) == str(p.replicas)
                     and available(p.new) == p.replicas)
        if not p.halted() and self.ready_for_pause(p) and saturated:
            target = active_hash
            if fast_tracked or self.completed_blue_green_pause(p):
                target = pod_hash(p.new)
            self.switch_service(bg["activeService"], target)
        self.sync_blue_green_status(p)

    def sync_blue_green_status(self, p: Pass) -> None:
        bg = p.strategy["blueGreen"]
        selectors = p.status.setdefault("blueGreen", {})
        selectors["previewSelector"] = self._service_hash(bg["previewService"])
        selectors["activeSelector"] = self._service_hash(bg["activeService"])
        active = selectors["activeSelector"]
        # shouldFullPromote: an initial deploy, or the active Service on the new pods
        if p.stable is None or not active or (active == pod_hash(p.new)
                                              and not p.status.get("abort")):
            self.promote(p)
        self.persist(p)

    # -- status --

    def persist(self, p: Pass) -> None:
        """`calculateBaseStatus` + the strategy's counts + `persistRolloutStatus` (the pause
        conditions as `CalculatePauseStatus` leaves them)."""
        status = p.status
        status["currentPodHash"] = pod_hash(p.new) or template_hash(
            p.rollout["spec"]["template"], status.get("collisionCount"))
        status["currentStepHash"] = steps_hash(p.rollout) or None
        status["replicas"] = sum(status_replicas(rs) for rs in p.all)
        status["updatedReplicas"] = status_replicas(p.new)
        status["readyReplicas"] = sum(int((rs.get("status") or {}).get("readyReplicas") or 0)
                                      for rs in p.all)
        status["availableReplicas"] = sum(available(rs) for rs in p.all)
        status["HPAReplicas"] = status["replicas"]
        status["selector"] = ",".join(f"{k}={v}" for k, v in sorted(
            p.rollout["spec"]["selector"].get("matchLabels", {}).items()))
        active_hash = (status.get("blueGreen") or {}).get("activeSelector")
        active = next((rs for rs in p.all if active_hash and pod_hash(rs) == active_hash), None)
        if "blueGreen" in p.strategy and active is not None:
            status["HPAReplicas"] = status_replicas(active)
            status["availableReplicas"] = available(active)
            status["selector"] = ",".join(f"{k}={v}" for k, v in sorted(
                active["spec"]["selector"]["matchLabels"].items()))
        self._pause_status(p)
        status["observedGeneration"] = str(p.rollout["metadata"]["generation"])
        if _clean(status) != _clean(p.rollout.get("status") or {}):
            self._wrote = True
            self.custom.patch_namespaced_custom_object_status(
                GROUP, API_VERSION, self.namespace, PLURAL, self.name, {"status": status})

    def _pause_status(self, p: Pass) -> None:
        status = p.status
        kept = [] if p.clear_pause else [
            c for c in (p.rollout.get("status") or {}).get("pauseConditions") or []
            if c.get("reason") not in p.remove_pause]
        controller_pause = bool((p.rollout.get("status") or {}).get("controllerPause"))
        for reason in p.add_pause:
            if not any(c.get("reason") == reason for c in kept):
                kept.append({"reason": reason, "startTime": rfc3339(dt.datetime.now(dt.UTC))})
                controller_pause = True
        status["pauseConditions"] = kept or None
        status["controllerPause"] = controller_pause if kept else None

    # -- the loop --

    def reconcile(self) -> bool:
        """One pass of `syncHandler`; True when it wrote anything."""
        self._wrote = False
        rollout = self._rollout()
        p = Pass(rollout, self._replicasets(rollout["metadata"]["uid"]))
        if p.new is None:
            self.create_replicaset(p)
            return True
        if self.is_scaling_event(p):
            self.sync_replicas_only(p)
        elif "blueGreen" in p.strategy:
            self.rollout_blue_green(p)
        else:
            self.rollout_canary(p)
        return self._wrote

    def sync_replicas_only(self, p: Pass) -> None:
        if "blueGreen" in p.strategy:
            self.reconcile_blue_green_replicasets(p)
        else:
            self.reconcile_canary_replicasets(p)
        self.persist(p)

    def run(self, timeout: float = 120, quiet: float = 1.5) -> bool:
        """Reconcile as the controller does on every event, until a pass writes nothing and
        the namespace (with its ReplicaSets' counts of ready and available pods, which the
        controller acts on) stayed the same for `quiet` seconds; True when it wrote. A
        write that lost a race (a conflict, or a JSON patch of an annotation another pass
        removed) is retried on a fresh read."""
        deadline = time.monotonic() + timeout
        state: dict[str, Any] = {"print": None, "since": time.monotonic()}
        wrote = False
        while time.monotonic() < deadline:
            self.env.plane.check_alive()
            try:
                if self.reconcile():
                    wrote, state["print"] = True, None
                    continue
            except ApiException as err:
                if err.status not in (409, 422):
                    raise
                continue
            now = self._fingerprint()
            if now is None or now != state["print"]:
                state.update({"print": now, "since": time.monotonic()})
            elif time.monotonic() - state["since"] >= quiet:
                return wrote
            time.sleep(0.25)
        raise TimeoutError(f"the Rollout {self.namespace}/{self.name} did not settle in "
                           f"{timeout:.0f}s")

    def _fingerprint(self) -> tuple[Any, ...] | None:
        base = settled(self.env, self.namespace)
        if base is None:
            return None
        counts = sorted((rs["metadata"]["name"], available(rs), status_replicas(rs),
                         (rs.get("status") or {}).get("readyReplicas"))
                        for rs in self.env.api_get(
                            f"/apis/apps/v1/namespaces/{self.namespace}/replicasets")["items"])
        return (base, tuple(counts))

    def promote_as_user(self) -> None:
        """What `kubectl argo rollouts promote` sends for a paused Rollout: the pause
        conditions go (the controller then completes the pause)."""
        self.env.kubectl("-n", self.namespace, "patch", f"{PLURAL}.{GROUP}/{self.name}",
                         "--subresource=status", "--type=merge", "-p",
                         '{"status":{"pauseConditions":null}}', check=True)
