"""The reconciler: sets deletion costs on scheduled pods, leader-elected and rate-limited.

Pods that existed before poolguard was installed, pods bound while the binding webhook
was unavailable (its failure policy is Ignore) and pods whose node moved to another pool
get the cost here. One concern per module, listed in the order they build on each other:

- options.py    the settings every mode shares (the `reconcile` command's flags)
- decide.py     pure: what a pod needs (the core's decide_cost, plus what is skipped, why)
- brake.py      pure: the brake on mass rewrites of managed costs in one full pass
- workqueue.py  deduplicating work queue, token-bucket rate limiter
- lease.py      leader election on a Lease; holding it for a one-shot pass
- metrics.py    Prometheus metrics, /metrics and /healthz
- writer.py     guarded merge patches, conflict retries, Events and log lines
- passes.py     `--once` and `--cleanup` passes and their Summary line
- preview.py    `--state FILE --dry-run`: the costs it would write, without a cluster
- rebalancer.py overflow pods moved home while leading: evictions, the node taint, landings
- service.py    the watch-driven Service: worker, resyncs, policy-file reloads, leadership
"""
