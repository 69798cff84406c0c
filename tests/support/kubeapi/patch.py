"""PATCH in the fake API server: JSON merge patches (strategic merge patches are applied
as merge patches: fine for metadata, lists are replaced) and JSON patches."""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError
from .resources import Obj


def patched(current: Obj, content_type: str, patch: Any) -> Obj:
    """`current` with `patch` (a decoded body of `content_type`) applied; ApiError for a
    patch of an unknown type or one that cannot apply."""
    kind = content_type.split(";")[0].strip()
    if kind in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
        if not isinstance(patch, dict):
            raise ApiError(400, "BadRequest", "a merge patch must be a JSON object")
        return merge_patch(current, patch)
    if kind == "application/json-patch+json":
        return json_patch(current, patch)
    raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an "
                   f"unknown format - accepted media types include: "
                   f"application/json-patch+json, application/merge-patch+json "
                   f"(got {kind!r})")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (null deletes a key); returns a new value."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(current: Obj, ops: Any) -> Obj:
    """RFC 6902 JSON patch `ops` applied to `current`; ApiError when it cannot apply."""
    import jsonpatch  # a dev dependency, needed only here

    if not isinstance(ops, list):
        raise ApiError(400, "BadRequest", "a JSON patch must be a list of operations")
    try:
        return jsonpatch.apply_patch(current, ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as err:
        raise ApiError(422, "Invalid", f"the JSON patch could not be applied: {err}") from None
