"""Every command in README.md and docs/ is run or checked, so none can drift from the code.

Each fenced shell block carries a marker after its language:

- `sh run`: needs no cluster. Each command is executed, in order, in a scratch directory
  that links the repository's files, with `python` the test's interpreter, `make` a dry
  run (`make -n`), and `KUBECONFIG` pointing at a fake API server holding the bundled
  `examples/cluster-state.yaml`. Every command must exit 0.
- `text output`, right after a `sh run` block: what its last command prints, line for line
  (a line ending in `...` matches any line that starts with the text before it).
- `sh check`: not run here: it needs a cluster, a registry or a running server, or runs
  long (`make test`). `python -m webhook`, `python -m certs` and `kubectl poolguard`
  commands must parse with the real argument parsers, `make` commands must dry-run,
  `helm --set` keys must be chart values, and every repository file a command names must
  exist.
- `text synopsis`: a command's usage, naming exactly the flags the command has.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.install import (
    INSTALL_MK,
    REPO,
)
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.lws_factories import lws_state
from webhook.cli.plan_document import plan_document
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_MARKERS = {"run", "check"}
FENCE = re.compile(r"^( *)```([^\n]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)
# Files a documented command makes itself (certificates, rendered manifests): not in git.
GENERATED = (".certs", "build/", "~", "<")
REPO_DIRS = ("manifests/", "charts/", "examples/", "docs/", "tests/", "mk/", "webhook/",
             "certs/", "bench/")
PLACEHOLDERS = {"N": "3"}  # the docs' placeholders, made parseable
CLUSTER_PROGRAMS = {"kubectl", "helm", "docker", "curl", "kind", "cmctl", "source", "cat",
                    "rm", "mv", "openssl", "base64"}


@dataclass(frozen=True)
class Block:
    """One fenced block of a doc: its language, marker, body and where it starts."""

    doc: Path
    language: str
    marker: str
    body: str
    line: int

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(REPO)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of a doc, in order (indented ones inside lists too)."""
    text = doc.read_text()
    found = []
    for match in FENCE.finditer(text):
        language, _, marker = match.group(2).strip().partition(" ")
        body = textwrap.dedent(match.group(1) + match.group(3).replace(
            "\n" + match.group(1), "\n"))
        found.append(Block(doc, language, marker.strip(), body,
                           text.count("\n", 0, match.start()) + 1))
    return found


def all_blocks() -> list[Block]:
    return [block for doc in DOCS for block in blocks(doc)]


def commands(body: str) -> list[str]:
    """The shell commands of a block: continuations joined, comments and blanks dropped."""
    joined = re.sub(r"\\\n\s*", " ", body)
    lines = [re.sub(r"(^|\s)#\s.*$", "", line).strip() for line in joined.splitlines()]
    return [line for line in lines if line]


def simple_commands(command: str) -> Iterator[list[str]]:
    """Each program call of a command line (split at pipes and &&), redirections dropped,
    leading VAR=value assignments dropped."""
    for part in re.split(r"\s(?:\||&&|;)\s", command):
        words = shlex.split(part)
        for stop in (">", "2>", ">>"):
            if stop in words:
                words = words[:words.index(stop)]
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
            words = words[1:]
        if words:
            yield [PLACEHOLDERS.get(w, w) for w in words]


# --------------------------------------------------------------------------- markers


def test_every_shell_block_says_whether_it_needs_a_cluster() -> None:
    shell = [b for b in all_blocks() if b.language in ("sh", "bash", "shell", "console")]
    assert len(shell) >= 30, len(shell)
    for block in shell:
        assert block.language == "sh" and block.marker in SHELL_MARKERS, (
            f"{block.where}: mark the block ```sh run (no cluster needed: the test runs it) "
            f"or ```sh check (the test parses it), not ```{block.language} {block.marker}")


def test_outputs_follow_the_command_they_show() -> None:
    outputs = 0
    for doc in DOCS:
        previous: Block | None = None
        for block in blocks(doc):
            if block.marker == "output":
                assert previous is not None and previous.marker == "run", (
                    f"{block.where}: a `text output` block must follow a ```sh run block")
                outputs += 1
            previous = block
    assert outputs >= 4, outputs


# --------------------------------------------------------------------------- sh run


@pytest.fixture(scope="module")
def example_cluster() -> Iterator[FakeKubeAPI]:
    """A fake API server holding the bundled example state."""
    state = [d for d in yaml.safe_load_all((REPO / "examples" / "cluster-state.yaml")
                                           .read_text()) if d]
    objects = [o for d in state for o in (d["items"] if d["kind"].endswith("List") else [d])]
    with FakeKubeAPI() as api:
        api.put(*objects)
        yield api


def scratch_dir(tmp_path: Path) -> Path:
    """A directory that looks like a checkout (links to the repository's files), with
    nothing made by earlier runs (.certs/, build/)."""
    scratch = tmp_path / "checkout"
    scratch.mkdir()
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name != "build":
            (scratch / entry.name).symlink_to(entry)
    return scratch


def shims(tmp_path: Path) -> Path:
    """`python` is this interpreter, `make` only says what it would do."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Scripts, not links: a link to a venv's interpreter would lose the venv.
    for name, target in (("python", sys.executable), ("make", f"{_real('make')} -n")):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\nexec {target} \"$@\"\n")
        shim.chmod(0o755)
    return bin_dir


def _real(program: str) -> str:
    found = subprocess.run(["sh", "-c", f"command -v {program}"], capture_output=True,
                           text=True, check=False).stdout.strip()
    assert found, f"{program} is not installed"
    return found


def output_matches(expected: str, actual: str) -> str | None:
    """None when `actual` is what the doc shows, else the first difference."""
    want, got = expected.rstrip("\n").splitlines(), actual.rstrip("\n").splitlines()
    for number, (line, real) in enumerate(itertools.zip_longest(want, got), 1):
        if line is None or real is None:
            return f"line {number}: the doc shows {line!r}, the command prints {real!r}"
        if line.endswith("...") and real.startswith(line[:-3]):
            continue
        if line != real:
            return f"line {number}: the doc shows\n  {line!r}\nthe command prints\n  {real!r}"
    return None


@pytest.mark.parametrize("doc", [d for d in DOCS if any(b.marker == "run" for b in blocks(d))],
                         ids=lambda d: d.name)
def test_run_blocks_work_and_print_what_the_doc_shows(
        doc: Path, tmp_path: Path, example_cluster: FakeKubeAPI) -> None:
    scratch = scratch_dir(tmp_path)
    env = {**os.environ, "PATH": f"{shims(tmp_path)}{os.pathsep}{os.environ['PATH']}",
           "KUBECONFIG": str(example_cluster.write_kubeconfig(tmp_path / "kubeconfig"))}
    last = ""
    ran = 0
    for block in blocks(doc):
        if block.marker == "run":
            for command in commands(block.body):
                programs = {words[0] for words in simple_commands(command)}
                assert not programs & CLUSTER_PROGRAMS, (
                    f"{block.where}: {command} needs a cluster: mark the block ```sh check")
                result = subprocess.run(["bash", "-c", command], cwd=scratch, env=env,
                                        capture_output=True, text=True, timeout=120,
                                        check=False)
                assert result.returncode == 0, (
                    f"{block.where}: `{command}` exited {result.returncode}:\n"
                    f"{result.stdout}{result.stderr}")
                last = result.stdout
                ran += 1
        elif block.marker == "output":
            problem = output_matches(block.body, last)
            assert problem is None, f"{block.where}: {problem}"
    assert ran >= 1


def test_run_blocks_plan_from_a_state_file_a_reader_has() -> None:
    """A reader without a cluster runs a `sh run` block as it is: a plan in one reads the
    bundled state (the test's fake cluster would otherwise answer in its place)."""
    for block in all_blocks():
        if block.marker != "run":
            continue
        for command in commands(block.body):
            for words in simple_commands(command):
                if words[:4] == ["python", "-m", "webhook", "plan"]:
                    assert "--state" in words, f"{block.where}: {command} has no --state"


def test_output_comparison_catches_a_changed_line() -> None:
    assert output_matches("a\nb ...\n", "a\nb c d\n") is None
    assert "line 2" in output_matches("a\nb\n", "a\nc\n")
    assert "line 3" in output_matches("a\nb\n", "a\nb\nc\n")
    assert output_matches("a x...\n", "a y\n") is not None


README_MAX_LINES = 350


def test_the_readme_stays_short_and_links_what_moved_to_docs() -> None:
    """The README is for the people who install poolguard: the policy's every field and
    `plan` for every kind live in docs/, where their blocks are run as the README's were."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES, len(readme.splitlines())
    for page in ("docs/plan.md", "docs/policy.md", "docs/gitops.md"):
        assert f"]({page})" in readme, page
    run = [command for block in blocks(REPO / "docs" / "plan.md") if block.marker == "run"
           for command in commands(block.body)]
    for workload in ("sts/ml/kv-cache", "ro/ml/reranker", "lws/ml/llm-multi"):
        assert any(workload in command for command in run), workload
    policy_runs = [command for block in blocks(REPO / "docs" / "policy.md")
                   if block.marker == "run" for command in commands(block.body)]
    assert "python -m webhook policy schema" in policy_runs


# --------------------------------------------------------------------------- sh check


def _parsers() -> dict[str, Any]:
    from certs.cli import build_parser as certs_parser
    from webhook.cli.kubectl_plugin import build_parser as plugin_parser
    from webhook.cli.main import build_parser as webhook_parser

    return {"webhook": webhook_parser(), "certs": certs_parser(), "plugin": plugin_parser()}


def _parses(parser: argparse.ArgumentParser, args: list[str], where: str,
            known: bool = False) -> None:
    try:
        if known:
            parser.parse_known_args(args)
        else:
            parser.parse_args(args)
    except SystemExit:
        pytest.fail(f"{where}: `{' '.join(args)}` does not parse")


def _has_value(path: str) -> bool:
    node: Any = yaml.safe_load((REPO / "charts" / "poolguard" / "values.yaml").read_text())
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _named_paths(words: list[str]) -> Iterator[str]:
    for word in words:
        word = word.split("=", 1)[-1] if word.startswith("-") else word
        if word.startswith(REPO_DIRS) and not any(g in word for g in GENERATED):
            yield word.rstrip(",")


def check_command(words: list[str], where: str, parsers: dict[str, Any],
                          scratch: Path, env: dict[str, str]) -> str:
    """Check what can be checked without a cluster; returns what kind of command it was."""
    for path in _named_paths(words):
        assert (REPO / path).exists() or "mine" in path, f"{where}: {path} does not exist"
    if words[:3] == ["python", "-m", "webhook"]:
        _parses(parsers["webhook"], words[3:], where)
        return "webhook"
    if words[:3] == ["python", "-m", "certs"]:
        _parses(parsers["certs"], words[3:], where)
        return "certs"
    if words[:2] == ["kubectl", "poolguard"]:
        _parses(parsers["plugin"], words[2:], where, known=True)
        if words[2] == "plan":  # the flags the plugin does not know go to plan
            _, rest = parsers["plugin"].parse_known_args(words[2:])
            count = [] if {"--replicas", "--replicas-delta"} & set(rest) else ["--replicas", "1"]
            _parses(parsers["webhook"], ["plan", "--workload", "deploy/ns/name", *count, *rest],
                    where)
        return "plugin"
    if words[0] == "make":
        result = subprocess.run(["make", "-n", *words[1:]], cwd=scratch, env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, f"{where}: make -n {' '.join(words[1:])}: {result.stderr}"
        return "make"
    if words[0] == "helm":
        for flag, arg in itertools.pairwise(words):
            if flag == "--set":
                for assignment in arg.split(","):
                    key = assignment.split("=", 1)[0]
                    assert _has_value(key), f"{where}: helm --set {key}: no such chart value"
        return "helm"
    assert words[0] in CLUSTER_PROGRAMS | {"python", "kubectl-poolguard", "poolguard"}, (
        f"{where}: {words[0]}: a program the docs test does not know; teach it")
    return words[0]


def test_check_blocks_name_real_flags_targets_and_files(tmp_path: Path) -> None:
    parsers = _parsers()
    scratch = scratch_dir(tmp_path)
    env = {**os.environ, "MAKEFLAGS": ""}
    seen: dict[str, int] = {}
    for block in all_blocks():
        if block.marker != "check":
            continue
        for command in commands(block.body):
            for words in simple_commands(command):
                kind = check_command(words, f"{block.where}: {command}", parsers,
                                             scratch, env)
                seen[kind] = seen.get(kind, 0) + 1
    for kind, least in {"webhook": 4, "certs": 3, "plugin": 3, "make": 8, "helm": 3,
                        "kubectl": 10}.items():
        assert seen.get(kind, 0) >= least, seen


def test_inline_commands_parse() -> None:
    """`python -m ... --flag` spans in the prose use flags the commands have."""
    parsers = _parsers()
    checked = 0
    for doc in DOCS:
        for span in re.findall(r"`(python -m (?:webhook|certs) [^`]+)`", doc.read_text()):
            words = [PLACEHOLDERS.get(w, w) for w in shlex.split(span)]
            if not any(w.startswith("--") for w in words) or any("[" in w for w in words):
                continue  # a name, or a synopsis with [optional] parts
            _parses(parsers[words[2]], words[3:], f"{doc.name}: {span}")
            checked += 1
    assert checked >= 5, checked


def test_synopses_name_only_real_flags() -> None:
    parser = _parsers()["webhook"]
    commands_ = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    synopses = [b for b in all_blocks() if b.marker == "synopsis"]
    assert synopses
    for block in synopses:
        words = block.body.split()
        assert words[:3] == ["python", "-m", "webhook"], block.where
        sub = commands_.choices[words[3]]
        real = {o for a in sub._actions for o in a.option_strings if o.startswith("--")}
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", block.body))
        assert named <= real, f"{block.where}: no such flag: {sorted(named - real)}"
        assert real - named <= {"--help", "--version"}, (
            f"{block.where}: flags missing from the synopsis: {sorted(real - named)}")


# --------------------------------------------------------------------------- links


def _anchors(doc: Path) -> set[str]:
    """GitHub's anchors for a doc's headings."""
    text = re.sub(r"^ *```.*?^ *```", "", doc.read_text(), flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, re.M)}


def test_links_point_at_files_and_headings_that_exist() -> None:
    checked = 0
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            linked = (doc.parent / path).resolve() if path else doc
            assert linked.exists(), f"{doc.name}: link to {target}: no such file"
            if anchor:
                assert anchor in _anchors(linked), f"{doc.name}: link to {target}: no such heading"
            checked += 1
    assert checked >= 20, checked


def test_repository_paths_named_in_the_docs_exist() -> None:
    """`webhook/cluster/live.py`, `tests/e2e/run.sh`, ...: a moved file fails here."""
    checked = 0
    for doc in DOCS:
        for span in re.findall(r"`([^`\s]+)`", doc.read_text()):
            if span.startswith((*REPO_DIRS, ".ci/")) and "mine" not in span:
                assert (REPO / span.rstrip(",.:")).exists(), f"{doc.name}: {span}: no such file"
                checked += 1
    assert checked >= 30, checked


# --------------------------------------------------------------------------- plan's JSON


def test_plan_json_keys_are_the_documented_ones() -> None:
    doc = (REPO / "docs" / "prediction.md").read_text()
    table = doc[doc.index("## What `plan --output json` reports"):doc.index("## The controllers")]
    documented = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    printed: set[str] = set()
    for workload in ("deploy/ml/llm-serve", "rs/ml/gpu-probe", "sts/ml/kv-cache"):
        result = subprocess.run(
            [sys.executable, "-m", "webhook", "plan", "--state", "examples/cluster-state.yaml",
             "--workload", workload, "--replicas", "1", "--output", "json"],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        printed |= set(json.loads(result.stdout))
    printed |= set(_leader_worker_set_plan())
    assert documented == printed


def _leader_worker_set_plan() -> dict[str, Any]:
    """The plan document of a LeaderWorkerSet scale-down (it adds its groups)."""
    lws, objects = lws_state([["node-1", "node-1"], ["node-1", "node-1"]])
    view = Snapshot(objects)
    policy = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000}]})
    return plan_document(view, policy, assess_scale(view, policy, lws, 1, None), None)


# --------------------------------------------------------------------------- the screenshot


def test_plan_page_screenshot_is_current(tmp_path: Path) -> None:
    """docs/plan-page.png was taken of the page `plan` draws today (its sha256 is kept
    beside it by `make plan-page`)."""
    makefile = (REPO / "Makefile").read_text().replace("\\\n", " ")
    args = shlex.split(re.search(r"^PLAN_PAGE_ARGS := (.*)$", makefile, re.M).group(1))
    page = tmp_path / "plan-page.html"
    result = subprocess.run([sys.executable, "-m", "webhook", "plan", *args, "--output",
                             "html", str(page)], cwd=REPO, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    recorded = (REPO / "docs" / "plan-page.html.sha256").read_text().strip()
    assert hashlib.sha256(page.read_bytes()).hexdigest() == recorded, (
        "docs/plan-page.png shows an older plan page: run `make plan-page` and commit "
        "docs/plan-page.png and docs/plan-page.html.sha256")
    png = (REPO / "docs" / "plan-page.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[16:24] == (1200).to_bytes(4, "big") + (
        1000).to_bytes(4, "big"), "docs/plan-page.png: not a 1200x1000 PNG"
    assert "](docs/plan-page.png)" in (REPO / "README.md").read_text()


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
