"""`serve`: the admission webhook under gunicorn over TLS, configured in code.

Worker model: one gevent worker per replica (worker.py's `DeadlineWorker`), which holds
thousands of idle or slow connections in greenlets and drops those that miss the
handshake, header or body deadlines; replicas scale it out behind the Service. The
gthread and sync workers stay selectable for comparison. The process hooks are here too:
the certificate-expiry metric per worker, dead workers' metrics, and a worker's exit.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication

from .certwatcher import CertWatcher
from .worker import DeadlineWorker

# gunicorn runs `sync` as gthread when there are several threads (the default 8).
WORKER_CLASSES: dict[str, type | str] = {"gevent": DeadlineWorker, "gthread": "gthread",
                                         "sync": "sync"}


class GunicornServer(BaseApplication):
    """gunicorn configured in code, so `python -m webhook serve` is the whole story."""

    def __init__(self, args: argparse.Namespace,
                 app_factory: Callable[[argparse.Namespace], Any] | None = None) -> None:
        self.args = args
        self.tls = CertWatcher(args.cert, args.key, args.client_ca)
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
    from .runtime import build_runtime

    return with_fast_admission(create_app(build_runtime(args),
                                          require_client_cert=bool(args.client_ca)))


def _post_fork(server: Any, _worker: Any) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    # The expiry metric is set in the workers only: the master never reloads the
    # certificate, and as a live process its stale value would win the minimum.
    tls = getattr(server.app, "tls", None)
    if tls is not None:
        tls.on_reload = _publish_expiry
        _publish_expiry(tls)


def _publish_expiry(tls: CertWatcher) -> None:
    from . import metrics

    metrics.admission().certificate_expiry.set(tls.expires_at)


def _child_exit(_server: Any, worker: Any) -> None:
    from . import metrics

    metrics.worker_exited(worker.pid)


def _worker_exit(_server: Any, worker: Any) -> None:
    """End a worker process here, once its logs are flushed: `os._exit`, as
    multiprocessing ends its forked children.

    Left to the interpreter's teardown, a worker frees the objects it holds (some kept
    alive until then by gc.freeze) after gevent's modules are already cleared; a
    logging handler among them then locks logging's gevent-patched lock and prints a
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
