"""An HTTPS server with the certificates of an old kubeadm cluster, which kubectl accepts.

Go before 1.15 made CAs without a subject key identifier, so the certificates they signed
have no authority key identifier. A kubeadm CA is valid for ten years: such clusters still
run. OpenSSL's strict RFC 5280 checks (``VERIFY_X509_STRICT``, which Python 3.13's
``ssl.create_default_context()`` and urllib3 2.3+ turn on) refuse them; Go does not.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import ipaddress
import ssl
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["go_before_1_15_certificates", "serving_tls"]


def go_before_1_15_certificates() -> tuple[bytes, bytes, bytes]:
    """(CA, serving certificate for 127.0.0.1, its key), PEM, as Go before 1.15 made them for
    kubeadm: the CA has no subject key identifier, the serving certificate no authority key
    identifier."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])

    def usage(cert_sign: bool) -> x509.KeyUsage:
        return x509.KeyUsage(True, False, True, False, False, cert_sign, False, False, False)

    def cert(subject: x509.Name, public_key: Any, ca: bool) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(usage(cert_sign=ca), critical=True)
        )

    ca = cert(ca_name, ca_key.public_key(), True).sign(ca_key, hashes.SHA256())
    serving = (
        cert(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
            key.public_key(),
            False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem), serving.public_bytes(pem), key_pem


@contextlib.contextmanager
def serving_tls(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[tuple[str, bytes]]:
    """Serve ``handler`` over HTTPS on a loopback port with `go_before_1_15_certificates()`;
    yield its URL (``https://127.0.0.1:PORT``) and its CA (PEM)."""
    ca, cert, key = go_before_1_15_certificates()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory(prefix="mcruntime-test-legacy-tls-") as d:
        (Path(d) / "tls.crt").write_bytes(cert)
        (Path(d) / "tls.key").write_bytes(key)
        ctx.load_cert_chain(Path(d) / "tls.crt", Path(d) / "tls.key")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    t = threading.Thread(target=httpd.serve_forever, name="test-legacy-tls", daemon=True)
    t.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_port}", ca
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join(5)
