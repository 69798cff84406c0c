"""Objects a state file holds more than once: read once, or refused when they differ.

`cat state.yaml state.yaml`, a block of appended `kubectl get` run twice, an `-A` dump
followed by one namespace's pods: each gives objects twice. Counted twice, every victim
would be listed twice and a workload would seem to have twice the pods its controller
sees. The API server keeps kind, namespace and name unique, so that is an object's
identity here. Copies of one object (the same uid, or equal copies where there is no
uid) are read once, one note saying how many; where copies of one uid differ (two
readings of the cluster appended), the last one in the file is read, and the note says
so. Two different objects under one name (other uids, or unequal copies without a uid)
cannot both be the cluster: refused, both named.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import InputError

Obj = Mapping[str, Any]


class RepeatedObjectError(InputError):
    """Two different objects under one kind, namespace and name."""


def read_once(placed: Iterable[tuple[Obj, str]], source: str) -> tuple[list[Obj], str | None]:
    """The objects of `placed` ((object, where it is)) once each, in the order first seen,
    and a note on the repeated ones (None when none is). Errors: RepeatedObjectError."""
    kept: dict[tuple[str, str, str], tuple[Obj, str]] = {}
    repeated: list[str] = []
    differing: list[str] = []
    for obj, where in placed:
        key = _identity(obj)
        first = kept.get(key)
        if first is None:
            kept[key] = (obj, where)
            continue
        earlier, earlier_where = first
        if earlier == obj:
            repeated.append(_named(key))
            continue
        uid, earlier_uid = _uid(obj), _uid(earlier)
        if uid is None or uid != earlier_uid:
            raise RepeatedObjectError(_two_objects(key, earlier_where, where, earlier_uid, uid))
        repeated.append(_named(key))
        differing.append(_named(key))
        kept[key] = (obj, earlier_where)  # the later reading, at the first one's place
    return [obj for obj, _ in kept.values()], _note(source, repeated, differing)


def _identity(obj: Obj) -> tuple[str, str, str]:
    metadata = obj.get("metadata") or {}
    return (str(obj.get("kind") or ""), str(metadata.get("namespace") or ""),
            str(metadata.get("name") or ""))


def _uid(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("uid") or None


def _named(key: tuple[str, str, str]) -> str:
    kind, namespace, name = key
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def _two_objects(key: tuple[str, str, str], first: str, second: str, first_uid: str | None,
                 second_uid: str | None) -> str:
    if first_uid and second_uid:
        why = f"with different uids ({first_uid} and {second_uid})"
    else:
        why = "with different contents and no uid to tell them apart"
    return (f"{second}: {_named(key)} is also at {first}, {why}: two objects under one "
            "name cannot both be the cluster; keep the one the cluster has (read the "
            "cluster again rather than joining files from different clusters or times)")


def _note(source: str, repeated: list[str], differing: list[str]) -> str | None:
    if not repeated:
        return None
    distinct = list(dict.fromkeys(repeated))
    shown = ", ".join(distinct[:3]) + (f" and {len(distinct) - 3} more" if len(distinct) > 3
                                        else "")
    copies = "copy" if len(repeated) == 1 else "copies"
    note = (f"{source}: {len(distinct)} object{'' if len(distinct) == 1 else 's'} appear"
            f"{'s' if len(distinct) == 1 else ''} more than once ({len(repeated)} repeated "
            f"{copies}: {shown}); each is read once")
    if differing:
        changed = list(dict.fromkeys(differing))
        note += (f"; {len(changed)} of them differ between copies (two readings of the "
                 f"cluster, e.g. {changed[0]}): the last copy in the file is read")
    return note
