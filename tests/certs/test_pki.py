"""The certificate library (certs.pki): CA, serving certificates, checks."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from certs import pki
from tests.support.install import (
    NAMESPACE,
    SERVICE,
    SERVICE_NAMES,
)

# =========================================================================== certs: library


def test_generate_ca_is_a_signing_ca() -> None:
    key_pem, cert_pem = pki.generate_ca()
    cert = x509.load_pem_x509_certificate(cert_pem)
    constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca
    assert cert.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    assert cert.public_key().curve.name == "secp256r1"
    assert cert.subject == cert.issuer
    assert pki.key_matches_cert(key_pem, cert_pem)
    life = cert.not_valid_after_utc - cert.not_valid_before_utc
    assert dt.timedelta(days=3650) <= life <= dt.timedelta(days=3650, minutes=10)


def test_serving_cert_fields_and_independent_verification() -> None:
    ca = pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(
        *ca, [*pki.service_dns_names(SERVICE, NAMESPACE), "localhost"], ["127.0.0.1", "::1"])
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert pki.san_dns_names(cert_pem) == [*SERVICE_NAMES, "localhost"]
    assert pki.san_ip_addresses(cert_pem) == ["127.0.0.1", "::1"]
    assert pki.key_matches_cert(key_pem, cert_pem)
    pki.verify_chain(cert_pem, ca[1], dns_name=SERVICE_NAMES[0])
    # cryptography's own path builder (webpki rules), not our code, accepts the chain.
    store = Store([x509.load_pem_x509_certificate(ca[1])])
    for name in SERVICE_NAMES:
        verifier = PolicyBuilder().store(store).build_server_verifier(x509.DNSName(name))
        verifier.verify(cert, [])
    wrong = PolicyBuilder().store(store).build_server_verifier(x509.DNSName("other.svc"))
    with pytest.raises(VerificationError):
        wrong.verify(cert, [])


def test_rsa_option_makes_2048_bit_keys() -> None:
    ca = pki.generate_ca(key_type="rsa")
    _, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"], key_type="rsa")
    for pem in (ca[1], cert_pem):
        public = x509.load_pem_x509_certificate(pem).public_key()
        assert isinstance(public, rsa.RSAPublicKey) and public.key_size == 2048
    pki.verify_chain(cert_pem, ca[1])
    with pytest.raises(pki.PKIError, match="not supported"):
        pki.generate_ca(key_type="dsa")


def test_service_dns_names() -> None:
    assert pki.service_dns_names("poolguard-webhook", "poolguard") == SERVICE_NAMES


def test_verify_chain_and_key_matches_cert_reject_foreign_material() -> None:
    ca, other_ca = pki.generate_ca(), pki.generate_ca()
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"])
    other_key, _ = pki.generate_serving_cert(*ca, ["a.svc"])
    assert not pki.key_matches_cert(other_key, cert_pem)
    with pytest.raises(pki.PKIError, match="not signed by this CA"):
        pki.verify_chain(cert_pem, other_ca[1])
    with pytest.raises(pki.PKIError, match="does not name"):
        pki.verify_chain(cert_pem, ca[1], dns_name="b.svc")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    with pytest.raises(pki.PKIError, match="not valid now"):
        pki.verify_chain(cert_pem, ca[1], now=later)
    with pytest.raises(pki.PKIError, match="not a CA"):
        pki.generate_serving_cert(key_pem, cert_pem, ["b.svc"])
    with pytest.raises(pki.PKIError, match="does not belong"):
        pki.generate_serving_cert(other_ca[0], ca[1], ["b.svc"])


def test_needs_renewal_at_two_thirds_of_life() -> None:
    ca = pki.generate_ca()
    start = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    ca = pki.generate_ca(not_before=start - dt.timedelta(days=1))
    key_pem, cert_pem = pki.generate_serving_cert(*ca, ["a.svc"], days=90, not_before=start)
    due = start + dt.timedelta(days=60)
    assert pki.needs_renewal(cert_pem, ca[1], now=due - dt.timedelta(seconds=1))[0] is False
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=due + dt.timedelta(seconds=1))
    assert renew and "two thirds" in reason
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=start + dt.timedelta(days=91))
    assert renew and "expired" in reason
    fresh = start + dt.timedelta(days=1)
    assert pki.needs_renewal(cert_pem, ca[1], now=fresh, key_pem=key_pem)[0] is False
    assert pki.needs_renewal(cert_pem, pki.generate_ca()[1], now=fresh) == (
        True, "the certificate was not signed by this CA")
    other_key = pki.generate_serving_cert(*ca, ["a.svc"])[0]
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=fresh, key_pem=other_key)
    assert renew and "does not match" in reason
    renew, reason = pki.needs_renewal(cert_pem, ca[1], now=fresh, dns_names=["b.svc"])
    assert renew and "b.svc" in reason
