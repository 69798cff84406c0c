"""Rollout benchmark: a Deployment scaled down mid-rollout, 200 to 4,000 pods.

Two ReplicaSets of equal size share the nodes; the scale-down halves the Deployment, so
both delete and the sync-order model (webhook/core/deployment/sync_orders.py) runs.
Measured per size, median of three runs, core time only (objects built beforehand):
- predict: the victims and the possible victims over every sync order;
- webhook: the same plus the verdict (as /validate-scale decides it);
- plan: plus the safe replica count, found by re-predicting (binary search).
Pools alternate per node; "costed" pods carry their pool's cost, "uncosted" ones none
(pods from before the install), where rule 5 and so the model decide the most.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from tests.support import factories as f
from webhook.core.deployment.deployment_util import MAX_REPLICAS_ANNOTATION
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import default_policy
from webhook.core.scale.predict import predict_scale
from webhook.core.scale.scope import decide_scale, preview_scale
from webhook.core.view.snapshot import Snapshot

from .results import record

NOW = parse_time_ns("2026-11-22T12:00:00Z")
POOL_COST = {"inference": "1000", "hybrid": "-100"}
WEBHOOK_TIMEOUT_MS = 5_000  # the scale webhook's timeoutSeconds (manifests)


def rollout(size: int, costed: bool, seed: int = 3) -> tuple[Snapshot, dict]:
    """A Deployment of `size` pods split evenly over an old and a new ReplicaSet."""
    rng = random.Random(seed)
    nodes = [f.node(f"n{i}", ("inference", "hybrid")[i % 2]) for i in range(max(size // 8, 2))]
    deployment = f.deployment("web", replicas=size, max_surge=0, max_unavailable=1)
    objects = [deployment, *nodes]
    for index, (name, created) in enumerate((("web-old", "2026-01-01T00:00:00Z"),
                                             ("web-new", "2026-01-02T00:00:00Z"))):
        rs = f.replicaset(name, replicas=size // 2, owner=deployment, image=f"serve:{index}",
                          pod_hash=name, created=created,
                          annotations={MAX_REPLICAS_ANNOTATION: str(size)})
        objects.append(rs)
        for i in range(size // 2):
            node = rng.choice(nodes)
            pool = node["metadata"]["labels"]["node.usage"]
            objects.append(f.pod(f"{name}-{i}", owner=rs, node_name=node["metadata"]["name"],
                                 cost=POOL_COST[pool] if costed else None,
                                 ready_time=f"2026-01-01T00:{i % 60:02d}:{i % 59:02d}Z"))
    return Snapshot(objects), deployment


def median_ms(run: Callable[..., object], *args: object, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    policy = default_policy()
    print(f"{'pods':>5} {'costs':>8} {'predict ms':>11} {'webhook ms':>11} {'plan ms':>9} "
          f"{'possible':>9}")
    for size in (200, 1000, 4000):
        for costed in (True, False):
            view, deployment = rollout(size, costed)
            target = size // 2
            possible = len(predict_scale(view, deployment, target, NOW).possible_victims)
            predict = median_ms(predict_scale, view, deployment, target, NOW)
            webhook = median_ms(decide_scale, view, policy, deployment, target, NOW)
            plan = median_ms(preview_scale, view, policy, deployment, target, NOW)
            print(f"{size:>5} {'costed' if costed else 'uncosted':>8} {predict:>11.0f} "
                  f"{webhook:>11.0f} {plan:>9.0f} {possible:>9}")
            if size >= 1000 and not costed:  # the case the sync-order model decides most
                what = f"rollout, {size:,} pods over 2 ReplicaSets halved, costs missing"
                record(f"{what}: webhook answer (core)", f"{webhook:.0f} ms",
                       f"< {WEBHOOK_TIMEOUT_MS:,} ms (scale webhook timeout)",
                       webhook < WEBHOOK_TIMEOUT_MS)
                record(f"{what}: predict / plan", f"{predict:.0f} / {plan:.0f} ms",
                       "informative: plan re-predicts to find the safe count", None)


if __name__ == "__main__":
    main()
