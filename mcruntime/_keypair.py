"""A kubeconfig's CA, client certificate and key checked when it is loaded, as client-go checks them.

client-go reads them when it builds a client (``tls.X509KeyPair``, the CA pool): kubectl
refuses a key it cannot use before it connects (``tls: failed to parse private key``).
`ssl` reads them only at the first handshake, and said no more than "TLS handshake
failed" for an encrypted key (or, with a terminal, could ask for its passphrase there), an
RSA-PSS key, a key of another certificate or a file that is not there; a provider engaged
such a cluster and retried it as if its server were down. Here each is a
[`ConfigError`][mcruntime.errors.ConfigError] naming the user or cluster and the field,
never the content.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import re
from pathlib import Path
from typing import Any, NamedTuple

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

__all__ = ["ClientCertificate", "KeyProblem", "check_ca", "check_client_pair", "dates_now"]

_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)
#: the PKCS #8 algorithm of an RSA-PSS key (id-RSASSA-PSS), which Go's x509 does not read
_RSA_PSS = bytes.fromhex("06092a864886f70d01010a")
#: the curves of an ECDSA key Go's x509 reads
_CURVES = ("secp224r1", "secp256r1", "secp384r1", "secp521r1")
_USABLE = "client-go reads RSA, ECDSA (P-256, P-384, P-521) and Ed25519 keys"


class KeyProblem(Exception):
    """What is wrong with a field (the message starts with the field's name), for the caller
    to say where."""


_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")


def _go_base64(data: str, what: str) -> bytes:
    """``data`` decoded as client-go decodes a kubeconfig's ``[]byte`` field (encoding/json,
    Go's ``base64.StdEncoding``): line breaks skipped, any other character outside base64's
    alphabet (a space) or a wrong padding refused, where Python's decoder drops them. The
    message names the byte, never the data."""
    for i, ch in enumerate(data):
        if ch not in _BASE64 and ch not in "\r\n":
            raise KeyProblem(
                f"{what} is not base64: the character at byte {i} is not one of base64's "
                f"(kubectl: illegal base64 data at input byte {i})"
            )
    try:
        return base64.b64decode(data.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        raise KeyProblem(f"{what} is not base64 (its padding is wrong)") from None


def _content(fields: dict[str, Any], field: str, base: str) -> tuple[bytes, str] | None:
    """The bytes of ``field``-data (base64) or else of the file ``field`` names (relative to
    ``base``), and how to name where they came from; None when neither is set."""
    data = fields.get(f"{field}-data")
    if data:
        if not isinstance(data, str):
            raise KeyProblem(f"{field}-data is not a base64 string")
        return _go_base64(data, f"{field}-data"), f"{field}-data"
    path = fields.get(field)
    if not path:
        return None
    if not isinstance(path, str):
        raise KeyProblem(f"{field} is not a path")
    full = Path(base, path) if base else Path(path)
    try:
        return Path(os.path.expanduser(full)).read_bytes(), f"{field} {path}"
    except OSError as exc:
        raise KeyProblem(
            f"{field} {path} cannot be read: {exc.strerror or type(exc).__name__}"
        ) from None


def _blocks(pem: bytes) -> list[tuple[str, bytes]]:
    return [(m.group(1).decode(), m.group(0)) for m in _BLOCK.finditer(pem)]


def check_ca(fields: dict[str, Any], base: str) -> None:
    """A cluster's ``certificate-authority(-data)`` (if any) holds a PEM certificate."""
    found = _content(fields, "certificate-authority", base)
    if found is None:
        return
    pem, what = found
    for kind, block in _blocks(pem):
        if kind == "CERTIFICATE":
            try:
                x509.load_pem_x509_certificate(block)
            except ValueError:
                continue
            return
    raise KeyProblem(f"{what} holds no PEM certificate")


class ClientCertificate(NamedTuple):
    """A kubeconfig's client certificate as loaded: its dates (UTC), and the file it was read
    from (None for ``client-certificate-data``), which may be renewed on disk since."""

    not_before: datetime.datetime
    not_after: datetime.datetime
    path: str | None


def dates_now(found: ClientCertificate) -> tuple[datetime.datetime, datetime.datetime]:
    """The dates of ``found``'s certificate as its file holds it now (as loaded without a file,
    or when the file cannot be read)."""
    if found.path is not None:
        try:
            pem = Path(found.path).read_bytes()
        except OSError:
            pem = b""
        for kind, block in _blocks(pem):
            if kind == "CERTIFICATE":
                try:
                    cert = x509.load_pem_x509_certificate(block)
                except ValueError:
                    break
                return cert.not_valid_before_utc, cert.not_valid_after_utc
    return found.not_before, found.not_after


def check_client_pair(fields: dict[str, Any], base: str) -> ClientCertificate | None:
    """A user's client certificate and key (if any) are a PEM certificate and a key of it that
    client-go can use: not encrypted, RSA (not RSA-PSS), ECDSA or Ed25519. Returns the
    certificate's dates and file, None without a certificate."""
    found = _content(fields, "client-certificate", base)
    key_found = _content(fields, "client-key", base)
    if found is None or key_found is None:
        return None  # no client certificate (a lone one is refused before this)
    (cert_pem, cert_what), (key_pem, key_what) = found, key_found
    cert = check_pair(cert_pem, cert_what, key_pem, key_what, "its client-certificate")
    path = None
    if not fields.get("client-certificate-data"):
        named = str(fields["client-certificate"])
        path = os.path.expanduser(Path(base, named) if base else Path(named))
    return ClientCertificate(cert.not_valid_before_utc, cert.not_valid_after_utc, path)


def check_pair(
    cert_pem: bytes, cert_what: str, key_pem: bytes, key_what: str, mate: str
) -> x509.Certificate:
    """``cert_pem`` holds a PEM certificate and ``key_pem`` a key of it that client-go can use
    (see `check_client_pair`); the certificate. A `KeyProblem` names ``cert_what`` or
    ``key_what`` (a key that is not of the certificate: ``key_what does not match mate``),
    never the PEM."""
    cert = None
    for kind, block in _blocks(cert_pem):
        if kind == "CERTIFICATE":
            try:
                cert = x509.load_pem_x509_certificate(block)
            except ValueError:
                raise KeyProblem(f"{cert_what} holds a PEM block that is no certificate") from None
            break
    if cert is None:
        raise KeyProblem(f"{cert_what} holds no PEM certificate")
    key = _private_key(key_pem, key_what)
    if key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) != cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ):
        raise KeyProblem(f"{key_what} does not match {mate}")
    return cert


def _private_key(pem: bytes, what: str) -> Any:
    kinds = [(kind, block) for kind, block in _blocks(pem) if kind.endswith("PRIVATE KEY")]
    if not kinds:
        rather = any(kind == "CERTIFICATE" for kind, _ in _blocks(pem))
        raise KeyProblem(
            f"{what} holds {'a certificate rather than a key' if rather else 'no PEM private key'}"
        )
    kind, block = kinds[0]
    if kind == "ENCRYPTED PRIVATE KEY" or b"\nProc-Type: 4,ENCRYPTED" in block:
        raise KeyProblem(
            f"{what} is encrypted with a passphrase, which kubectl cannot use either: store "
            "it decrypted (openssl pkey -in key.pem -out decrypted.pem)"
        )
    body = _BLOCK.match(block)
    der = b""
    if body is not None:
        try:
            der = base64.b64decode(b"".join(body.group(2).split()))
        except (binascii.Error, ValueError):
            der = b""
    if kind == "PRIVATE KEY" and _RSA_PSS in der[:32]:
        raise KeyProblem(f"{what} is an RSA-PSS key, which kubectl cannot use either ({_USABLE})")
    try:
        # no RSA key validation (~35 ms a key): the handshake signs with it; client-go does
        # no more than match it against the certificate either
        key = serialization.load_pem_private_key(
            block, password=None, unsafe_skip_rsa_key_validation=True
        )
    except TypeError:  # encrypted in a way the PEM headers did not say
        raise KeyProblem(
            f"{what} is encrypted with a passphrase, which kubectl cannot use either"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise KeyProblem(f"{what} holds a private key that cannot be read ({_USABLE})") from None
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name not in _CURVES:
        raise KeyProblem(
            f"{what} is an ECDSA key on the curve {key.curve.name}, which kubectl cannot use "
            f"either ({_USABLE})"
        )
    if not isinstance(
        key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
    ):
        raise KeyProblem(
            f"{what} is a {type(key).__name__.removesuffix('PrivateKey')} key, which kubectl "
            f"cannot use either ({_USABLE})"
        )
    return key
