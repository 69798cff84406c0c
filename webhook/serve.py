"""`serve`: the admission webhook under gunicorn over TLS.

Worker model: gthread workers. The API server keeps HTTPS connections open and reuses
them; gunicorn's sync worker closes every connection after one request, so each review
would pay a new TLS handshake. gthread keeps connections alive and answers several at
once per process. README "Serving" has the measurements.
"""

from __future__ import annotations

import argparse
import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from .kubeclient import add_cluster_arguments

log = logging.getLogger("poolguard")
CERT_CHECK_SECONDS = 2.0
READINESS_METRIC_SECONDS = 5.0


class ReloadingTLS:
    """Serves the certificate files' current content; rotated files are picked up live.

    gunicorn's gthread worker asks for the SSL context once per new connection, so a
    fresh context built from rotated files serves new connections while connections in
    flight keep the context they started with. A pair that does not load (say, the key
    was written but not yet the certificate) keeps the previous context until it does.
    """

    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self.expires_at = 0.0  # the served certificate's notAfter, Unix time
        # Called in a worker after each reload (the metric is set per worker: see post_fork).
        self.on_reload: Callable[[ReloadingTLS], None] = lambda _tls: None
        self._lock = threading.Lock()
        self._stamp = self._files_stamp()
        self._context = self._build()  # fails at start: a server without TLS must not run
        self._next_check = time.monotonic() + CERT_CHECK_SECONDS
        self.reloads = 0

    def _files_stamp(self) -> tuple[Any, ...]:
        stats = [Path(f).resolve().stat() for f in (self.cert_file, self.key_file)]
        return tuple((s.st_mtime_ns, s.st_size, s.st_ino) for s in stats)

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        self.expires_at = _not_after(self.cert_file)
        return context

    def context(self) -> ssl.SSLContext:
        """The context for a new connection, reloaded if the files changed."""
        now = time.monotonic()
        if now < self._next_check:
            return self._context
        with self._lock:
            if now >= self._next_check:
                self._next_check = now + CERT_CHECK_SECONDS
                self._maybe_reload()
        return self._context

    def _maybe_reload(self) -> None:
        try:
            stamp = self._files_stamp()
            if stamp == self._stamp:
                return
            self._context = self._build()
            self._stamp = stamp
            self.reloads += 1
            log.info("serving certificate reloaded from %s", self.cert_file)
            self.on_reload(self)
        except (OSError, ssl.SSLError, ValueError) as err:
            log.warning("certificate files changed but do not load yet (%s); "
                        "keeping the previous certificate", err)


class GunicornServer(BaseApplication):
    """gunicorn configured in code, so `python -m webhook serve` is the whole story."""

    def __init__(self, args: argparse.Namespace,
                 app_factory: Callable[[argparse.Namespace], Any] | None = None) -> None:
        self.args = args
        self.tls = ReloadingTLS(args.cert, args.key)
        self.app_factory = app_factory or _admission_app
        super().__init__()

    def load_config(self) -> None:
        args, tls = self.args, self.tls
        settings = {
            "bind": [f"[{args.host}]:{args.port}" if ":" in args.host
                     else f"{args.host}:{args.port}"],
            "workers": args.workers,
            "worker_class": args.worker_class,
            "threads": args.threads,
            # longer than the API server's idle connection timeout (client-go: 90 s), so
            # the client, not gunicorn, closes idle connections and never races a close
            "keepalive": 120,
            "timeout": 30,
            "graceful_timeout": 20,
            "certfile": args.cert,
            "keyfile": args.key,
            "ssl_context": lambda _conf, _factory: tls.context(),
            "accesslog": "-" if args.access_log else None,
            "errorlog": "-",
            "loglevel": args.log_level,
            "limit_request_field_size": 16384,
            "post_fork": _post_fork,
            "child_exit": _child_exit,
            "worker_tmp_dir": tempfile.gettempdir(),
            "proc_name": "poolguard-webhook",
        }
        if "control_socket_disable" in self.cfg.settings:  # gunicorn >= 24: no $HOME socket
            settings["control_socket_disable"] = True
        for key, value in settings.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self.app_factory(self.args)


def _admission_app(args: argparse.Namespace) -> Any:
    from .server import create_app

    return create_app(build_runtime(args))


def _not_after(cert_file: str) -> float:
    """The notAfter of the first certificate in `cert_file`, as Unix time."""
    from cryptography import x509

    with open(cert_file, "rb") as pem:
        return x509.load_pem_x509_certificate(pem.read()).not_valid_after_utc.timestamp()


def _post_fork(server: Any, _worker: Any) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # The expiry metric is set in the workers only: the master never reloads the
    # certificate, and as a live process its stale value would win the minimum.
    tls = getattr(server.app, "tls", None)
    if tls is not None:
        tls.on_reload = _publish_expiry
        _publish_expiry(tls)


def _publish_expiry(tls: ReloadingTLS) -> None:
    from . import metrics

    metrics.admission().certificate_expiry.set(tls.expires_at)


def _child_exit(_server: Any, worker: Any) -> None:
    from . import metrics

    metrics.worker_exited(worker.pid)


def build_runtime(args: argparse.Namespace) -> Any:
    """The Runtime for this worker: policy holder and a state-file or live cluster view."""
    from . import metrics
    from .runtime import PolicyHolder, Runtime, Settings
    from .state import load_state

    measured = metrics.admission()

    def loaded() -> None:
        measured.policy_loaded.set_to_current_time()

    policy = PolicyHolder(args.policy, on_error=measured.policy_errors.inc, on_load=loaded)
    settings = Settings(max_staleness_seconds=args.max_staleness, fail_closed=args.fail_closed)
    if args.state:
        runtime = Runtime(policy, load_state(args.state), settings)
    else:
        from .kubeclient import api_client_from
        from .live import LiveCluster

        # Watches are re-opened every minute, so even a quiet resource is heard from well
        # inside the default staleness bound.
        view = LiveCluster(api_client_from(args.kubeconfig, args.context), watch_timeout=60)
        view.start()
        runtime = Runtime(policy, view, settings)
    _report_readiness(runtime, measured.cache_synced)
    return runtime


def _report_readiness(runtime: Any, gauge: Any, period: float = READINESS_METRIC_SECONDS) -> None:
    """Keep this worker's cache_synced gauge current, whether or not probes reach it.

    The metric is the minimum over the workers, and a probe or scrape lands on one worker:
    a worker that answered none would otherwise hold it at 0. Checking readiness also
    re-reads a changed policy file, so a bad policy is counted without any traffic.
    """
    def loop() -> None:
        while True:
            ready, _ = runtime.readiness()
            gauge.set(1 if ready else 0)
            time.sleep(period)

    threading.Thread(target=loop, daemon=True, name="readiness-metric").start()


def add_serve_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "serve", help="run the admission webhook over HTTPS",
        description="Serve the admission webhook over TLS with gunicorn. Reads the cluster "
        "from --state FILE, or live through watches (kubeconfig resolved like kubectl, else "
        "in-cluster).")
    parser.add_argument("--policy", metavar="FILE",
                        help="policy YAML, re-read when it changes (default: built-in policy)")
    parser.add_argument("--cert", required=True, metavar="FILE",
                        help="serving certificate (PEM), reloaded when rotated")
    parser.add_argument("--key", required=True, metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--port", type=int, default=8443, help="HTTPS port (default 8443)")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default 0.0.0.0)")
    parser.add_argument("--workers", type=int, default=2,
                        help="gunicorn worker processes (default 2)")
    parser.add_argument("--threads", type=int, default=8,
                        help="threads per worker, each one connection at a time (default 8)")
    parser.add_argument("--worker-class", choices=("gthread", "sync"), default="gthread",
                        help="gthread (default) keeps the API server's connections alive; "
                        "sync closes each after one request (for comparison only)")
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
                        choices=("debug", "info", "warning", "error"))
    parser.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from .cli import CommandError

    for option, path in (("--cert", args.cert), ("--key", args.key), ("--policy", args.policy),
                         ("--state", args.state)):
        if path is not None and not Path(path).is_file():
            raise CommandError(f"{option} {path}: no such file")
    if args.state and (args.kubeconfig or args.context):
        raise CommandError("--state serves from a file: leave out --kubeconfig and --context")
    if args.workers < 1 or args.threads < 1:
        raise CommandError("--workers and --threads must be 1 or more")
    _prepare_metrics_dir()
    from .state import load_policy

    load_policy(args.policy)  # a bad policy stops startup here, with the field named
    try:
        server = GunicornServer(args)
    except (ssl.SSLError, OSError) as err:
        raise CommandError(f"cannot load --cert {args.cert} / --key {args.key}: {err}") from None
    server.run()
    return 0


def _prepare_metrics_dir() -> None:
    """One metrics directory for all workers, emptied of an earlier run's files."""
    from . import metrics

    directory = os.environ.get(metrics.MULTIPROC_ENV) or tempfile.mkdtemp(
        prefix="poolguard-metrics-")
    Path(directory).mkdir(parents=True, exist_ok=True)
    for stale in Path(directory).glob("*.db"):
        stale.unlink()
    metrics.use_multiprocess_dir(directory)
