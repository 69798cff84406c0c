"""The reconciler's settings, shared by every mode (the `reconcile` command's flags)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    """Settings shared by every mode; webhook.cli.reconcile builds them from the flags."""

    dry_run: bool = False
    qps: float = 5.0
    burst: int = 10
    resync_seconds: float = 600.0
    events: bool = True
    exclude_namespaces: tuple[str, ...] = ("kube-system", "poolguard")
    identity: str = "poolguard-reconciler"
    lease_namespace: str = "poolguard"
    lease_name: str = "poolguard-reconciler"
    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    rebalance_interval: float = 30.0  # seconds between rebalance steps (policy-enabled only)
    rebalance_moves_per_minute: float = 6.0
    max_rewrite_share: float = 0.2  # brake.py: the share of managed costs a pass may rewrite
    accept_rewrites: str | None = None  # the policy generation whose rewrites are confirmed
    policy_configmap: str | None = None  # NAMESPACE/NAME: where the brake's Events go
