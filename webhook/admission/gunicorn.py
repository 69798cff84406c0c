"""`serve`: the admission webhook under gunicorn over TLS.

Worker model: one gevent worker per replica (`webhook.admission.worker.DeadlineWorker`),
which holds thousands of idle or slow connections in greenlets and drops those that miss
the handshake, header or body deadlines; replicas scale it out behind the Service. The
gthread and sync workers stay selectable for comparison. README "Serving" has the
measurements.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication

from ..cluster.filewatch import FileWatcher

log = logging.getLogger("poolguard")
CERT_CHECK_SECONDS = 2.0
READINESS_METRIC_SECONDS = 5.0
# TLS 1.2: forward-secret AEAD suites only (every TLS 1.3 suite is AEAD already).
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
WORKER_CLASSES = {"gevent": "webhook.admission.worker.DeadlineWorker", "gthread": "gthread",
                  "sync": "sync"}


class ReloadingTLS:
    """Serves the certificate files' current content; rotated files are picked up live.

    The workers ask for the SSL context once per new connection, so a fresh context built
    from rotated files serves new connections while connections in flight keep the
    context they started with. A pair that does not load (say, the key was written but
    not yet the certificate) keeps the previous context until it does. With `client_ca`,
    client certificates are verified against it (reloaded the same way).
    """

    def __init__(self, cert_file: str, key_file: str, client_ca: str | None = None) -> None:
        self.cert_file, self.key_file, self.client_ca = cert_file, key_file, client_ca
        self.expires_at = 0.0  # the served certificate's notAfter, Unix time
        # Called in a worker after each reload (the metric is set per worker: see post_fork).
        self.on_reload: Callable[[ReloadingTLS], None] = lambda _tls: None
        self._lock = threading.Lock()
        self._files = FileWatcher(cert_file, key_file, *([client_ca] if client_ca else []))
        self._context = self._build()  # fails at start: a server without TLS must not run
        self._next_check = time.monotonic() + CERT_CHECK_SECONDS
        self.reloads = 0

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(TLS12_CIPHERS)
        context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
        context.load_cert_chain(self.cert_file, self.key_file)
        if self.client_ca:
            # Optional at the TLS level, so the kubelet's probes (which present no
            # certificate) still connect; the admission endpoints then require one.
            context.verify_mode = ssl.CERT_OPTIONAL
            context.load_verify_locations(cafile=self.client_ca)
        context.set_alpn_protocols(["http/1.1"])
        self.expires_at = _not_after(self.cert_file)
        return context

    def rebuild(self) -> None:
        """Build the context again: the gevent worker calls this once it patched `ssl`."""
        self._context = self._build()

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
        stamp = self._files.changed()
        if stamp is None:
            return
        try:
            self._context = self._build()
            self._files.take(stamp)  # only a pair that loads: a half-written one is retried
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
        self.tls = ReloadingTLS(args.cert, args.key, args.client_ca)
        self.app_factory = app_factory or _admission_app
        super().__init__()

    def load_config(self) -> None:
        args, tls = self.args, self.tls
        settings = {
            "bind": [f"[{args.host}]:{args.port}" if ":" in args.host
                     else f"{args.host}:{args.port}"],
            "workers": args.workers,
            "worker_class": WORKER_CLASSES[args.worker_class],
            "threads": args.threads,
            # gevent: connections held at once (each a greenlet and a socket; the
            # file-descriptor limit must allow as many)
            "worker_connections": 10000,
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
            "worker_exit": _worker_exit,
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
    from .app import create_app, with_fast_admission

    return with_fast_admission(create_app(build_runtime(args),
                                          require_client_cert=bool(args.client_ca)))


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


def _worker_exit(_server: Any, worker: Any) -> None:
    """End a worker process here, once its logs are flushed: `os._exit`, as
    multiprocessing ends its forked children.

    Left to the interpreter's teardown, a worker freed the objects it holds (some kept
    alive until then by gc.freeze) after gevent's modules were already cleared; a
    logging handler among them then locked logging's gevent-patched lock and printed a
    `_removeHandlerRef ... 'NoneType' object is not callable` traceback at every worker
    exit. Nothing a worker owns needs that teardown: the master marks its metrics dead
    (child_exit) and the kernel closes its sockets. gunicorn also calls this hook in the
    master for a worker it found gone: there it does nothing.
    """
    if os.getpid() != worker.pid:
        return
    logging.shutdown()  # flush every handler, as the interpreter's exit would
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(_exit_status(sys.exc_info()[1]))  # called while gunicorn's SystemExit unwinds


def _exit_status(exc: BaseException | None) -> int:
    """The status `exc` would have exited the interpreter with (SystemExit's rules)."""
    if exc is None:
        return 0
    if not isinstance(exc, SystemExit):
        return 1
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def build_runtime(args: argparse.Namespace) -> Any:
    """The Runtime for this worker: policy holder and a state-file or live cluster view."""
    from ..cluster.state import load_state
    from . import metrics
    from .runtime import PolicyHolder, Runtime, Settings

    measured = metrics.admission()

    def loaded() -> None:
        measured.policy_loaded.set_to_current_time()

    policy = PolicyHolder(args.policy, on_error=measured.policy_errors.inc, on_load=loaded)
    settings = Settings(max_staleness_seconds=args.max_staleness, fail_closed=args.fail_closed)
    if args.state:
        snapshot = getattr(args, "snapshot", None)  # parsed once by `serve` before forking
        if snapshot is None:
            snapshot = load_state(args.state)
        snapshot.read_all_facts()  # now, not during the first scale check
        gc.collect()
        gc.freeze()  # the loaded state is never garbage: keep collections off it
        runtime = Runtime(policy, snapshot, settings)
    else:
        from ..cluster.kubeclient import api_client_from
        from ..cluster.live import LiveCluster

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
