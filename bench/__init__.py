"""Benchmarks, run from the repository root as modules: `python -m bench.<name>`.

The `make bench*` targets run them. Each prints its figures and records them with
results.py; table.py prints every recorded figure as one table.

- bench_core.py        predict and judge a scale-down, today's core against baseline.py's
- bench_rollout.py     a Deployment scaled down mid-rollout: the sync-order model
- bench_cache.py       the live cache: memory and GC pause per 10,000 realistic pods
- bench_reconciler.py  the reconciler's API writes and pass times (fake API server)
- bench_server.py      the pods CREATE path against the Go reference and an allow-all app
- bench_scalecheck.py  scale checks of a 10,000-pod Deployment through HTTPS
- bench_scale.py       poolguard on the e2e control plane at 30,000 pods (scale_plan.py)
- soak.py              a mixed load stepped up to saturation, then faults

Helpers: baseline.py (the core at an older commit), fake_api.py (the fake API server in
its own process), allow_all_server.py (the allow-all app under serve's gunicorn
settings), heyrun.py (the `hey` load generator), results.py and table.py.
"""
