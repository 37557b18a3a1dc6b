"""Certificates with `cryptography`: a self-signed CA that issues serving and client certificates.

Shared by envtest (its per-process CA, serving and client certificates) and the
webhook server (a generated CA and serving certificate). Keys are ECDSA P-256:
fast to generate and to handshake. Keys and certificates never appear in logs
or errors; files holding them are written with mode 0600.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "KeyPair", "write_private"]

#: certificates are valid from an hour before "now", for the clocks of the machines that check
#: them (a member cluster's API servers) behind this one's, as client-go's self-signed
#: certificates (``cert.GenerateSelfSignedCertKeyWithFixtures``); the envtest CSR signer
#: backdates what it signs as kube-controller-manager does, by a value of its own
_BACKDATE = datetime.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A PEM certificate and its PEM private key (which its repr leaves out)."""

    cert_pem: bytes
    key_pem: bytes = field(repr=False)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, orgs: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _sans(hosts: Iterable[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


class CertificateAuthority:
    """A self-signed CA (generated on construction) that issues certificates signed by it.

    `validity` bounds the CA and every certificate it issues.
    """

    def __init__(
        self, common_name: str, *, validity: datetime.timedelta = datetime.timedelta(days=365)
    ) -> None:
        self._key = _key()
        self._validity = validity
        self._name = _name(common_name)
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(self._name)
            .issuer_name(self._name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(ca=True), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )
        self._not_after = now + validity
        #: the CA's certificate, PEM
        self.cert_pem: bytes = cert.public_bytes(serialization.Encoding.PEM)

    def issue(
        self,
        common_name: str,
        *,
        organizations: Iterable[str] = (),
        server: bool,
        hosts: Iterable[str] = (),
    ) -> KeyPair:
        """A new key and a certificate for it: serving (`server=True`, for `hosts`, DNS
        names or IP addresses) or client (the common name is the user, the
        organizations its groups, as Kubernetes reads client certificates)."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self._name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE)
            .not_valid_after(now + self._validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_key_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        hosts = tuple(hosts)
        if hosts:
            builder = builder.add_extension(_sans(hosts), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    def sign_request(
        self,
        request: x509.CertificateSigningRequest,
        *,
        key_usage: Iterable[str],
        client_auth: bool,
        not_before: datetime.timedelta,
        duration: datetime.timedelta,
        server_auth: bool = False,
    ) -> bytes:
        """The PEM certificate of ``request`` (a PKCS#10 request, its signature checked by the
        caller): its subject and subject alternative names, ``key_usage`` ("digital
        signature", "key encipherment"), client authentication when ``client_auth``, server
        authentication when ``server_auth``; valid from ``not_before`` ago for ``duration``,
        within the CA's own validity."""
        now = datetime.datetime.now(datetime.UTC)
        usage = set(key_usage)
        builder = (
            x509.CertificateBuilder()
            .subject_name(request.subject)
            .issuer_name(self._name)
            .public_key(request.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - not_before)
            .not_valid_after(min(now + duration, self._not_after))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                critical=False,
            )
        )
        if usage:  # none asked: no extension, as Go's x509 writes none for no key usage
            builder = builder.add_extension(
                x509.KeyUsage(
                    digital_signature="digital signature" in usage,
                    content_commitment=False,
                    key_encipherment="key encipherment" in usage,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
        extended = [
            oid
            for oid, wanted in (
                (ExtendedKeyUsageOID.SERVER_AUTH, server_auth),
                (ExtendedKeyUsageOID.CLIENT_AUTH, client_auth),
            )
            if wanted
        ]
        if extended:
            builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
        try:
            sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName)
            builder = builder.add_extension(sans.value, critical=False)
        except x509.ExtensionNotFound:
            pass
        return builder.sign(self._key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path`, readable by its owner only (mode 0600).

    A file that exists is made 0600 before anything is written to it: ``os.open``'s mode
    applies only to a file it creates, and one left readable by all would have held a key.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(fd, 0o600)
        f.write(data)
