"""Cluster state and policy files: the one place their format is read and written."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..core.kinds.registry import RESOURCES
from ..core.objects.shape import ShapeError, check_object_shape
from ..core.policy.policy import Policy, default_policy, parse_policy
from ..core.policy.policy_field import PolicyError
from ..core.view.snapshot import Snapshot
from ..errors import InputError
from .fast_yaml import fast_documents
from .filewatch import FileWatcher
from .repeated import RepeatedObjectError, read_once
from .text_encoding import UnreadableText, decode_text, refuse_nul

log = logging.getLogger("poolguard")
Obj = Mapping[str, Any]

try:  # the C loader is several times faster on large state files
    _BaseLoader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _BaseLoader = yaml.SafeLoader


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """The safe loader, refusing a key that a mapping repeats.

    YAML loaders keep the last of two equal keys without a word, so a file with a key
    written twice would be read as something other than what it says.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        first_seen: dict[tuple[str, str], yaml.Node] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
                continue
            key = (key_node.tag, key_node.value)
            if key in first_seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key_node.value!r} (first at line "
                    f"{first_seen[key].start_mark.line + 1})", key_node.start_mark)
            first_seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


_OBJECT_KEYS = ("apiVersion", "kind")
_FAST_FROM = 64 * 1024  # characters of YAML from which rapidyaml reads it (fast_yaml)

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
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise StateError(f"{what} file {path}: no such file") from None
    except OSError as err:
        raise StateError(f"{what} file {path}: cannot read it: {err.strerror or err}") from None
    try:
        text = decode_text(data, f"{what} file {path}", str(path))
    except UnreadableText as err:
        raise StateError(str(err)) from None
    return parse_documents(text, f"{what} file {path}")


def parse_documents(text: str, source: str) -> list[Any]:
    """All YAML/JSON documents in `text`, with errors that name `source` and the line.

    JSON documents may follow each other with nothing between them (two `kubectl get -o
    json` outputs in one file), which YAML does not accept.
    """
    try:
        refuse_nul(text, source)
    except UnreadableText as err:
        raise StateError(str(err)) from None
    if text.lstrip().startswith(("{", "[")):
        documents = _concatenated_json(text, source)
        if documents is not None:
            return documents
    # A small text (a policy, a short state) reads fast enough with PyYAML alone.
    documents = fast_documents(text, _refuse_duplicate_keys) if len(text) > _FAST_FROM else None
    if documents is not None:
        return documents
    try:
        return [doc for doc in _yaml_documents(text) if doc is not None]
    except yaml.reader.ReaderError as err:  # a character YAML does not allow
        line = text.count("\n", 0, err.position) + 1
        column = err.position - (text.rfind("\n", 0, err.position) + 1) + 1
        raise StateError(f"{source}: line {line}, column {column}: not valid YAML or JSON: "
                         f"{err.reason} (#x{err.character:04x})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        if problem.startswith("duplicate key"):
            raise StateError(f"{source}:{where}: {problem}; a YAML reader keeps only the "
                             "last, so the file says two things") from None
        raise StateError(f"{source}:{where}: not valid YAML or JSON: {problem}") from None


def _yaml_documents(text: str) -> Iterator[Any]:
    """The YAML documents in `text`; a document that is several Kubernetes objects or
    Lists written one after the other without `---` (`kubectl get -o yaml >> file`) is
    read as those objects, one document each."""
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            for part in _concatenated_objects(node):
                yield loader.construct_document(part)
    finally:
        loader.dispose()


def _concatenated_objects(node: yaml.Node) -> list[yaml.Node]:
    """`node` cut where a top-level key comes again, when every part is a Kubernetes object
    (has apiVersion and kind); otherwise `node` alone (its repeated key is then refused)."""
    if not isinstance(node, yaml.MappingNode):
        return [node]
    parts: list[list[tuple[yaml.Node, yaml.Node]]] = [[]]
    keys: set[str] = set()
    for key_node, value_node in node.value:
        key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
        if key is not None and key in keys:
            parts.append([])
            keys = set()
        if key is not None:
            keys.add(key)
        parts[-1].append((key_node, value_node))
    if len(parts) == 1 or not all(
            set(_OBJECT_KEYS) <= {k.value for k, _ in part if isinstance(k, yaml.ScalarNode)}
            for part in parts):
        return [node]
    return [yaml.MappingNode(node.tag, part, part[0][0].start_mark, part[-1][1].end_mark,
                             flow_style=node.flow_style) for part in parts]


class _DuplicateKey(ValueError):
    """A JSON object that repeats a key."""


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _DuplicateKey(key)
        obj[key] = value
    return obj


def _concatenated_json(text: str, source: str) -> list[Any] | None:
    """The JSON values in `text` one after another, or None when the first is not JSON
    (YAML flow style looks like JSON; the YAML parser then reports the error)."""
    decoder = json.JSONDecoder(object_pairs_hook=_refuse_duplicate_keys)
    documents: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return documents
        start = position
        try:
            value, position = decoder.raw_decode(text, position)
        except _DuplicateKey as err:
            line = text.count("\n", 0, start) + 1
            raise StateError(f"{source}: document {len(documents) + 1} (from line {line}): "
                             f"duplicate key {str(err)!r} in an object; a JSON reader keeps "
                             "only the last, so the file says two things") from None
        except json.JSONDecodeError as err:
            if not documents:
                return None
            raise StateError(f"{source}: line {err.lineno}, column {err.colno}: not valid "
                             f"JSON: {err.msg}") from None
        if value is not None:
            documents.append(value)


class StateSnapshot(Snapshot):
    """The Snapshot of a state file, with what was noticed while reading it (`notes`)."""

    def __init__(self) -> None:
        super().__init__(())
        self.notes: list[str] = []


def load_state(path: str | Path) -> StateSnapshot:
    """A Snapshot from a `kubectl get ... -o json` List, or from multi-document YAML/JSON;
    an object the file repeats is read once (`repeated`), with a note."""
    snapshot = StateSnapshot()
    documents = read_documents(path, "state")
    if not documents:
        raise StateError(f"state file {path}: it is empty; expected the output of kubectl get "
                         f"{STATE_RESOURCES} -A -o json (JSON reads fastest)")
    try:
        objects, note = read_once(_objects(documents, str(path)), f"state file {path}")
    except RepeatedObjectError as err:
        raise StateError(str(err)) from None
    for obj in objects:
        snapshot.add(obj)
    if note is not None:
        snapshot.notes.append(note)
    return snapshot


def print_state_notes(view: Snapshot) -> None:
    """The notes of a state file's reading, one `note:` line each on stderr."""
    for note in view.notes:
        print(f"note: {note}", file=sys.stderr)


def _objects(documents: list[Any], where: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    for index, doc in enumerate(documents):
        yield from _flatten(doc, f"{where}: document {index + 1}")


def _flatten(doc: Any, where: str) -> Iterator[tuple[Mapping[str, Any], str]]:
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
    yield doc, where


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
    """Write `snapshot` as a kind: List document that load_state reads back: JSON when
    `path` ends in `.json` (no comment: JSON has none), else YAML with `comment` as its
    first line. Errors: OSError.

    JSON because YAML is slow to write however it is done: even libyaml's emitter is fed
    by PyYAML's Python representer, about a second of CPU for the 1.4 MB of a 200-pod
    cluster, where json writes it in tens of milliseconds.
    """
    document = snapshot_to_list(snapshot)
    if str(path).endswith(".json"):
        Path(path).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        return
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml is much faster
    text = yaml.dump(document, Dumper=dumper, sort_keys=False,
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


PolicyVet = Callable[[Policy, Policy], str | None]  # (in force, new) -> why refused


class PolicyHolder:
    """The last good policy; re-reads its file when it changes and keeps the old on error.

    `vet` judges a valid new policy against the cluster (`policy_change.change_refusal`):
    a reason refuses it, the policy in force stays, and `on_refused(reason)` is told.
    """

    def __init__(self, path: str | None, on_error: Callable[[], None] = lambda: None,
                 on_load: Callable[[], None] = lambda: None, *,
                 vet: PolicyVet | None = None,
                 on_refused: Callable[[str], None] = lambda reason: None) -> None:
        self.path = path
        self._on_error, self._on_load = on_error, on_load
        self.vet, self.on_refused = vet, on_refused
        self.policy: Policy = load_policy(path)  # a bad file at start stops startup
        self.error: str | None = None
        self.refused: str | None = None  # why the last change was refused, until one is taken
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
                policy = load_policy(self.path)
            except PolicyError as err:
                self.error = str(err)
                self._on_error()
                log.error("policy reload rejected, keeping the last good policy: %s", err)
                return
            self.error = None
            refusal = self.vet(self.policy, policy) if self.vet is not None else None
            if refusal is not None:
                self.refused = f"policy file {self.path}: {refusal}"
                log.error("policy reload refused, keeping the last good policy: %s",
                          self.refused)
                self.on_refused(self.refused)
                return
            self.policy, self.refused = policy, None
            self._on_load()
            log.info("policy reloaded from %s", self.path)
