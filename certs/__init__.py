"""Certificates for the poolguard webhook: `certs.pki` (library) and `python -m certs` (CLI)."""
