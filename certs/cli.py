"""`python -m certs`: certificates for the poolguard webhook and the caBundle that trusts them.

Commands: `create`, `renew`, `ca-bundle`, `inject`, and `sync` (in the cluster:
certs/sync.py). Unusable input (missing or unreadable
files, a directory that cannot be written, a key that does not match its certificate)
prints one `error: ...` line on stderr and exits with code 2.

Size: each command's parser sits beside the function that runs it, four commands in all.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import ipaddress
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from webhook.cli.argtypes import OneLineErrors, add_version_flags, number, run_writing_stdout
from webhook.errors import InputError

from . import pki
from .errors import CertsError
from .files import KEY_MODE, PUBLIC_MODE, write_atomic, write_pair
from .manifests import ca_bundle, inject_ca_bundle, secret_manifest

EXIT_OK = 0
EXIT_RENEWAL_DUE = 1
EXIT_USAGE = 2

DEFAULT_SERVICE = "poolguard-webhook"
DEFAULT_NAMESPACE = "poolguard"
DEFAULT_SECRET = "poolguard-webhook-tls"


@dataclass(frozen=True)
class Layout:
    """The files of an --out-dir."""

    directory: Path

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def key(self) -> Path:
        return self.directory / "tls.key"

    @property
    def cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def secret(self) -> Path:
        return self.directory / "secret.yaml"


# --------------------------------------------------------------------------- file helpers


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CertsError(f"{what} {path}: no such file") from None
    except IsADirectoryError:
        raise CertsError(f"{what} {path}: is a directory, not a file") from None
    except OSError as err:
        raise CertsError(f"{what} {path}: cannot read it: {err.strerror}") from None


def _prepare_dir(directory: Path) -> None:
    """Create the directory (mode 0700) if needed and make sure we can write into it."""
    if directory.exists() and not directory.is_dir():
        raise CertsError(f"--out-dir {directory}: exists and is not a directory")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise CertsError(f"--out-dir {directory}: cannot create it: {err.strerror}") from None
    probe = directory / ".poolguard-write-test"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise CertsError(f"--out-dir {directory}: not writable: {err.strerror}") from None


def _write(path: Path, data: bytes, mode: int) -> None:
    try:
        write_atomic(path, data, mode)
    except OSError as err:
        raise CertsError(f"cannot write {path}: {err.strerror}") from None


def _write_pair(key_path: Path, key_pem: bytes, cert_path: Path, cert_pem: bytes) -> None:
    try:
        write_pair(key_path, key_pem, cert_path, cert_pem)
    except OSError as err:
        raise CertsError(f"cannot write {key_path} / {cert_path}: {err.strerror}") from None


# --------------------------------------------------------------------------- secret


def _write_secret(layout: Layout, name: str, namespace: str) -> None:
    secret = secret_manifest(name, namespace, _read(layout.ca_cert, "CA certificate"),
                             _read(layout.cert, "certificate"), _read(layout.key, "key"))
    _write(layout.secret, secret, KEY_MODE)


# --------------------------------------------------------------------------- names


def _names(service: str, namespace: str, extra_names: Sequence[str]) -> list[str]:
    """The Service's DNS names, then the extra ones; `PKIError` for an invalid name."""
    return pki.check_dns_names([*pki.service_dns_names(service, namespace), *extra_names])


def _add_naming_flags(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
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



_DAYS = number(int, 1, what="a lifetime in days")


# --------------------------------------------------------------------------- create


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
    _add_naming_flags(parser, defaults=True)
    parser.add_argument("--key-type", choices=pki.KEY_TYPES, default="ecdsa",
                        help="ecdsa (P-256, default) or rsa (2048 bits), for new keys")
    parser.add_argument("--ca-days", type=_DAYS, default=3650, metavar="N",
                        help="validity of a new CA in days (default: 3650)")
    parser.add_argument("--days", type=_DAYS, default=365, metavar="N",
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
    names = _names(args.service, args.namespace, args.extra_name)  # checked before any write
    _prepare_dir(layout.directory)
    for path in (layout.key, layout.cert):
        if path.exists() and not args.force:
            raise CertsError(f"{path} already exists; pass --force to replace the serving "
                             "key and certificate, or use `renew`")
    ca_key_pem, ca_cert_pem = _create_or_reuse_ca(layout, args)
    key_pem, cert_pem = pki.generate_serving_cert(
        ca_key_pem, ca_cert_pem, names, args.extra_ip, days=args.days, key_type=args.key_type)
    _write_pair(layout.key, key_pem, layout.cert, cert_pem)
    _write_secret(layout, args.secret_name, args.namespace)
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
            return _read(layout.ca_key, "CA key"), _read(layout.ca_cert, "CA certificate")
        why = "--new-ca was given" if problem is None else problem
        if have_key and not args.force:
            raise CertsError(f"{layout.ca_key}: {why}; pass --force to replace the CA "
                             "(the caBundle changes)")
        print(f"replacing the CA in {layout.directory}: {why}; inject the new caBundle")
    ca_key_pem, ca_cert_pem = pki.generate_ca(days=args.ca_days, key_type=args.key_type)
    _write_pair(layout.ca_key, ca_key_pem, layout.ca_cert, ca_cert_pem)
    print(f"wrote {layout.ca_cert} and {layout.ca_key} (new CA, valid {args.ca_days} days)")
    return ca_key_pem, ca_cert_pem


def _existing_ca_problem(layout: Layout, have_key: bool, have_cert: bool) -> str | None:
    if not have_key:
        return f"{layout.ca_cert} exists but {layout.ca_key} does not"
    if not have_cert:
        return f"{layout.ca_key} exists but {layout.ca_cert} does not"
    return pki.ca_problem(_read(layout.ca_key, "CA key"), _read(layout.ca_cert, "CA certificate"))


# --------------------------------------------------------------------------- renew


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
    _add_naming_flags(parser, defaults=False)
    parser.add_argument("--key-type", choices=pki.KEY_TYPES, default=None,
                        help="key type for the renewed certificate (default: keep the "
                        "current key's type); a different type means a new key")
    parser.add_argument("--days", type=_DAYS, default=365, metavar="N",
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
    ca_key_pem = _read(layout.ca_key, "CA key")
    ca_cert_pem = _read(layout.ca_cert, "CA certificate")
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
    _write_pair(layout.key, new_key_pem, layout.cert, new_cert_pem)
    _write_secret(layout, args.secret_name, namespace)
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
        return _names(service, namespace, args.extra_name), list(args.extra_ip), namespace
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


# --------------------------------------------------------------------------- ca-bundle


def add_ca_bundle_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "ca-bundle",
        help="print the base64 caBundle for the webhook configurations",
        description="Print DIR/ca.crt base64-encoded on one line: the value of `caBundle` "
        "in the webhook configurations' clientConfig.",
    )
    parser.add_argument("--out-dir", required=True, type=Path, metavar="DIR",
                        help="directory written by `create`")
    parser.set_defaults(run=run_ca_bundle)


def run_ca_bundle(args: argparse.Namespace) -> int:
    path = Layout(args.out_dir).ca_cert
    try:
        print(ca_bundle(_read(path, "CA certificate")))
    except pki.PKIError as err:
        raise CertsError(f"CA certificate {path}: {err}") from None
    return EXIT_OK


# --------------------------------------------------------------------------- inject


def add_inject_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "inject",
        help="fill caBundle of every webhook in Mutating/ValidatingWebhookConfigurations",
        description="Set clientConfig.caBundle of every webhook of every "
        "MutatingWebhookConfiguration and ValidatingWebhookConfiguration (also inside a "
        "List) to the base64 of --ca-file. Reads the MANIFEST files (or stdin when none is "
        "given) and writes all documents to stdout, or back to each file with --in-place. "
        "Other documents pass through unchanged (YAML comments are not kept). Fails when the "
        "input holds no webhook configuration.",
    )
    parser.add_argument("--ca-file", required=True, type=Path, metavar="FILE",
                        help="PEM CA certificate(s), e.g. DIR/ca.crt from `create`")
    parser.add_argument("--in-place", "-i", action="store_true",
                        help="rewrite each MANIFEST instead of printing to stdout")
    parser.add_argument("manifests", nargs="*", type=Path, metavar="MANIFEST",
                        help="YAML files (default: read stdin)")
    parser.set_defaults(run=run_inject)


def run_inject(args: argparse.Namespace) -> int:
    try:
        bundle = ca_bundle(_read(args.ca_file, "--ca-file"))
    except pki.PKIError as err:
        raise CertsError(f"--ca-file {args.ca_file}: {err}") from None
    if args.in_place and not args.manifests:
        raise CertsError("--in-place needs MANIFEST files (stdin cannot be rewritten)")
    if not args.manifests:
        out, count = inject_ca_bundle(sys.stdin.read(), bundle)
        _require_webhooks(count, "stdin")
        sys.stdout.write(out)
        print(f"injected caBundle into {count} webhooks", file=sys.stderr)
        return EXIT_OK
    results = []
    for path in args.manifests:
        try:
            text = _read(path, "manifest").decode("utf-8")
        except UnicodeDecodeError:
            raise CertsError(f"manifest {path}: not UTF-8 text") from None
        results.append((path, *inject_ca_bundle(text, bundle, str(path))))
    _require_webhooks(sum(count for _, _, count in results),
                      ", ".join(str(p) for p in args.manifests))
    for index, (path, out, _count) in enumerate(results):
        if args.in_place:
            _write(path, out.encode(), PUBLIC_MODE)
        else:
            if index and not out.startswith("---"):
                sys.stdout.write("---\n")
            sys.stdout.write(out)
    total = sum(count for _, _, count in results)
    print(f"injected caBundle into {total} webhooks", file=sys.stderr)
    return EXIT_OK


def _require_webhooks(count: int, where: str) -> None:
    if count == 0:
        raise CertsError(f"{where}: no webhooks found in any MutatingWebhookConfiguration or "
                         "ValidatingWebhookConfiguration")


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="python -m certs",
        description="Certificates for the poolguard webhook: a private CA, a serving "
        "certificate for the webhook Service, the Secret that carries them, and the caBundle "
        "for the webhook configurations. Exit code 2 with one `error:` line for unusable "
        "input.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (add_create_parser, add_renew_parser, add_ca_bundle_parser, add_inject_parser):
        add(commands)
    from .sync import add_sync_parser

    add_sync_parser(commands, _DAYS)
    add_version_flags(parser, commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_writing_stdout(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except InputError as err:  # CertsError, PKIError: one `error:` line, exit code 2
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
