"""Client certificates and keys of the envtest CA, in the forms kubeconfigs carry them."""

from __future__ import annotations

import base64
import datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.x509.oid import NameOID

from mcruntime._certs import CertificateAuthority
from mcruntime.envtest import _tls

__all__ = ["PASSPHRASE", "client_certificate", "pem", "rsa_pss"]

#: the passphrase of the tests' encrypted keys (never to appear in a message)
PASSPHRASE = b"pass-phrase-not-logged"


def client_certificate(
    key: Any,
    not_before: datetime.timedelta = datetime.timedelta(minutes=5),
    duration: datetime.timedelta = datetime.timedelta(hours=1),
    ca: CertificateAuthority | None = None,
    user: str = "kubernetes-admin",
) -> bytes:
    """A client certificate of ``ca`` (default: the envtest CA) for ``key``: an administrator
    named ``user``, valid from ``not_before`` ago until ``duration`` from now (negative: in
    the future, in the past)."""
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, user),
        ]
    )
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    request = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, algorithm)
    return (ca or _tls.authority()).sign_request(
        request,
        key_usage=["digital signature"],
        client_auth=True,
        not_before=not_before,
        duration=duration,
    )


def pem(key: Any, form: str = "pkcs8", passphrase: bytes | None = None) -> bytes:
    return key.private_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.PEM,
        {
            "pkcs8": serialization.PrivateFormat.PKCS8,
            "traditional": serialization.PrivateFormat.TraditionalOpenSSL,
        }[form],
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption(),
    )


def rsa_pss(key: rsa.RSAPrivateKey) -> bytes:
    """``key`` as a PKCS #8 RSA-PSS key (algorithm id-RSASSA-PSS, no parameters), as
    ``openssl genpkey -algorithm RSA-PSS`` writes one."""
    der = key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    rsa_encryption = bytes.fromhex("300d06092a864886f70d0101010500")
    assert der[1] == 0x82 and rsa_encryption in der[:32]
    length = int.from_bytes(der[2:4], "big") - 2
    der = (
        der[:2]
        + length.to_bytes(2, "big")
        + der[4:].replace(rsa_encryption, bytes.fromhex("300b06092a864886f70d01010a"), 1)
    )
    body = base64.encodebytes(der)
    return b"-----BEGIN PRIVATE KEY-----\n" + body + b"-----END PRIVATE KEY-----\n"
