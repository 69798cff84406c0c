"""docs/install.md: every documented command matches the code."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.support.install import (
    INSTALL_MK,
    REPO,
)

# =========================================================================== docs/install.md


def _doc_commands() -> list[list[str]]:
    """Every shell command in docs/install.md: fenced sh blocks and inline `...` spans."""
    text = (REPO / "docs" / "install.md").read_text()
    snippets = []
    for block in re.findall(r"```sh[^\n]*\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        snippets += [re.sub(r"\s#\s.*$", "", line).strip() for line in joined.splitlines()]
    # Inline spans: the ones with flags are commands; `python -m certs create` alone is a name.
    snippets += [span for span in re.findall(r"`((?:python|make|kubectl) [^`]+)`", text)
                 if not span.startswith("python") or " --" in span]
    commands = []
    for snippet in filter(None, snippets):
        for part in re.split(r"\s(?:\||&&)\s", snippet):
            words = shlex.split(part)
            if ">" in words:
                words = words[:words.index(">")]
            if words:
                commands.append(words)
    return commands


def test_install_doc_commands_match_the_code() -> None:
    from certs.cli import build_parser

    commands = _doc_commands()
    make_targets = set(re.findall(r"^([a-z0-9-]+):", INSTALL_MK.read_text(), re.M))
    make_targets |= set(re.findall(r"^([a-z0-9-]+):", (REPO / "Makefile").read_text(), re.M))
    make_targets |= set(re.findall(r"^([a-z0-9-]+):", (REPO / "mk" / "chart.mk").read_text(), re.M))
    seen = {"certs": 0, "make": 0, "paths": 0}
    for words in commands:
        if words[:3] == ["python", "-m", "certs"] and len(words) > 3:
            try:
                build_parser().parse_args(words[3:])
            except SystemExit:
                pytest.fail(f"docs/install.md: {' '.join(words)} does not parse")
            seen["certs"] += 1
        elif words[0] == "make":
            targets = [w for w in words[1:] if "=" not in w]
            assert set(targets) <= make_targets, words
            seen["make"] += 1
        for word in words:
            if word.startswith("manifests/"):
                assert (REPO / word).exists() or "mine" in word, word
                seen["paths"] += 1
    assert seen["certs"] >= 6 and seen["make"] >= 4 and seen["paths"] >= 4, seen
    text = (REPO / "docs" / "install.md").read_text()
    for needle in ("poolguard-webhook-tls", "poolguard.dev/skip", "/mutate-pods",
                   "/mutate-bindings", "/validate-scale", "/validate-workloads",
                   "cert-manager.io/inject-ca-from: poolguard/poolguard-webhook"):
        assert needle in text, needle
