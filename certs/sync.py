"""`python -m certs sync`: the webhook's certificates kept in the cluster itself.

What the Helm chart's hook Jobs run (certificates.source=self-signed), so no files and no
cert-manager are needed:

- the CA lives in the Secret `SECRET-ca` (ca.crt, ca.key), which no Pod mounts; it is made
  once and kept while it is usable;
- the serving Secret `SECRET` (kubernetes.io/tls: ca.crt, tls.crt, tls.key) is made, or
  renewed by the same rule as `certs renew` (past two thirds of its life, wrong CA, key
  mismatch, missing a Service name), keeping its private key when it can;
- with `--webhook-configuration NAME`, the CA goes into the caBundle of every webhook of
  the Mutating- and ValidatingWebhookConfiguration NAME.

Each step writes only when something changes, so running it on every upgrade is harmless.
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections.abc import Callable
from typing import Any

from webhook.cluster.kubeclient import (
    add_cluster_arguments,
    api_client_from,
    describe_error,
    request_json,
    server_of,
)
from webhook.errors import ApiError, NotFoundError

from . import pki
from .errors import CertsError

EXIT_API = 2  # as every other command that talks to the API server
WEBHOOK_CONFIGURATIONS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
MANAGED_BY = {"app.kubernetes.io/name": "poolguard", "app.kubernetes.io/component": "webhook",
              "app.kubernetes.io/managed-by": "poolguard-certs"}


class SyncError(Exception):
    """The cluster refused or could not be reached: one `error:` line, exit code 2."""


def add_sync_parser(commands: argparse._SubParsersAction,
                    days_type: Callable[[str], int]) -> None:
    parser = commands.add_parser(
        "sync", help="make or renew the serving Secret in the cluster and write the caBundle",
        description="Keep the webhook's certificates in the cluster: the CA in the Secret "
        "SECRET-ca, the serving certificate for the Service in the kubernetes.io/tls Secret "
        "SECRET (made, or renewed past two thirds of its life, for missing names, or a "
        "wrong CA), and with --webhook-configuration the CA in every webhook's caBundle. "
        "Writes only what changed. The Helm chart runs it in hook Jobs. Exit code 0 when "
        "done, 2 with one error: line for bad arguments, an unusable kubeconfig, or an API "
        "server that refused or could not be reached.")
    parser.add_argument("--namespace", required=True, metavar="NS",
                        help="namespace of the Service and the Secrets")
    parser.add_argument("--service", required=True, metavar="NAME",
                        help="the webhook Service the certificate names")
    parser.add_argument("--secret", required=True, metavar="NAME",
                        help="the serving Secret (the CA goes into NAME-ca)")
    parser.add_argument("--days", type=days_type, default=90, metavar="N",
                        help="validity of a new serving certificate in days (default 90)")
    parser.add_argument("--ca-days", type=days_type, default=3650, metavar="N",
                        help="validity of a new CA in days (default 3650)")
    parser.add_argument("--webhook-configuration", metavar="NAME",
                        help="write the CA into the caBundle of the Mutating- and "
                        "ValidatingWebhookConfiguration of this name")
    parser.add_argument("--ca-bundle-only", action="store_true",
                        help="only write the caBundle, from the existing serving Secret")
    add_cluster_arguments(parser)
    parser.set_defaults(run=run_sync)


def run_sync(args: argparse.Namespace) -> int:
    if args.ca_bundle_only and not args.webhook_configuration:
        raise CertsError("--ca-bundle-only needs --webhook-configuration NAME")
    names = pki.service_dns_names(args.service, args.namespace)
    try:
        api = api_client_from(args.kubeconfig, args.context)
        secrets = Secrets(api, args.namespace)
        if args.ca_bundle_only:
            ca_pem = secrets.read_data(args.secret, "ca.crt")
        else:
            ca_key_pem, ca_pem = ensure_ca(secrets, f"{args.secret}-ca", args.ca_days)
            ensure_serving(secrets, args.secret, ca_key_pem, ca_pem, names, args.days)
        if args.webhook_configuration:
            for resource in WEBHOOK_CONFIGURATIONS:
                inject_ca_bundle(api, resource, args.webhook_configuration, ca_pem)
    except SyncError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_API
    return 0


class Secrets:
    """Get and write Secrets of one namespace; API failures become SyncError."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.api, self.namespace = api, namespace
        self.path = f"/api/v1/namespaces/{namespace}/secrets"

    def get(self, name: str) -> dict[str, Any] | None:
        try:
            return _call(self.api, "GET", f"{self.path}/{name}")
        except NotFoundError:
            return None
        except ApiError as err:
            raise SyncError(f"Secret {self.namespace}/{name}: {err}") from None

    def read_data(self, name: str, key: str) -> bytes:
        secret = self.get(name)
        if secret is None or key not in (secret.get("data") or {}):
            raise SyncError(f"Secret {self.namespace}/{name} has no {key}: run `python -m "
                            "certs sync` without --ca-bundle-only first")
        return base64.b64decode(secret["data"][key])

    def write(self, name: str, current: dict[str, Any] | None, secret_type: str,
              data: dict[str, bytes]) -> None:
        """Create the Secret, or replace the one read as `current` (409 if it changed since)."""
        body = {"apiVersion": "v1", "kind": "Secret", "type": secret_type,
                "metadata": {"name": name, "namespace": self.namespace, "labels": MANAGED_BY},
                "data": {k: base64.b64encode(v).decode("ascii") for k, v in data.items()}}
        try:
            if current is None:
                _call(self.api, "POST", self.path, body=body)
            else:
                body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                _call(self.api, "PUT", f"{self.path}/{name}", body=body)
        except ApiError as err:
            raise SyncError(f"Secret {self.namespace}/{name}: {err}") from None


def _call(api: Any, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    try:
        return request_json(api, method, path, **kwargs)
    except ApiError:
        raise
    except Exception as err:  # connection errors: urllib3 raises several unrelated types
        raise SyncError(f"cannot reach the API server at {server_of(api)} ({method} {path}): "
                        f"{describe_error(err)}") from None


def _data(secret: dict[str, Any] | None, key: str) -> bytes | None:
    value = ((secret or {}).get("data") or {}).get(key)
    return base64.b64decode(value) if value else None


def ensure_ca(secrets: Secrets, name: str, days: int) -> tuple[bytes, bytes]:
    """(ca_key_pem, ca_cert_pem) from the CA Secret; a new CA if it is missing or unusable."""
    current = secrets.get(name)
    key_pem, cert_pem = _data(current, "ca.key"), _data(current, "ca.crt")
    if key_pem and cert_pem:
        problem = pki.ca_problem(key_pem, cert_pem)
        if problem is None:
            print(f"CA Secret {secrets.namespace}/{name}: kept")
            return key_pem, cert_pem
        print(f"CA Secret {secrets.namespace}/{name}: {problem}; making a new CA")
    key_pem, cert_pem = pki.generate_ca(days=days)
    secrets.write(name, current, "Opaque", {"ca.crt": cert_pem, "ca.key": key_pem})
    print(f"CA Secret {secrets.namespace}/{name}: {'replaced' if current else 'created'} "
          f"(valid {days} days)")
    return key_pem, cert_pem


def ensure_serving(secrets: Secrets, name: str, ca_key_pem: bytes, ca_pem: bytes,
                   names: list[str], days: int) -> None:
    """Make or renew the serving Secret for `names`, signed by the CA."""
    current = secrets.get(name)
    cert_pem, key_pem = _data(current, "tls.crt"), _data(current, "tls.key")
    if cert_pem is None:
        due, reason = True, "it does not exist"
    else:
        due, reason = pki.needs_renewal(cert_pem, ca_pem, key_pem=key_pem, dns_names=names)
    if not due and _data(current, "ca.crt") == ca_pem:
        print(f"Secret {secrets.namespace}/{name}: no renewal needed: {reason}")
        return
    reuse = key_pem if key_pem and cert_pem and _key_usable(key_pem) else None
    new_key, new_cert = pki.generate_serving_cert(ca_key_pem, ca_pem, names, days=days,
                                                  key_pem=reuse)
    secrets.write(name, current, "kubernetes.io/tls",
                  {"ca.crt": ca_pem, "tls.crt": new_cert, "tls.key": new_key})
    expires = pki.load_certificate(new_cert).not_valid_after_utc
    print(f"Secret {secrets.namespace}/{name}: {'renewed' if current else 'created'} "
          f"({reason}) for {', '.join(names)}, valid until {expires:%Y-%m-%d}")


def _key_usable(key_pem: bytes) -> bool:
    try:
        pki.load_private_key(key_pem)
    except pki.PKIError:
        return False
    return True


def inject_ca_bundle(api: Any, resource: str, name: str, ca_pem: bytes) -> None:
    """Set every webhook's caBundle in one webhook configuration (if any differs)."""
    path = f"/apis/admissionregistration.k8s.io/v1/{resource}/{name}"
    bundle = base64.b64encode(ca_pem).decode("ascii")
    try:
        config = _call(api, "GET", path)
        changes = [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
                 for i, hook in enumerate(config.get("webhooks") or [])
                 if hook.get("clientConfig", {}).get("caBundle") != bundle]
        if changes:
            # The resourceVersion test makes a concurrent change fail instead of mixing.
            test = {"op": "test", "path": "/metadata/resourceVersion",
                    "value": config["metadata"]["resourceVersion"]}
            _call(api, "PATCH", path, body=[test, *changes],
                  content_type="application/json-patch+json")
    except ApiError as err:
        raise SyncError(f"{resource}/{name}: {err}") from None
    print(f"{resource}/{name}: caBundle " +
          (f"written into {len(changes)} webhooks" if changes else "already current"))
