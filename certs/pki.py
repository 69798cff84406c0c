"""Certificates for the poolguard webhook Service: a private CA and a serving certificate.

Everything here works on PEM bytes and has no file I/O, so the CLI (`certs.cli`), the tests
and the server can share it. Keys are ECDSA P-256 by default (`key_type="ecdsa"`), or RSA
2048 (`key_type="rsa"`); signatures use SHA-256.

The API server calls a webhook Service as `https://SERVICE.NAMESPACE.svc:443/PATH` and
checks the serving certificate against the `caBundle` of the webhook configuration, so the
serving certificate needs that name as a DNS subject alternative name (`service_dns_names`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable, Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.cli.tlsfiles import pem_hint
from webhook.errors import InputError

KEY_TYPES = ("ecdsa", "rsa")
RSA_KEY_SIZE = 2048
#: Renew once this fraction of the validity period has passed.
RENEW_AFTER_FRACTION = 2 / 3
#: Backdate `notBefore` a little so that a slightly slow clock elsewhere accepts a new cert.
CLOCK_SKEW = dt.timedelta(minutes=5)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


class PKIError(InputError):
    """Unusable input: a PEM that does not parse, a key that does not fit, a bad name."""


# --------------------------------------------------------------------------- helpers


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _aware(when: dt.datetime | None) -> dt.datetime:
    if when is None:
        return _utcnow()
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.UTC)
    return when


def new_private_key(key_type: str = "ecdsa") -> PrivateKey:
    """A fresh private key: ECDSA P-256 (`ecdsa`) or RSA 2048 (`rsa`)."""
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=RSA_KEY_SIZE)
    raise PKIError(f"key type {key_type!r} is not supported; use one of {', '.join(KEY_TYPES)}")


def key_type_of(key: PrivateKey) -> str:
    return "rsa" if isinstance(key, rsa.RSAPrivateKey) else "ecdsa"


def private_key_pem(key: PrivateKey) -> bytes:
    """PKCS#8 PEM, unencrypted (the TLS Secret and gunicorn's `--keyfile` need it plain)."""
    return key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )


def load_private_key(key_pem: bytes) -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:  # cryptography: a password is needed
        raise PKIError("not a usable private key: it is encrypted; poolguard needs an "
                       "unencrypted PEM key") from None
    except ValueError:
        raise PKIError(f"not a PEM private key{pem_hint(key_pem, 'PRIVATE KEY')}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
        raise PKIError(f"unsupported private key type {type(key).__name__}; "
                       "use ECDSA or RSA")
    return key


def load_certificate(cert_pem: bytes) -> x509.Certificate:
    """The first certificate of a PEM file."""
    try:
        return x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise PKIError(f"not a PEM certificate{pem_hint(cert_pem, 'CERTIFICATE')}") from None


def load_certificates(pem: bytes) -> list[x509.Certificate]:
    """Every certificate of a PEM bundle (at least one)."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise PKIError(f"not a PEM certificate{pem_hint(pem, 'CERTIFICATE')}") from None
    return certs


def _public_bytes(public_key: object) -> bytes:
    return public_key.public_bytes(  # type: ignore[attr-defined]
        encoding=serialization.Encoding.DER,
        format=serialization.PublicFormat.SubjectPublicKeyInfo,
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "poolguard"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _validity(days: int, not_before: dt.datetime | None) -> tuple[dt.datetime, dt.datetime]:
    if days < 1:
        raise PKIError(f"validity of {days} days: must be at least 1 day")
    start = _aware(not_before) if not_before is not None else _utcnow() - CLOCK_SKEW
    return start, start + dt.timedelta(days=days)


def _key_usage(*, ca: bool, rsa_key: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        # RSA key exchange (TLS 1.2 RSA suites) encrypts to the key; ECDSA never does.
        key_encipherment=rsa_key and not ca,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _parse_ips(ip_addresses: Iterable[str]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    parsed = []
    for text in ip_addresses:
        try:
            parsed.append(ipaddress.ip_address(text))
        except ValueError:
            raise PKIError(f"{text!r} is not an IP address") from None
    return parsed


def check_dns_names(dns_names: Sequence[str]) -> list[str]:
    """The names without duplicates; `PKIError` for one that cannot be a DNS name."""
    names: list[str] = []
    for name in dns_names:
        if not name or any(c.isspace() for c in name) or not name.isascii():
            raise PKIError(f"{name!r} is not a DNS name")
        if name not in names:
            names.append(name)
    return names


# --------------------------------------------------------------------------- public API


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The DNS names the API server may use for a Service: `SVC.NS.svc` and the full form."""
    if not service or not namespace:
        raise PKIError("service and namespace must be non-empty")
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def generate_ca(
    common_name: str = "poolguard-ca",
    days: int = 3650,
    key_type: str = "ecdsa",
    *,
    not_before: dt.datetime | None = None,
) -> tuple[bytes, bytes]:
    """A self-signed CA: basicConstraints CA:true (pathlen 0), keyCertSign and cRLSign.

    Returns `(key_pem, cert_pem)`. `not_before` (default: now minus a few minutes of clock
    skew) exists for tests that need an old certificate.
    """
    key = new_private_key(key_type)
    start, end = _validity(days, not_before)
    name = _name(common_name)
    public_key = key.public_key()
    ski = x509.SubjectKeyIdentifier.from_public_key(public_key)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True, rsa_key=key_type == "rsa"), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return private_key_pem(key), cert.public_bytes(serialization.Encoding.PEM)


def generate_serving_cert(
    ca_key_pem: bytes,
    ca_cert_pem: bytes,
    dns_names: list[str],
    ip_addresses: list[str] | None = None,
    days: int = 365,
    key_type: str = "ecdsa",
    *,
    key_pem: bytes | None = None,
    not_before: dt.datetime | None = None,
) -> tuple[bytes, bytes]:
    """A TLS server certificate signed by the CA: SANs, serverAuth EKU, CA:false.

    Returns `(key_pem, cert_pem)`. The subject common name is the first DNS name. Pass
    `key_pem` to certify an existing key (renewal without changing the key; `key_type` is
    then ignored); otherwise a new key of `key_type` is made.
    """
    names = check_dns_names(dns_names)
    ips = _parse_ips(ip_addresses or [])
    if not names and not ips:
        raise PKIError("a serving certificate needs at least one DNS name or IP address")
    ca_key = load_private_key(ca_key_pem)
    ca_cert = load_certificate(ca_cert_pem)
    if not key_matches_cert(ca_key_pem, ca_cert_pem):
        raise PKIError("the CA key does not belong to the CA certificate")
    if not _is_ca(ca_cert):
        raise PKIError("the CA certificate is not a CA (basicConstraints CA:false)")
    key = load_private_key(key_pem) if key_pem is not None else new_private_key(key_type)
    start, end = _validity(days, not_before)
    ca_end = ca_cert.not_valid_after_utc
    if end > ca_end:
        end = ca_end  # a certificate outliving its issuer fails validation anyway
    if end <= start:
        raise PKIError("the CA certificate has expired; create a new CA")
    alt_names: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt_names += [x509.IPAddress(ip) for ip in ips]
    public_key = key.public_key()
    try:
        ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    except x509.ExtensionNotFound:
        ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_cert.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0] if names else str(ips[0])))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False, rsa_key=isinstance(key, rsa.RSAPrivateKey)),
                       critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return private_key_pem(key), cert.public_bytes(serialization.Encoding.PEM)


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def key_matches_cert(key_pem: bytes, cert_pem: bytes) -> bool:
    """True when the private key is the one whose public half the certificate carries."""
    key = load_private_key(key_pem)
    cert = load_certificate(cert_pem)
    return _public_bytes(key.public_key()) == _public_bytes(cert.public_key())


def signed_by(cert_pem: bytes, ca_cert_pem: bytes) -> bool:
    """True when the CA certificate's key made the certificate's signature."""
    cert = load_certificate(cert_pem)
    ca_cert = load_certificate(ca_cert_pem)
    if cert.issuer != ca_cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def verify_chain(cert_pem: bytes, ca_cert_pem: bytes, *, now: dt.datetime | None = None,
                 dns_name: str | None = None) -> None:
    """Raise `PKIError` unless the certificate is a valid TLS server certificate from the CA.

    Checks what a TLS client (the API server) checks: the CA is a CA and in date, the
    signature, the validity period at `now`, CA:false, serverAuth, and (with `dns_name`)
    that the name is among the subject alternative names.
    """
    cert = load_certificate(cert_pem)
    ca_cert = load_certificate(ca_cert_pem)
    when = _aware(now)
    if not _is_ca(ca_cert):
        raise PKIError("the CA certificate is not a CA (basicConstraints CA:false)")
    try:
        if not ca_cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign:
            raise PKIError("the CA certificate may not sign certificates (no keyCertSign)")
    except x509.ExtensionNotFound:
        pass
    if not (ca_cert.not_valid_before_utc <= when <= ca_cert.not_valid_after_utc):
        raise PKIError("the CA certificate is not valid now "
                       f"({ca_cert.not_valid_before_utc} to {ca_cert.not_valid_after_utc})")
    if not signed_by(cert_pem, ca_cert_pem):
        raise PKIError("the certificate was not signed by this CA")
    if not (cert.not_valid_before_utc <= when <= cert.not_valid_after_utc):
        raise PKIError("the certificate is not valid now "
                       f"({cert.not_valid_before_utc} to {cert.not_valid_after_utc})")
    if _is_ca(cert):
        raise PKIError("the serving certificate is a CA certificate")
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        usages = None
    if usages is not None and ExtendedKeyUsageOID.SERVER_AUTH not in usages:
        raise PKIError("the certificate is not for TLS servers (no serverAuth usage)")
    if dns_name is not None and dns_name not in san_dns_names(cert_pem):
        raise PKIError(f"the certificate does not name {dns_name}")


def san_dns_names(cert_pem: bytes) -> list[str]:
    return _sans(cert_pem)[0]


def san_ip_addresses(cert_pem: bytes) -> list[str]:
    return _sans(cert_pem)[1]


def _sans(cert_pem: bytes) -> tuple[list[str], list[str]]:
    cert = load_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return (list(san.get_values_for_type(x509.DNSName)),
            [str(ip) for ip in san.get_values_for_type(x509.IPAddress)])


def renewal_time(cert_pem: bytes) -> dt.datetime:
    """When two thirds of the certificate's validity period have passed."""
    cert = load_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * RENEW_AFTER_FRACTION


def needs_renewal(
    cert_pem: bytes,
    ca_cert_pem: bytes,
    now: dt.datetime | None = None,
    *,
    key_pem: bytes | None = None,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
) -> tuple[bool, str]:
    """Whether the serving certificate should be replaced, and why (a short sentence).

    Renew when it does not parse, is not signed by that CA, does not match `key_pem`
    (when given), lacks one of `dns_names` / `ip_addresses` (when given), has expired or is
    not yet valid, or is past two thirds of its life (the rule cert-manager uses by default).
    """
    when = _aware(now)
    try:
        cert = load_certificate(cert_pem)
    except PKIError as err:
        return True, f"the certificate is unreadable: {err}"
    if not signed_by(cert_pem, ca_cert_pem):
        return True, "the certificate was not signed by this CA"
    if key_pem is not None:
        try:
            matches = key_matches_cert(key_pem, cert_pem)
        except PKIError as err:
            return True, f"the private key is unreadable: {err}"
        if not matches:
            return True, "the private key does not match the certificate"
    have_dns, have_ips = _sans(cert_pem)
    missing = [n for n in dns_names if n not in have_dns]
    missing += [ip for ip in ip_addresses if str(_parse_ips([ip])[0]) not in have_ips]
    if missing:
        return True, f"the certificate does not name {', '.join(missing)}"
    end = cert.not_valid_after_utc
    if when >= end:
        return True, f"the certificate expired at {end.isoformat()}"
    if when < cert.not_valid_before_utc:
        return True, (f"the certificate is not valid before "
                      f"{cert.not_valid_before_utc.isoformat()}")
    due = renewal_time(cert_pem)
    if when >= due:
        return True, (f"the certificate is past two thirds of its life "
                      f"(renewal was due {due.isoformat()}, expires {end.isoformat()})")
    return False, (f"the certificate is valid until {end.isoformat()}; "
                   f"renewal is due {due.isoformat()}")


def ca_problem(ca_key_pem: bytes, ca_cert_pem: bytes, now: dt.datetime | None = None
               ) -> str | None:
    """None when the pair is a usable CA at `now`; otherwise why not."""
    try:
        cert = load_certificate(ca_cert_pem)
        if not key_matches_cert(ca_key_pem, ca_cert_pem):
            return "the CA key does not match the CA certificate"
    except PKIError as err:
        return str(err)
    if not _is_ca(cert):
        return "the CA certificate is not a CA (basicConstraints CA:false)"
    when = _aware(now)
    if when >= cert.not_valid_after_utc:
        return f"the CA certificate expired at {cert.not_valid_after_utc.isoformat()}"
    if when < cert.not_valid_before_utc:
        return "the CA certificate is not valid yet"
    return None

