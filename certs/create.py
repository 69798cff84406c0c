"""`python -m certs create`: a CA (or the one in --out-dir, reused) and a serving
certificate, with the Secret that carries them."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import pki
from .errors import EXIT_OK, CertsError
from .flags import DAYS, add_naming_flags, service_names
from .out_dir import Layout, prepare_out_dir, read_file, write_key_and_cert, write_secret


def add_create_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "create",
        help="make a CA (or reuse the one in --out-dir) and a serving certificate",
        description="Write ca.crt, ca.key, tls.crt, tls.key (keys mode 0600) and secret.yaml "
        "(a kubernetes.io/tls Secret with ca.crt, tls.crt and tls.key) into --out-dir. The "
        "certificate names SERVICE.NAMESPACE.svc and SERVICE.NAMESPACE.svc.cluster.local plus "
        "any --extra-name/--extra-ip. A valid CA already in --out-dir is reused, so the "
        "caBundle stays the same. Existing keys are never replaced without --force.",
    )
    parser.add_argument("--out-dir", required=True, type=Path, metavar="DIR",
                        help="directory for the files (created with mode 0700 if missing)")
    add_naming_flags(parser, defaults=True)
    parser.add_argument("--key-type", choices=pki.KEY_TYPES, default="ecdsa",
                        help="ecdsa (P-256, default) or rsa (2048 bits), for new keys")
    parser.add_argument("--ca-days", type=DAYS, default=3650, metavar="N",
                        help="validity of a new CA in days (default: 3650)")
    parser.add_argument("--days", type=DAYS, default=365, metavar="N",
                        help="validity of the serving certificate in days (default: 365)")
    parser.add_argument("--force", action="store_true",
                        help="replace an existing serving key and certificate (and a CA that "
                        "is unusable, or any CA with --new-ca)")
    parser.add_argument("--new-ca", action="store_true",
                        help="make a new CA even if a valid one exists (needs --force when "
                        "ca.key exists; the caBundle changes)")
    parser.set_defaults(run=run_create)


def run_create(args: argparse.Namespace) -> int:
    layout = Layout(args.out_dir)
    names = service_names(args.service, args.namespace, args.extra_name)  # checked before any write
    prepare_out_dir(layout.directory)
    for path in (layout.key, layout.cert):
        if path.exists() and not args.force:
            raise CertsError(f"{path} already exists; pass --force to replace the serving "
                             "key and certificate, or use `renew`")
    ca_key_pem, ca_cert_pem = _create_or_reuse_ca(layout, args)
    key_pem, cert_pem = pki.generate_serving_cert(
        ca_key_pem, ca_cert_pem, names, args.extra_ip, days=args.days, key_type=args.key_type)
    write_key_and_cert(layout.key, key_pem, layout.cert, cert_pem)
    write_secret(layout, args.secret_name, args.namespace)
    print(f"wrote {layout.cert} and {layout.key} for {', '.join(names + args.extra_ip)} "
          f"(valid {args.days} days)")
    print(f"wrote {layout.secret} (Secret {args.namespace}/{args.secret_name})")
    return EXIT_OK


def _create_or_reuse_ca(layout: Layout, args: argparse.Namespace) -> tuple[bytes, bytes]:
    have_key, have_cert = layout.ca_key.exists(), layout.ca_cert.exists()
    if have_key or have_cert:
        problem = _existing_ca_problem(layout, have_key, have_cert)
        if problem is None and not args.new_ca:
            print(f"reusing the CA in {layout.directory} (caBundle unchanged)")
            return read_file(layout.ca_key, "CA key"), read_file(layout.ca_cert, "CA certificate")
        why = "--new-ca was given" if problem is None else problem
        if have_key and not args.force:
            raise CertsError(f"{layout.ca_key}: {why}; pass --force to replace the CA "
                             "(the caBundle changes)")
        print(f"replacing the CA in {layout.directory}: {why}; inject the new caBundle")
    ca_key_pem, ca_cert_pem = pki.generate_ca(days=args.ca_days, key_type=args.key_type)
    write_key_and_cert(layout.ca_key, ca_key_pem, layout.ca_cert, ca_cert_pem)
    print(f"wrote {layout.ca_cert} and {layout.ca_key} (new CA, valid {args.ca_days} days)")
    return ca_key_pem, ca_cert_pem


def _existing_ca_problem(layout: Layout, have_key: bool, have_cert: bool) -> str | None:
    if not have_key:
        return f"{layout.ca_cert} exists but {layout.ca_key} does not"
    if not have_cert:
        return f"{layout.ca_key} exists but {layout.ca_cert} does not"
    return pki.ca_problem(read_file(layout.ca_key, "CA key"),
                          read_file(layout.ca_cert, "CA certificate"))
