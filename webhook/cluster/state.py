"""Cluster state and policy files: the one place their format is read and written."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..core.kinds.registry import RESOURCES
from ..core.objects.shape import ShapeError, check_object_shape
from ..core.policy.policy import Policy, PolicyError, default_policy, parse_policy
from ..core.view.snapshot import Snapshot
from ..errors import InputError
from .filewatch import FileWatcher

log = logging.getLogger("poolguard")
Obj = Mapping[str, Any]

try:  # the C loader is several times faster on large state files
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

DATA_DIR = Path(__file__).parent.parent / "data"
EXAMPLE_POLICY = DATA_DIR / "policy.yaml"
EXAMPLE_STATE = DATA_DIR / "cluster-state.yaml"


class StateError(InputError):
    """A state file that cannot be read; the message names the file and the place."""

# What `kubectl get` lists for a state file: every resource but the custom ones.
STATE_RESOURCES = ",".join(r.name for r in RESOURCES if not r.optional)


def read_documents(path: str | Path, what: str) -> list[Any]:
    """All YAML/JSON documents in `path`, with errors that name the file and line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StateError(f"{what} file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise StateError(f"{what} file {path}: cannot read it: {err}") from None
    return parse_documents(text, f"{what} file {path}")


def parse_documents(text: str, source: str) -> list[Any]:
    """All YAML/JSON documents in `text`, with errors that name `source` and the line.

    JSON documents may follow each other with nothing between them (two `kubectl get -o
    json` outputs in one file), which YAML does not accept.
    """
    if text.lstrip().startswith(("{", "[")):
        documents = _concatenated_json(text, source)
        if documents is not None:
            return documents
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise StateError(f"{source}:{where}: not valid YAML or JSON: {problem}") from None


def _concatenated_json(text: str, source: str) -> list[Any] | None:
    """The JSON values in `text` one after another, or None when the first is not JSON
    (YAML flow style looks like JSON; the YAML parser then reports the error)."""
    decoder = json.JSONDecoder()
    documents: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return documents
        try:
            value, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as err:
            if not documents:
                return None
            raise StateError(f"{source}: line {err.lineno}, column {err.colno}: not valid "
                             f"JSON: {err.msg}") from None
        if value is not None:
            documents.append(value)


def load_state(path: str | Path) -> Snapshot:
    """A Snapshot from a `kubectl get ... -o yaml` List, or from multi-document YAML."""
    snapshot = Snapshot(())
    documents = read_documents(path, "state")
    if not documents:
        raise StateError(f"state file {path}: it is empty; expected the output of kubectl get "
                         f"{STATE_RESOURCES} -A -o yaml")
    for obj in _objects(documents, str(path)):
        snapshot.add(obj)
    return snapshot


def _objects(documents: list[Any], where: str) -> Iterator[Mapping[str, Any]]:
    for index, doc in enumerate(documents):
        yield from _flatten(doc, f"{where}: document {index + 1}")


def _flatten(doc: Any, where: str) -> Iterator[Mapping[str, Any]]:
    if not isinstance(doc, Mapping):
        raise StateError(f"{where}: expected a Kubernetes object or List, got "
                         f"{type(doc).__name__}")
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind:
        raise StateError(f"{where}: object has no 'kind'")
    if kind == "List" or kind.endswith("List"):
        items = doc.get("items")
        if not isinstance(items, list):
            raise StateError(f"{where}: {kind} has no 'items' list")
        for index, item in enumerate(items):
            yield from _flatten(item, f"{where}, items[{index}]")
        return
    if not isinstance(doc.get("metadata"), Mapping) or not doc["metadata"].get("name"):
        raise StateError(f"{where}: {kind} has no metadata.name")
    try:
        check_object_shape(doc, f"{kind} {doc['metadata'].get('namespace') or ''}"
                                f"{'/' if doc['metadata'].get('namespace') else ''}"
                                f"{doc['metadata']['name']}")
    except ShapeError as err:
        raise StateError(f"{where}: {err}") from None
    _check_counts(doc, where)
    yield doc


def _check_counts(doc: Mapping[str, Any], where: str) -> None:
    """A replica count below 0 (a hand-edited file) would be planned as if it were real."""
    replicas = (doc.get("spec") or {}).get("replicas")
    if isinstance(replicas, int) and replicas < 0:
        metadata = doc["metadata"]
        namespace = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
        raise StateError(f"{where}: {doc['kind']} {namespace}{metadata['name']}: "
                         f"spec.replicas is {replicas}; it must be 0 or more")


class ListedSnapshot(Snapshot):
    """A Snapshot that also keeps the objects it was given, in order (for saving)."""

    def __init__(self, objects: Iterable[Obj] = ()) -> None:
        self.items: list[Obj] = []
        super().__init__(objects)

    def add(self, obj: Obj) -> None:
        self.items.append(obj)
        super().add(obj)


def snapshot_to_list(snapshot: ListedSnapshot) -> dict[str, Any]:
    """A `kind: List` document of the snapshot's objects, which `--state` reads back."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": [dict(item) for item in snapshot.items]}


def write_state(path: str | Path, snapshot: ListedSnapshot, comment: str) -> None:
    """Write `snapshot` as a kind: List YAML document that load_state reads back, with
    `comment` as its first line. Errors: OSError."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml is much faster
    text = yaml.dump(snapshot_to_list(snapshot), Dumper=dumper, sort_keys=False,
                     default_flow_style=False, allow_unicode=True)
    Path(path).write_text(f"# {comment}\n{text}", encoding="utf-8")


def load_policy(path: str | Path | None) -> Policy:
    """The policy in `path` (the built-in default when None); errors name file and field."""
    if path is None:
        return default_policy()
    try:
        documents = read_documents(path, "policy")
    except StateError as err:
        raise PolicyError(str(err)) from None
    return _one_policy(documents, f"policy file {path}")


def parse_policy_text(text: str, source: str) -> Policy:
    """The policy in `text` (e.g. a ConfigMap's key); errors name `source` and the field."""
    try:
        documents = parse_documents(text, source)
    except StateError as err:
        raise PolicyError(str(err)) from None
    return _one_policy(documents, source)


def _one_policy(documents: list[Any], source: str) -> Policy:
    if len(documents) != 1:
        raise PolicyError(f"{source}: expected one YAML document, found {len(documents)}")
    return parse_policy(documents[0], source=source)


class PolicyHolder:
    """The last good policy; re-reads its file when it changes and keeps the old on error."""

    def __init__(self, path: str | None, on_error: Callable[[], None] = lambda: None,
                 on_load: Callable[[], None] = lambda: None) -> None:
        self.path = path
        self._on_error, self._on_load = on_error, on_load
        self.policy: Policy = load_policy(path)  # a bad file at start stops startup
        self.error: str | None = None
        self._watcher = FileWatcher(path) if path is not None else None
        self._lock = threading.Lock()
        on_load()

    def refresh(self) -> None:
        """Reload the file if it changed; an invalid file leaves the last good policy."""
        if self._watcher is None or self._watcher.changed() is None:
            return
        with self._lock:
            stamp = self._watcher.changed()
            if stamp is None:
                return
            self._watcher.take(stamp)  # an invalid file is reported once, not every check
            try:
                self.policy = load_policy(self.path)
            except PolicyError as err:
                self.error = str(err)
                self._on_error()
                log.error("policy reload rejected, keeping the last good policy: %s", err)
                return
            self.error = None
            self._on_load()
            log.info("policy reloaded from %s", self.path)
