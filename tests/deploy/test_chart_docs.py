"""The helm, kubectl poolguard and python -m webhook commands of the docs use real
values files, values and flags.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import yaml

from tests.support.chart import (
    CHART,
    REPO,
)

# --------------------------------------------------------------------------- the docs


def _doc_commands(*docs: Path) -> list[list[str]]:
    """Shell commands in fenced sh blocks and in inline `...` spans of these docs."""
    commands = []
    for doc in docs:
        text = doc.read_text()
        snippets = []
        for block in re.findall(r"```sh[^\n]*\n(.*?)```", text, re.S):
            joined = re.sub(r"\\\n\s*", " ", block)
            snippets += [re.sub(r"\s#\s.*$", "", line).strip() for line in joined.splitlines()]
        # Inline spans with flags are commands; `python -m webhook plan` alone is a name.
        snippets += [span for span in re.findall(
            r"`((?:helm|kubectl poolguard|python -m webhook) [^`]+)`", text) if " -" in span]
        for snippet in filter(None, snippets):
            for part in re.split(r"\s(?:\||&&)\s", snippet):
                words = part.split()
                if words:
                    commands.append(words)
    return commands


def _has_value(path: str) -> bool:
    node: Any = yaml.safe_load((CHART / "values.yaml").read_text())
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def test_doc_commands_use_real_values_files_and_flags() -> None:
    from webhook.cli.kubectl_plugin import build_parser as plugin_parser
    from webhook.cli.main import build_parser as webhook_parser

    docs = (REPO / "docs" / "install.md", REPO / "README.md", REPO / "docs" / "plan.md",
            REPO / "docs" / "policy.md", REPO / "docs" / "gitops.md")
    seen = {"helm": 0, "plugin": 0, "webhook": 0}
    placeholders = {"N": "3"}  # the docs' placeholders, made parseable
    for words in _doc_commands(*docs):
        words = [placeholders.get(w, w) for w in words]
        if words[0] == "helm":
            seen["helm"] += 1
            for flag, arg in itertools.pairwise(words):
                if flag == "--set":
                    for assignment in arg.split(","):
                        key = assignment.split("=", 1)[0]
                        assert _has_value(key), f"helm --set {key}: no such value"
                if flag in ("-f", "--values"):
                    assert (REPO / arg).is_file(), arg
        elif words[:2] == ["kubectl", "poolguard"]:
            seen["plugin"] += 1
            plugin_parser().parse_known_args(words[2:])  # SystemExit (fails) if unusable
        elif words[:3] == ["python", "-m", "webhook"] and len(words) > 4 and not any(
                w.startswith("[") for w in words):  # synopses with [optional] parts are not
            seen["webhook"] += 1
            webhook_parser().parse_args(words[3:])
    assert seen["helm"] >= 3 and seen["plugin"] >= 2 and seen["webhook"] >= 2, seen
