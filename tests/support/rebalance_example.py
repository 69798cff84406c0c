"""The bundled rebalance example (examples/rebalance-state.yaml) and variants of it."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.install import REPO

REBALANCE_STATE = REPO / "examples" / "rebalance-state.yaml"


def with_home_tainted(directory: Path) -> Path:
    """The example with its one inference node that has room (gpu-inf-2) tainted
    NoSchedule, written to `directory`: no overflow pod has room to go home."""
    state = yaml.safe_load(REBALANCE_STATE.read_text())
    for item in state["items"]:
        if item["metadata"]["name"] == "gpu-inf-2":
            item["spec"] = {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}
    tainted = directory / "state.yaml"
    tainted.write_text(yaml.safe_dump(state))
    return tainted
