"""The deploy files' parts that follow from the workload-kind registry, generated.

`make generate` (`python -m webhook.deploy_gen`) rewrites them: the webhook rules for each
kind's updates and `/scale`, the RBAC that reads each kind and the children it sizes, and
the chart's `scaleCheck.kinds` switches, in the kustomize base and overlays and in the Helm
chart. Everything else in those files is written by hand; each generated part sits between
`begin NAME` and `end NAME` marker comments that say so. tests/deploy/test_generated.py
fails while the committed files differ from what the registry gives.

- rules.py      what the registry implies: admission rules and RBAC rules, each with the
                chart switch that guards it (a custom resource's)
- render.py     those rules as the files' YAML and Helm template text
- blocks.py     the marked blocks of a file, replaced by their generated text
- targets.py    which block of which file holds what, and the schema's switches
- __main__.py   the command: write the files under a root, or --check them
"""
