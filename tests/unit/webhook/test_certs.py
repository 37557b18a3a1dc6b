"""Generated webhook certificates: valid for API servers whose clocks differ from this one's."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from mcruntime._certs import CertificateAuthority
from mcruntime.webhook import generate_certificates


def verify_at(ca_pem: bytes, cert_pem: bytes, host: str, when: datetime.datetime) -> None:
    """Verify the chain as an API server whose clock reads ``when`` does (raises if not)."""
    ca = x509.load_pem_x509_certificate(ca_pem)
    leaf = x509.load_pem_x509_certificate(cert_pem)
    verifier = (
        PolicyBuilder().store(Store([ca])).time(when).build_server_verifier(x509.DNSName(host))
    )
    verifier.verify(leaf, [])


def test_generated_certificates_are_backdated_an_hour_as_client_go_does() -> None:
    # an API server whose clock is behind the operator's (a member cluster elsewhere) must
    # accept a certificate generated at the operator's start: client-go's self-signed
    # helper backdates an hour; 5 min left a cluster 6 min behind without its webhooks
    now = datetime.datetime.now(datetime.UTC)
    generated = generate_certificates(["webhook.ns.svc"], valid_days=30)
    for minutes in (0, -6, -30, -59):
        verify_at(
            generated.ca_pem,
            generated.cert_pem,
            "webhook.ns.svc",
            now + datetime.timedelta(minutes=minutes),
        )
    with pytest.raises(VerificationError):
        verify_at(
            generated.ca_pem,
            generated.cert_pem,
            "webhook.ns.svc",
            now - datetime.timedelta(minutes=62),
        )
    for pem in (generated.ca_pem, generated.cert_pem):
        cert = x509.load_pem_x509_certificate(pem)
        assert cert.not_valid_after_utc - now <= datetime.timedelta(days=30, minutes=1)


def test_written_files_are_private_even_over_existing_readable_ones(tmp_path) -> None:
    # the files' mode is set by their owner at creation only: a tls.key left readable by
    # all (an earlier tool's, a copied directory) kept its mode 0644 with the new key in it
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / name).write_text("old")
        (tmp_path / name).chmod(0o644)
    generated = generate_certificates(["webhook.ns.svc"])
    generated.write(tmp_path)
    for name in ("ca.crt", "tls.crt", "tls.key"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o600, name
    assert (tmp_path / "tls.key").read_bytes() == generated.key_pem


def test_the_private_keys_are_left_out_of_the_reprs() -> None:
    # a GeneratedCertificates logged, printed at a prompt or in a traceback's locals showed
    # its private key (so did the KeyPair of a certificate authority's pairs)
    generated = generate_certificates(["webhook.ns.svc"])
    pair = CertificateAuthority("test-ca").issue("webhook", server=True, hosts=["webhook.ns.svc"])
    for obj, key in ((generated, generated.key_pem), (pair, pair.key_pem)):
        text = repr(obj)
        assert "PRIVATE KEY" not in text
        assert all(line.decode() not in text for line in key.splitlines()[1:-1])
        assert "cert_pem=" in text  # the public parts are still shown
