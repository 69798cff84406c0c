"""The flags `create` and `renew` share: the Service's names, the Secret's, lifetimes."""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Sequence

from webhook.cli.argtypes import number

from . import pki

DEFAULT_SERVICE = "poolguard-webhook"
DEFAULT_NAMESPACE = "poolguard"
DEFAULT_SECRET = "poolguard-webhook-tls"


def service_names(service: str, namespace: str, extra_names: Sequence[str]) -> list[str]:
    """The Service's DNS names, then the extra ones; `PKIError` for an invalid name."""
    return pki.check_dns_names([*pki.service_dns_names(service, namespace), *extra_names])


def add_naming_flags(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """--service/--namespace/...: `create` has fixed defaults, `renew` the current cert's."""
    source = "" if defaults else "the current certificate's, else "
    parser.add_argument("--service", default=DEFAULT_SERVICE if defaults else None,
                        metavar="NAME",
                        help=f"webhook Service name (default: {source}{DEFAULT_SERVICE})")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE if defaults else None,
                        metavar="NS",
                        help=f"namespace of the Service and the Secret "
                        f"(default: {source}{DEFAULT_NAMESPACE})")
    parser.add_argument("--extra-name", action="append", default=[], metavar="NAME",
                        help="another DNS name for the certificate, e.g. localhost "
                        "(repeatable)")
    parser.add_argument("--extra-ip", action="append", default=[], metavar="IP", type=_ip,
                        help="an IP address for the certificate, e.g. 127.0.0.1 (repeatable)")
    parser.add_argument("--secret-name", default=DEFAULT_SECRET, metavar="NAME",
                        help=f"name of the Secret in secret.yaml (default: {DEFAULT_SECRET})")


def _ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address") from None


DAYS = number(int, 1, what="a lifetime in days")
