"""The admission.k8s.io/v1 AdmissionReview on the wire: its shapes, parsing and answers.

The TypedDicts name the fields poolguard reads or writes; at run time a review stays the
plain dict the JSON parser made, so no field the API server sent is ever dropped.
`parse_review` checks the shape of what the handlers read and returns the `request`;
`allow`, `deny` and `with_patch` build a `response`; `review` wraps it for the API server.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict, cast

import orjson

from ..errors import InputError

API_VERSION = "admission.k8s.io/v1"
ECHO_LIMIT = 40  # characters of an offending value an error message repeats

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class UserInfo(TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict, total=False):
    """An AdmissionReview's `request`: only `uid` is always present."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    subResource: str
    requestKind: GroupVersionKind
    requestResource: GroupVersionResource
    requestSubResource: str
    name: str
    namespace: str
    operation: Operation
    userInfo: UserInfo
    object: dict[str, Any] | None
    oldObject: dict[str, Any] | None
    dryRun: bool
    options: dict[str, Any] | None


class Status(TypedDict):
    """The `status` of a denial, as a metav1.Status carries it."""

    code: int
    reason: str
    message: str


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[Status]
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]  # base64 of the JSON Patch
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class AdmissionReview(TypedDict):
    apiVersion: str
    kind: Literal["AdmissionReview"]
    request: NotRequired[AdmissionRequest]
    response: NotRequired[AdmissionResponse]


class BadReview(InputError):
    """The body is not a usable AdmissionReview; answered with HTTP 400."""


def echo(value: Any) -> str:
    """`value` for an error message: at most a short prefix of it, or its JSON type."""
    if isinstance(value, str):
        return repr(value) if len(value) <= ECHO_LIMIT else repr(value[:ECHO_LIMIT]) + "..."
    if value is None or isinstance(value, bool | int | float):
        return repr(value)[:ECHO_LIMIT]
    return "a list" if isinstance(value, list) else "an object"


def parse_review(body: Any) -> AdmissionRequest:
    """The `request` of an AdmissionReview v1, or BadReview saying what is wrong."""
    if not isinstance(body, Mapping):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if body.get("kind") != "AdmissionReview":
        raise BadReview(f"kind must be AdmissionReview, got {echo(body.get('kind'))}")
    if body.get("apiVersion") != API_VERSION:
        raise BadReview(f"apiVersion must be {API_VERSION} (the only version poolguard "
                        f"accepts), got {echo(body.get('apiVersion'))}")
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise BadReview("request: missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid: missing or not a non-empty string")
    for key in ("kind", "resource", "userInfo"):
        if key in request and not isinstance(request[key], Mapping):
            raise BadReview(f"request.{key}: must be an object")
    for key in ("kind", "resource"):
        for field_name, value in (request.get(key) or {}).items():
            if not isinstance(value, str):
                raise BadReview(f"request.{key}.{field_name}: must be a string")
    username = (request.get("userInfo") or {}).get("username")
    if username is not None and not isinstance(username, str):
        raise BadReview("request.userInfo.username: must be a string")
    for key in ("object", "oldObject"):
        if request.get(key) is not None and not isinstance(request[key], Mapping):
            raise BadReview(f"request.{key}: must be an object or null")
    for key in ("operation", "namespace", "subResource", "name"):
        if request.get(key) is not None and not isinstance(request[key], str):
            raise BadReview(f"request.{key}: must be a string")
    return cast(AdmissionRequest, dict(request))


def review(response: Mapping[str, Any]) -> AdmissionReview:
    """Wrap a response into the AdmissionReview the API server expects."""
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview",
            "response": cast(AdmissionResponse, dict(response))}


def allow(request: Mapping[str, Any], **extra: Any) -> AdmissionResponse:
    """Allow the request; `extra` adds response fields (`warnings`, a patch)."""
    return cast(AdmissionResponse, {"uid": request["uid"], "allowed": True, **extra})


def deny(request: Mapping[str, Any], code: int, reason: str, message: str,
         **extra: Any) -> AdmissionResponse:
    """Refuse the request with an HTTP-like `code`, a reason word and a message."""
    return cast(AdmissionResponse, {"uid": request["uid"], "allowed": False,
                                    "status": {"code": code, "reason": reason,
                                               "message": message}, **extra})


def with_patch(request: Mapping[str, Any], ops: list[dict[str, Any]]) -> AdmissionResponse:
    """Allow the request with a JSON Patch (none when `ops` is empty)."""
    if not ops:
        return allow(request)
    patch = base64.b64encode(orjson.dumps(ops)).decode()
    return allow(request, patchType="JSONPatch", patch=patch)
