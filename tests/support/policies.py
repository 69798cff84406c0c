"""Policies the tests share."""

from __future__ import annotations

from pathlib import Path

from webhook.cluster.state import load_policy
from webhook.core.policy.policy import Policy

# The built-in pools with flat costs, as a file written before consolidation existed.
FLAT_POLICY_FILE = str(Path(__file__).with_name("flat-policy.yaml"))


def flat_policy() -> Policy:
    """inference 1000 (protected) and hybrid -100, one cost per pool."""
    return load_policy(FLAT_POLICY_FILE)
