"""The node-pool policy.

- policy.py        its shape, validation with field-named errors, and pool lookups
- policy_text.py   the policy explained in plain words (`policy check`)
- policy_schema.py its JSON Schema, generated from the model (`policy schema`, the chart)
- rebalance_policy.py  the `rebalance` section: moving overflow pods home (off by default)
- pool_coverage.py the policy checked against the nodes: each pool's nodes, what names nothing
- policy_change.py a new policy vetted against the nodes before it replaces the one in force
"""
