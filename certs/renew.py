"""`python -m certs renew`: the serving certificate renewed when it is due, keeping its key
where it can."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path

from . import pki
from .errors import EXIT_OK, CertsError
from .flags import (
    DAYS,
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE,
    add_naming_flags,
    service_names,
)
from .out_dir import Layout, read_file, write_key_and_cert, write_secret

EXIT_RENEWAL_DUE = 1


def add_renew_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "renew",
        help="renew the serving certificate if it is due (past 2/3 of its life, expired, "
        "wrong CA, key mismatch, missing names)",
        description="Check the serving certificate in --out-dir against its CA and renew it "
        "only when needed: past two thirds of its life, expired, not signed by ca.crt, not "
        "matching tls.key, or missing a name asked for. The new certificate keeps the "
        "existing private key (so a server reloading tls.crt never sees a mismatched pair) "
        "unless --new-key, a different --key-type, or an unusable tls.key. Without naming "
        "flags, the names of the current certificate are kept. secret.yaml is rewritten "
        "on renewal. Prints why it renewed, or that nothing was needed; exit code 0 either "
        "way (with --check: 1 when renewal is due, and nothing is written).",
    )
    parser.add_argument("--out-dir", required=True, type=Path, metavar="DIR",
                        help="directory written by `create` (needs ca.crt and ca.key)")
    add_naming_flags(parser, defaults=False)
    parser.add_argument("--key-type", choices=pki.KEY_TYPES, default=None,
                        help="key type for the renewed certificate (default: keep the "
                        "current key's type); a different type means a new key")
    parser.add_argument("--days", type=DAYS, default=365, metavar="N",
                        help="validity of the renewed certificate in days (default: 365)")
    parser.add_argument("--new-key", action="store_true",
                        help="make a new private key instead of reusing tls.key")
    parser.add_argument("--check", action="store_true",
                        help="only report: exit 1 if renewal is due, 0 if not; write nothing")
    parser.set_defaults(run=run_renew)


def run_renew(args: argparse.Namespace) -> int:
    layout = Layout(args.out_dir)
    if not layout.directory.is_dir():
        raise CertsError(f"--out-dir {layout.directory}: no such directory; run "
                         "`python -m certs create` first")
    ca_key_pem = read_file(layout.ca_key, "CA key")
    ca_cert_pem = read_file(layout.ca_cert, "CA certificate")
    problem = pki.ca_problem(ca_key_pem, ca_cert_pem)
    if problem is not None:
        raise CertsError(f"{layout.ca_cert}: {problem}; make a new CA with "
                         "`python -m certs create --force --new-ca` and re-inject the caBundle")

    ca_due = pki.renewal_time(ca_cert_pem)
    if dt.datetime.now(dt.UTC) >= ca_due:
        expires = pki.load_certificate(ca_cert_pem).not_valid_after_utc.isoformat()
        print(f"warning: the CA is past two thirds of its life (expires {expires}); plan a CA "
              "rotation (docs/install.md, \"Certificate rotation\")", file=sys.stderr)

    cert_pem = layout.cert.read_bytes() if layout.cert.exists() else None
    key_pem = layout.key.read_bytes() if layout.key.exists() else None
    names, ips, namespace = _renew_names(args, cert_pem)

    if cert_pem is None:
        due, reason = True, f"{layout.cert} does not exist"
    else:
        due, reason = pki.needs_renewal(cert_pem, ca_cert_pem, key_pem=key_pem,
                                        dns_names=names, ip_addresses=ips)
    if not due:
        print(f"no renewal needed: {reason}")
        return EXIT_OK
    if args.check:
        print(f"renewal due: {reason}")
        return EXIT_RENEWAL_DUE

    reuse_key = _reusable_key(key_pem, args)
    new_key_pem, new_cert_pem = pki.generate_serving_cert(
        ca_key_pem, ca_cert_pem, names, ips, days=args.days,
        key_type=args.key_type or _current_key_type(key_pem), key_pem=reuse_key)
    write_key_and_cert(layout.key, new_key_pem, layout.cert, new_cert_pem)
    write_secret(layout, args.secret_name, namespace)
    kept = "kept the private key" if reuse_key is not None else "new private key"
    print(f"renewed {layout.cert} ({reason}); {kept}; valid {args.days} days "
          f"for {', '.join(names + ips)}")
    print(f"wrote {layout.secret} (Secret {namespace}/{args.secret_name})")
    return EXIT_OK


def _renew_names(args: argparse.Namespace, cert_pem: bytes | None
                 ) -> tuple[list[str], list[str], str]:
    """DNS names, IPs and namespace for the renewed certificate."""
    current_dns: list[str] = []
    current_ips: list[str] = []
    if cert_pem is not None:
        with contextlib.suppress(pki.PKIError):
            current_dns, current_ips = pki.san_dns_names(cert_pem), pki.san_ip_addresses(cert_pem)
    current_service, current_namespace = _service_from_names(current_dns)
    naming = args.service or args.namespace or args.extra_name or args.extra_ip
    service = args.service or current_service or DEFAULT_SERVICE
    namespace = args.namespace or current_namespace or DEFAULT_NAMESPACE
    if not naming and current_dns:
        return current_dns, current_ips, namespace
    if naming:
        return service_names(service, namespace, args.extra_name), list(args.extra_ip), namespace
    return pki.service_dns_names(service, namespace), current_ips, namespace


def _service_from_names(names: Sequence[str]) -> tuple[str | None, str | None]:
    for name in names:
        parts = name.split(".")
        if len(parts) == 3 and parts[2] == "svc":
            return parts[0], parts[1]
    return None, None


def _current_key_type(key_pem: bytes | None) -> str:
    if key_pem is None:
        return "ecdsa"
    try:
        return pki.key_type_of(pki.load_private_key(key_pem))
    except pki.PKIError:
        return "ecdsa"


def _reusable_key(key_pem: bytes | None, args: argparse.Namespace) -> bytes | None:
    if key_pem is None or args.new_key:
        return None
    try:
        key = pki.load_private_key(key_pem)
    except pki.PKIError:
        return None
    if args.key_type is not None and pki.key_type_of(key) != args.key_type:
        return None
    return key_pem
