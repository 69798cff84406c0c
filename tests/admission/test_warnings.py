"""Warnings as kubectl shows them: one `Warning:` line per thought, never one cut in two.

The API server copies each warning of an admission response into a `Warning` header (at
most 4096 characters in all; past that it cuts every warning to 256), and kubectl prints
each header as a line of its own: a thought split over two warnings reads as two.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import requests
import yaml

from tests.support.serving import running_server

REPO = Path(__file__).resolve().parents[2]
REVIEWS = REPO / "examples" / "reviews"
PER_WARNING = 256  # the API server's cut once a response's warnings pass 4096 characters


@contextmanager
def serve_in_warn_mode(directory: Path) -> Iterator[Callable[[str, str], dict]]:
    """`serve` on the bundled example, its policy in `warn` mode; yields a function that
    posts a review of examples/reviews to a path and returns its response."""
    policy = yaml.safe_load((REPO / "examples" / "policy.yaml").read_text())
    policy["scaleDown"]["enforcement"] = "warn"
    (directory / "policy.yaml").write_text(yaml.safe_dump(policy))
    with running_server(directory, "--state", "examples/cluster-state.yaml", "--policy",
                        str(directory / "policy.yaml")) as (url, ca, _):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        yield lambda path, review: session.post(
            url + path, json=json.loads((REVIEWS / review).read_text()),
            timeout=30).json()["response"]
        session.close()


SERVER = serve_in_warn_mode  # the `server` fixture (conftest.py)


def assert_one_line_each(warnings: list[str]) -> None:
    assert warnings
    assert sum(map(len, warnings)) <= 4096
    for warning in warnings:
        assert len(warning) <= PER_WARNING and "\n" not in warning, warning
        assert not warning.startswith("..."), f"a thought continued from the last: {warning}"


def test_the_clamp_says_what_it_did_in_one_warning(server) -> None:
    answer = server("/mutate-scale", "scale-deployment-hpa.json")
    assert_one_line_each(answer["warnings"])
    [clamp] = [w for w in answer["warnings"] if "from 6 to 4 replicas" in w]
    assert clamp == ("poolguard: scaled Deployment ml/llm-serve from 6 to 4 replicas, not the "
                     "3 asked: 3 would break [protectedLast] now; 4 is the smallest count that "
                     "breaks no rule")


def test_a_warned_scale_down_gives_the_rule_and_the_fix_one_line_each(server) -> None:
    answer = server("/validate-scale", "scale-deployment.json")
    assert answer["allowed"] is True
    warnings = answer["warnings"]
    assert_one_line_each(warnings)
    rule = next(w for w in warnings if w.startswith("poolguard [protectedLast]"))
    assert "llm-serve-7c9d8f6b5-x7k2p (node gpu-inf-1, pool inference)" in rule
    assert "llm-serve-7c9d8f6b5-k4z9s (node gpu-hyb-2, pool hybrid)" in rule
    fix = next(w for w in warnings if w.startswith("poolguard fix: "))
    assert "scale to 4 replicas for now" in fix


def test_each_option_of_the_fix_is_a_warning_of_its_own_naming_pods_and_commands(server):
    """The safe count and the cost to set are two things to do: two warnings, each whole."""
    warnings = server("/validate-scale", "scale-deployment.json")["warnings"]
    assert_one_line_each(warnings)
    assert [w for w in warnings if w.startswith("poolguard fix: ")] == [
        "poolguard fix: scale to 4 replicas for now (the smallest count above 3 that breaks no "
        "rule)",
        "poolguard fix: give the surviving pod outside protected pools a cost below 1000, then "
        "retry: kubectl annotate pod -n ml llm-serve-7c9d8f6b5-k4z9s "
        "controller.kubernetes.io/pod-deletion-cost=-100 --overwrite"]
