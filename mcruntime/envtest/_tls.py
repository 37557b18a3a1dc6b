"""TLS for envtest: one certificate authority per process, server and client certificates.

Every server of a process presents the same serving certificate (SANs
``127.0.0.1``, ``::1`` and ``localhost``), signed by a CA generated on first
use with ``cryptography`` (ECDSA P-256: fast to generate and to handshake).
Clients authenticate by bearer token or by a client certificate from the same
CA whose common name is the user and whose organizations are the groups, as
kind and kubeadm kubeconfigs do. ``ssl`` loads certificate chains only from
files, so the serving certificate and key are written once to a private
temporary directory that is removed at exit.
"""

from __future__ import annotations

import atexit
import datetime
import ipaddress
import os
import shutil
import ssl
import tempfile
import threading
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "KeyPair", "authority", "peer_identity"]

VALIDITY = datetime.timedelta(days=365)
SERVER_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate and its PEM private key."""

    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates (thread-safe)."""

    def __init__(self, common_name: str = "mcruntime-envtest-ca") -> None:
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self._name = _name(common_name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, tuple[str, ...]], KeyPair] = {}
        self._server: KeyPair | None = None
        self._dir: str | None = None
        self._server_context: ssl.SSLContext | None = None

    def _issue(self, subject: x509.Name, *, server: bool, hosts: tuple[str, ...] = ()) -> KeyPair:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def server_pair(self) -> KeyPair:
        """The serving certificate every envtest server of this process presents."""
        with self._lock:
            if self._server is None:
                self._server = self._issue(
                    _name("mcruntime-envtest"), server=True, hosts=SERVER_HOSTS
                )
            return self._server

    def client_pair(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate for ``user`` in ``groups`` (issued once per user and groups)."""
        key = (user, tuple(groups))
        with self._lock:
            pair = self._clients.get(key)
            if pair is None:
                pair = self._clients[key] = self._issue(_name(user, key[1]), server=False)
            return pair

    def server_context(self) -> ssl.SSLContext:
        """The servers' ``SSLContext``: asks for (but does not require) a client certificate."""
        pair = self.server_pair()
        with self._lock:
            if self._server_context is None:
                self._dir = tempfile.mkdtemp(prefix="mcruntime-envtest-tls-")
                atexit.register(shutil.rmtree, self._dir, True)
                cert = os.path.join(self._dir, "server.crt")
                key = os.path.join(self._dir, "server.key")
                for path, data in ((cert, pair.cert_pem), (key, pair.key_pem)):
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    with os.fdopen(fd, "wb") as f:
                        f.write(data)
                ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                ctx.minimum_version = ssl.TLSVersion.TLSv1_2
                ctx.load_cert_chain(cert, key)
                ctx.load_verify_locations(cadata=self.cert_pem.decode())
                ctx.verify_mode = ssl.CERT_OPTIONAL
                ctx.set_alpn_protocols(["http/1.1"])
                self._server_context = ctx
            return self._server_context


_authority: CertificateAuthority | None = None
_authority_lock = threading.Lock()


def authority() -> CertificateAuthority:
    """The process's envtest CA (generated on first use)."""
    global _authority
    with _authority_lock:
        if _authority is None:
            _authority = CertificateAuthority()
        return _authority


def peer_identity(peercert: object) -> tuple[str, tuple[str, ...]] | None:
    """(user, groups) from a verified peer certificate as ``ssl`` reports it, or ``None``."""
    if not isinstance(peercert, dict):
        return None
    user = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for attr, value in rdn:
            if attr == "commonName":
                user = value
            elif attr == "organizationName":
                groups.append(value)
    return (user, tuple(groups)) if user else None
