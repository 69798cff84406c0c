"""TLS for `serve`: the server's SSL context, rebuilt when its certificate files rotate.

Like controller-runtime's certwatcher: cert-manager (or the certs tool) rewrites the
mounted files and new connections get the new certificate without a restart. With a
client CA, the worker puts the peer certificate it verified into the WSGI environ under
`CLIENT_CERT_KEY`, where the app's admission endpoints look for it.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable

from ..cluster.filewatch import FileWatcher

log = logging.getLogger("poolguard")
CERT_CHECK_SECONDS = 2.0
# TLS 1.2: forward-secret AEAD suites only (every TLS 1.3 suite is AEAD already).
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
CLIENT_CERT_KEY = "poolguard.client_cert"  # WSGI environ: the verified peer certificate


class CertWatcher:
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
        # Called in a worker after each reload (the metric is set per worker: see
        # server.py's post_fork hook).
        self.on_reload: Callable[[CertWatcher], None] = lambda _tls: None
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


def _not_after(cert_file: str) -> float:
    """The notAfter of the first certificate in `cert_file`, as Unix time."""
    from cryptography import x509

    with open(cert_file, "rb") as pem:
        return x509.load_pem_x509_certificate(pem.read()).not_valid_after_utc.timestamp()
