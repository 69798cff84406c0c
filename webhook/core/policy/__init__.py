"""The node-pool policy.

- policy_field.py  what a policy field declares (`described`), its key, and how errors name it
- pool_bands.py    the int32 values each pool's pods may carry, and how bands nest
- scale_down_policy.py  the `scaleDown` section: the rules, their enforcement, and each
                   requester group's (exempt users, autoscalers, GitOps controllers)
- policy.py        the policy: its pools, validation with field-named errors, pool lookups
- policy_text.py   the policy explained in plain words (`policy check`)
- policy_schema.py its JSON Schema, generated from the model (`policy schema`, the chart)
- rebalance_policy.py  the `rebalance` section: moving overflow pods home (off by default)
- pool_coverage.py the policy checked against the nodes: each pool's nodes, what names nothing
- policy_change.py a new policy vetted against the nodes before it replaces the one in force
"""
