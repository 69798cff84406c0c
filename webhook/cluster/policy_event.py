"""A Kubernetes Event on the policy's ConfigMap: why a policy was refused or held.

`serve` and the reconciler read the policy from a file the ConfigMap is mounted as; a
person editing the ConfigMap looks at the ConfigMap (`kubectl describe configmap
poolguard-policy`), so that is where the reason goes, beside the log line and the metric.
An Event is a courtesy: a failure to post one is logged, never raised.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .kubeclient import describe_error, request_json

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard")
MESSAGE_LIMIT = 1024  # the API server refuses longer Event messages


def configmap_ref(text: str) -> tuple[str, str]:
    """(namespace, name) from `NAMESPACE/NAME`; ValueError when it is not that."""
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"{text!r}: expected NAMESPACE/NAME, e.g. poolguard/poolguard-policy")
    return namespace, name


def policy_event(configmap: tuple[str, str], reason: str, message: str,
                 component: str) -> dict[str, Any]:
    """A Warning Event about the ConfigMap `configmap` (namespace, name)."""
    namespace, name = configmap
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": f"{name}.", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": name,
                           "namespace": namespace},
        "type": "Warning", "reason": reason, "message": message[:MESSAGE_LIMIT],
        "source": {"component": component}, "reportingComponent": f"poolguard.dev/{component}",
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    }


def post_policy_event(api: client.ApiClient, configmap: tuple[str, str], reason: str,
                      message: str, component: str) -> bool:
    """Post the Event; False (logged) when the API server did not take it."""
    try:
        request_json(api, "POST", f"/api/v1/namespaces/{configmap[0]}/events",
                     body=policy_event(configmap, reason, message, component))
    except Exception as err:  # an Event is a courtesy; the log line and metric remain
        log.warning("could not post the %s Event on ConfigMap %s/%s: %s", reason, *configmap,
                    describe_error(err))
        return False
    return True
