"""`serve`: the admission webhook under gunicorn over TLS (webhook.admission.server)."""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import socket
import ssl
import tempfile
from pathlib import Path

from ..cluster.kubeclient import NoKubeConfigError, add_cluster_arguments, api_client_from
from ..cluster.policy_event import configmap_ref
from ..cluster.state import load_policy, load_state, print_state_notes
from ..errors import CommandError


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "serve", help="run the admission webhook over HTTPS",
        description="Serve the admission webhook over TLS with gunicorn. Reads the cluster "
        "from --state FILE, or live through watches (kubeconfig resolved like kubectl, else "
        "in-cluster).")
    parser.add_argument("--policy", metavar="FILE",
                        help="policy YAML, re-read when it changes (default: built-in policy)")
    parser.add_argument("--policy-configmap", metavar="NAMESPACE/NAME",
                        help="the ConfigMap --policy is mounted from: a refused policy change "
                        "is also posted there as a Warning Event (live mode)")
    parser.add_argument("--cert", required=True, metavar="FILE",
                        help="serving certificate (PEM), reloaded when rotated")
    parser.add_argument("--key", required=True, metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--port", type=int, default=8443, help="HTTPS port (default 8443)")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default 0.0.0.0)")
    parser.add_argument("--workers", type=int, default=1,
                        help="gunicorn worker processes (default 1: scale out with replicas)")
    parser.add_argument("--threads", type=int, default=8,
                        help="gthread only: threads per worker (default 8)")
    parser.add_argument("--worker-class", choices=("gevent", "gthread", "sync"),
                        default="gevent",
                        help="gevent (default): every connection in one process, with "
                        "deadlines on handshake, headers and body; gthread and sync for "
                        "comparison only")
    parser.add_argument("--client-ca", metavar="FILE",
                        help="CA bundle (PEM) that signed the API server's client "
                        "certificate: the admission endpoints then answer only clients "
                        "presenting one (probes and /metrics stay open; gevent worker only)")
    parser.add_argument("--state", metavar="FILE",
                        help="serve from a cluster-state file instead of a live cluster")
    add_cluster_arguments(parser)
    parser.add_argument("--max-staleness", type=float, default=120.0, metavar="SECONDS",
                        help="a cache not heard from the API for longer is not trusted for "
                        "scale checks (default 120)")
    parser.add_argument("--fail-closed", action="store_true",
                        help="deny scale-downs that cannot be checked (stale cache, unknown "
                        "workload); default: allow them with a warning")
    parser.add_argument("--access-log", action="store_true", help="log every request")
    parser.add_argument("--log-level", default="info",
                        choices=("debug", "info", "warning", "error"),
                        help="gunicorn's log level (default info)")
    parser.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    for option, path in (("--cert", args.cert), ("--key", args.key), ("--policy", args.policy),
                         ("--state", args.state), ("--client-ca", args.client_ca)):
        if path is not None and not Path(path).is_file():
            raise CommandError(f"{option} {path}: no such file")
    if args.state and (args.kubeconfig or args.context):
        raise CommandError("--state serves from a file: leave out --kubeconfig and --context")
    if args.workers < 1 or args.threads < 1:
        raise CommandError("--workers and --threads must be 1 or more")
    if args.client_ca and args.worker_class != "gevent":
        raise CommandError("--client-ca needs the gevent worker (--worker-class gevent)")
    load_policy(args.policy)  # a bad policy stops startup here, with the field named
    if args.policy_configmap is not None:
        try:
            configmap_ref(args.policy_configmap)
        except ValueError as err:
            raise CommandError(f"--policy-configmap {err}") from None
    if args.state:
        # Read once, here: a bad file is one error line instead of a traceback per
        # worker, and the workers share the parsed objects through fork.
        args.snapshot = load_state(args.state)
        print_state_notes(args.snapshot)
        args.snapshot.read_all_facts()
    else:
        _check_kubeconfig(args.kubeconfig, args.context)
    _check_port(args.host, args.port)
    created = _prepare_metrics_dir()  # before the metrics modules are imported
    owner = os.getpid()
    try:
        from ..admission.server import GunicornServer  # gunicorn and Flask only for `serve`

        try:
            server = GunicornServer(args)
        except (ssl.SSLError, OSError) as err:
            # cryptography only to explain a failure: every other command starts faster.
            from .tlsfiles import tls_file_problem

            problem = tls_file_problem(_tls_files(args))
            if problem is not None:
                raise CommandError(f"cannot load {problem}") from None
            files = f"--cert {args.cert} / --key {args.key}" + (
                f" / --client-ca {args.client_ca}" if args.client_ca else "")
            raise CommandError(f"cannot load {files}: {err}") from None
        server.run()
    finally:
        # Workers leave through this frame too (a fork of it): only the master cleans up.
        if created is not None and os.getpid() == owner:
            shutil.rmtree(created, ignore_errors=True)
    return 0


def _check_kubeconfig(kubeconfig: str | None, context: str | None) -> None:
    """Fail now, in one line, without a usable kubeconfig (each worker would otherwise
    stop with a traceback)."""
    try:
        api_client_from(kubeconfig, context).close()
    except NoKubeConfigError as err:
        raise CommandError(f"{err}, or --state FILE to serve from a saved cluster "
                           "state") from None


def _tls_files(args: argparse.Namespace) -> dict[str, tuple[str, str]]:
    files = {"--cert": (args.cert, "CERTIFICATE"), "--key": (args.key, "PRIVATE KEY")}
    if args.client_ca:
        files["--client-ca"] = (args.client_ca, "CERTIFICATE")
    return files


def _check_port(host: str, port: int) -> None:
    """Fail now, in one line, when the address cannot be listened on (gunicorn would retry
    for seconds and then stop the whole server with a log line per attempt)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn binds
        try:
            probe.bind((host, port))
        except OSError as err:
            reason = ("already in use" if err.errno == errno.EADDRINUSE
                      else err.strerror or str(err))
            raise CommandError(f"--port {port}: cannot listen on {host}:{port}: "
                               f"{reason}") from None


def _prepare_metrics_dir() -> str | None:
    """One metrics directory for all workers, emptied of an earlier run's files.

    Returns the directory when it was made here (a temporary one, to remove at exit).
    """
    from ..admission import metrics

    directory = os.environ.get(metrics.MULTIPROC_ENV)
    created = None
    if not directory:
        directory = created = tempfile.mkdtemp(prefix="poolguard-metrics-")
    Path(directory).mkdir(parents=True, exist_ok=True)
    for stale in Path(directory).glob("*.db"):
        stale.unlink()
    # Before any admission metric exists: metrics.py says why the order matters.
    metrics.use_multiprocess_dir(directory)
    return created
