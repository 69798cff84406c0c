"""Large YAML state files are read by rapidyaml, and always as PyYAML reads them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from webhook.cluster import fast_yaml
from webhook.cluster.state import StateError, load_state, parse_documents


def _pairs(pairs: list[tuple[str, object]]) -> dict:
    return dict(pairs)


def _pyyaml(text: str) -> list:
    return [doc for doc in yaml.load_all(text, Loader=yaml.CSafeLoader) if doc is not None]


def _state(pods: int) -> list[dict]:
    deploy = f.deployment("serve", replicas=pods)
    rs = f.replicaset("serve-1", owner=deploy, replicas=pods, pod_hash="1")
    nodes = [f.node(f"node-{i}", "inference" if i % 2 else "training") for i in range(4)]
    return [deploy, rs, *nodes, *(f.pod(f"serve-1-{i}", owner=rs, node_name=f"node-{i % 4}",
                                        cost=str(i % 3 * 100)) for i in range(pods))]


def test_kubectl_style_yaml_is_read_by_rapidyaml_as_pyyaml_reads_it() -> None:
    """What `kubectl get -o yaml` writes (every ambiguous string quoted) takes the fast
    reader, which reads it as PyYAML does."""
    text = yaml.dump({"apiVersion": "v1", "kind": "List", "items": _state(50)},
                     Dumper=yaml.CSafeDumper, sort_keys=False)
    fast = fast_yaml.fast_documents(text, _pairs)
    assert fast is not None
    assert fast == _pyyaml(text)


def test_a_multi_document_state_is_read_by_rapidyaml(tmp_path: Path) -> None:
    objects = _state(3)
    text = "---\n".join(yaml.safe_dump(obj) for obj in objects)
    assert fast_yaml.fast_documents(text, _pairs) == objects
    path = tmp_path / "state.yaml"
    path.write_text(text)
    assert load_state(path).counts["Pod"] == 3


_SCALARS = ["yes", "No", "ON", "off", "True", "FALSE", "true", "false", "null", "Null", "~",
            "", "0x1F", "0b101", "017", "09", "1_000", "+5", "-5", "0", "-0", "12", "1:30",
            "1.5", "1.", ".5", "-1.25", "1e30", "1E5", "1.5e3", "1.5e+3", ".inf", "-.Inf",
            ".nan", "NaN", "nan", "inf", "infinity", "Infinity", "+inf", "-inf", "2026-01-01",
            "2026-01-01T00:00:00Z",
            "2026-1-2 3:04:05", "<<", "=", "500m", "10Gi", "node-1", "a b", "x && y",
            "ls *.txt", "*alias", "&anchor v", "!!str 5", "!tag x", "'quoted'", '"yes"',
            "'1e30'", "[1, yes]", "{a: 1}", "{a: ~}", "a: b", "- x", "? q", "# c", "%", "@x",
            "`x", "|", ">"]


_ORDINARY = ["12", "1.5", "500m", "node-1", "'quoted'", "a b", "true", "null", ""]
# Mostly scalars both read alike, so that the fast reader answers often enough to be tried.
_SCALAR = st.one_of(st.sampled_from(_ORDINARY), st.sampled_from(_SCALARS))


@st.composite
def _documents(draw: st.DrawFn) -> str:
    """A YAML text of mappings and lists whose plain scalars come from `_SCALARS`."""
    lines = []
    for index in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(["k", "k", "k", "yes", "1", "on", "null", "true"]))
        value = draw(_SCALAR)
        layout = draw(st.sampled_from(["map", "seq", "flow", "nested"]))
        if layout == "map":
            lines.append(f"{key}{index}: {value}")
        elif layout == "seq":
            lines.append(f"s{index}:\n- {value}\n- {draw(_SCALAR)}")
        elif layout == "flow":
            lines.append(f"f{index}: [{value}, {draw(_SCALAR)}]")
        else:
            lines.append(f"n{index}:\n  {key}: {value}")
        if draw(st.booleans()):
            lines.append("---")
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None)
@given(_documents())
def test_whenever_rapidyaml_answers_it_answers_as_pyyaml(text: str) -> None:
    """Plain scalars YAML 1.1 reads otherwise than rapidyaml (yes, ~, 0x1F, 1e30, ...),
    anchors, tags and keys that are not strings send the text to PyYAML; whatever the
    fast reader does return is what PyYAML returns."""
    try:
        expected = _pyyaml(text)
    except yaml.YAMLError:
        expected = None
    fast = fast_yaml.fast_documents(text, _pairs)
    if fast is not None:
        assert expected is not None, text
        assert json.dumps(fast, sort_keys=True) == json.dumps(expected, sort_keys=True,
                                                              default=repr), text


@given(st.sampled_from(["yes", "~", "0x1F", "1_000", "1e30", "*a", "!!str 5", "1:30",
                        "2026-01-01"]))
def test_a_yaml11_scalar_is_read_as_pyyaml_reads_it(value: str) -> None:
    text = f"a: &a 1\nk: {value}\n" if value == "*a" else f"k: {value}\n"
    assert fast_yaml.fast_documents(text, _pairs) is None
    assert parse_documents(text, "t") == _pyyaml(text)


def test_a_repeated_key_is_still_refused_with_its_line() -> None:
    text = "apiVersion: v1\nkind: List\nitems: []\nitems: []\n"
    with pytest.raises(StateError, match="line 4, column 1: duplicate key 'items'"):
        parse_documents(text, "state file s.yaml")


def test_a_large_state_with_a_repeated_key_is_still_refused_with_its_line(
        tmp_path: Path) -> None:
    """Past the size from which rapidyaml reads, a repeated key sends the text to PyYAML,
    which names it and its line."""
    text = yaml.dump({"apiVersion": "v1", "kind": "List", "items": _state(100)},
                     Dumper=yaml.CSafeDumper, sort_keys=False)
    assert len(text) > 64 * 1024
    lines = text.splitlines()
    at = lines.index("kind: List")
    lines.insert(at + 1, "kind: List")
    with pytest.raises(StateError, match=f"line {at + 2}, column 1: duplicate key 'kind'"):
        parse_documents("\n".join(lines) + "\n", "state file s.yaml")
