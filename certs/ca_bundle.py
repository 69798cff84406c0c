"""`python -m certs ca-bundle` and `inject`: the caBundle of the webhook configurations,
printed or written into them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import pki
from .errors import EXIT_OK, CertsError
from .files import PUBLIC_MODE
from .manifests import ca_bundle, inject_ca_bundle
from .out_dir import Layout, read_file, write_file


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
        print(ca_bundle(read_file(path, "CA certificate")))
    except pki.PKIError as err:
        raise CertsError(f"CA certificate {path}: {err}") from None
    return EXIT_OK


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
        bundle = ca_bundle(read_file(args.ca_file, "--ca-file"))
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
            text = read_file(path, "manifest").decode("utf-8")
        except UnicodeDecodeError:
            raise CertsError(f"manifest {path}: not UTF-8 text") from None
        results.append((path, *inject_ca_bundle(text, bundle, str(path))))
    _require_webhooks(sum(count for _, _, count in results),
                      ", ".join(str(p) for p in args.manifests))
    for index, (path, out, _count) in enumerate(results):
        if args.in_place:
            write_file(path, out.encode(), PUBLIC_MODE)
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
