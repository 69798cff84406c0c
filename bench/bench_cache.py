"""Live cache benchmark: memory and garbage-collection pause per 10,000 realistic pods.

    .venv/bin/python -m bench.bench_cache [--pods 10000]

The fake API server (tests/support/kubeapi/, in its own process: bench/fake_api.py)
serves N pods shaped like a real cluster's (tests/support/realistic.py: about 8.5 KB of
JSON each, a third of it managedFields). A fresh
process lists and watches them with today's LiveCluster and, in another fresh process,
with the one of BASELINE_COMMIT (bench/baseline.py), and reports for each: resident
memory added by the synced cache, the peak during the initial list, and the time of a
full garbage collection afterwards (what a request can be stalled by). 150,000 pods
are extrapolated linearly (both grow with the number of objects).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.realistic import realistic_pod
from webhook.cluster.live import FREEZE_EVERY
from webhook.core.view.resource import PODS

from .baseline import BASELINE_COMMIT
from .fake_api import serve_fake_api
from .results import record

ROOT = Path(__file__).resolve().parent.parent

RSS_GOAL_MB = 60.0  # per 10,000 pods
PAUSE_GOAL_MS = 50.0  # at 150,000 pods


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(variant: str, kubeconfig: str) -> None:
    """One cache, synced once; prints its figures as JSON."""
    from webhook.cluster.kubeclient import api_client_from

    if variant == "old":
        source = subprocess.run(["git", "-C", str(ROOT), "show",
                                 f"{BASELINE_COMMIT}:webhook/live.py"],
                                check=True, capture_output=True, text=True).stdout
        # Its relative imports, pointed at where those modules are today (the code it
        # calls is the same).
        source = (source.replace("from .core.cluster import RESOURCE_OF_KIND, Snapshot",
                                 "from webhook.core.kinds.registry import RESOURCE_OF_KIND\n"
                                 "from webhook.core.view.snapshot import Snapshot")
                  .replace("from .core.kube import", "from webhook.core.objects.kube import")
                  .replace("from .kubeclient import", "from webhook.cluster.kubeclient import"))
        spec = importlib.util.spec_from_loader("webhook._baseline_live", loader=None)
        live = importlib.util.module_from_spec(spec)
        live.__package__ = "webhook"
        sys.modules[spec.name] = live  # dataclasses look their module up
        exec(compile(source, "baseline live.py", "exec"), live.__dict__)
    else:
        from webhook.cluster import live
    api = api_client_from(kubeconfig, None)
    gc.collect()
    before = rss_mb()
    pods = getattr(live, "PODS", PODS)  # the baseline has its own
    cluster = live.LiveCluster(api, (pods,))
    started = time.perf_counter()
    cluster.start()
    assert cluster.wait_for_sync(600)
    sync_s = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    after = rss_mb()
    frozen = gc_pause_ms()
    since_freeze = frozen
    if variant == "new":  # the most a collection walks: FREEZE_EVERY - 1 fresh records
        for index in range(live.FREEZE_EVERY - 1):
            pod = realistic_pod(index)
            pod["metadata"]["resourceVersion"] = f"9{index}"
            cluster.apply(pods, "MODIFIED", pod)
        since_freeze = gc_pause_ms()
    count = len(cluster.all_pods())
    cluster.stop()
    print(json.dumps({"pods": count, "rss_mb": after - before, "peak_mb": peak - before,
                      "gc_ms": frozen, "gc_since_freeze_ms": since_freeze,
                      "sync_s": sync_s}))


def gc_pause_ms() -> float:
    """The shortest of three full collections, in ms."""
    pauses = []
    for _ in range(3):
        started = time.perf_counter()
        gc.collect()
        pauses.append((time.perf_counter() - started) * 1000)
    return min(pauses)


def measure(variant: str, kubeconfig: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "bench.bench_cache", "--child", variant,
                          str(kubeconfig)],
                         check=True, capture_output=True, text=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "KUBECONFIG"))
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    size = len(json.dumps(realistic_pod(1)))
    managed = len(json.dumps(realistic_pod(1)["metadata"]["managedFields"]))
    print(f"live cache: {args.pods:,} pods of {size / 1000:.1f} KB JSON ({managed / 1000:.1f} KB "
          f"managedFields), fake API server; old = webhook/live.py at {BASELINE_COMMIT}")
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        server = serve_fake_api(kubeconfig, realistic_pods=args.pods)
        try:
            new, old = measure("new", kubeconfig), measure("old", kubeconfig)
        finally:
            server.stdin.close()
            server.wait(30)
    scale = 10_000 / args.pods
    for name, r in (("new", new), ("old", old)):
        print(f"  {name}: {r['pods']:,} pods synced in {r['sync_s']:.1f} s; resident "
              f"+{r['rss_mb']:.0f} MB (peak during the list +{r['peak_mb']:.0f} MB); full GC "
              f"{r['gc_ms']:.1f} ms ({r['gc_since_freeze_ms']:.1f} ms with {FREEZE_EVERY - 1:,} "
              "records since the last freeze)")
    per_10k = new["rss_mb"] * scale
    record("live cache memory per 10,000 pods (one replica's cache)", f"{per_10k:.0f} MB",
           f"<= {RSS_GOAL_MB:.0f} MB; old {old['rss_mb'] * scale:.0f} MB", per_10k <= RSS_GOAL_MB)
    record("live cache peak during the initial list, per 10,000 pods",
           f"{new['peak_mb'] * scale:.0f} MB", f"old {old['peak_mb'] * scale:.0f} MB", None)
    record("memory at 150,000 pods (extrapolated)", f"{new['rss_mb'] * 150_000 / args.pods:.0f} MB",
           f"old {old['rss_mb'] * 150_000 / args.pods:.0f} MB", None)
    # Frozen records are not walked, so the pause does not grow with the cache: it is
    # bounded by what arrived since the last freeze (at most FREEZE_EVERY events).
    worst = max(new["gc_ms"], new["gc_since_freeze_ms"])
    record("live cache sync time (fake API server, paged)", f"{new['sync_s']:.1f} s",
           f"old (one unpaged list) {old['sync_s']:.1f} s", None)
    record("full GC pause, cache frozen (any cache size)", f"{new['gc_ms']:.1f} ms",
           f"old at {args.pods:,} pods {old['gc_ms']:.0f} ms", None)
    record(f"full GC pause at 150,000 pods (<= {FREEZE_EVERY:,} records since the last freeze)",
           f"{worst:.0f} ms", f"<= {PAUSE_GOAL_MS:.0f} ms; old extrapolated "
           f"{old['gc_ms'] * 150_000 / args.pods:.0f} ms", worst <= PAUSE_GOAL_MS)


if __name__ == "__main__":
    main()
