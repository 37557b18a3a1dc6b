"""TLS contexts shared by connections with the same TLS settings, and only by those."""

from __future__ import annotations

import base64
import datetime
import http.server
import ipaddress
import os
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcruntime import Cluster
from mcruntime.errors import Unreachable
from tests._proxy import ConnectProxy

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def servers() -> Iterator[list[Any]]:
    from mcruntime.envtest import APIServer

    started = [APIServer(f"tls-{i}").start() for i in range(3)]
    yield started
    for s in started:
        s.close()


def _context(cluster: Cluster) -> ssl.SSLContext:
    cluster.rest.request("GET", "/api")
    conns = [c for c in cluster.rest._sockets._conns if getattr(c, "sock", None) is not None]
    assert conns
    contexts = {id(c.sock.context): c.sock.context for c in conns}
    assert len(contexts) == 1
    return next(iter(contexts.values()))


def _clusters(*kubeconfigs: dict[str, Any]) -> list[Cluster]:
    return [Cluster.from_kubeconfig(kc, name=f"c{i}") for i, kc in enumerate(kubeconfigs)]


def test_clusters_with_the_same_ca_and_credentials_kind_share_one_context(
    servers: list[Any],
) -> None:
    clusters = _clusters(*(s.kubeconfig() for s in servers))
    try:
        contexts = [_context(c) for c in clusters]
        assert contexts[0] is contexts[1] is contexts[2]
        assert contexts[0].verify_mode == ssl.CERT_REQUIRED and contexts[0].check_hostname
    finally:
        for c in clusters:
            c.stop()


def test_a_client_certificate_gets_its_own_context_and_still_authenticates(
    servers: list[Any],
) -> None:
    token, cert = _clusters(servers[0].kubeconfig(), servers[1].kubeconfig(auth="certificate"))
    try:
        assert _context(token) is not _context(cert)
        # the certificate is what authenticates: the admin may list namespaces
        assert cert.rest.request("GET", "/api/v1/namespaces")["items"] is not None
    finally:
        token.stop()
        cert.stop()


def test_a_wrong_ca_still_fails_verification_next_to_a_shared_context(
    servers: list[Any],
) -> None:
    from mcruntime.envtest._tls import CertificateAuthority

    good_kc = servers[0].kubeconfig()
    bad_kc = servers[1].kubeconfig()
    other = CertificateAuthority("another-ca")
    bad_kc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        other.cert_pem
    ).decode()
    good, bad = _clusters(good_kc, bad_kc)
    try:
        _context(good)
        with pytest.raises(Unreachable, match="TLS handshake failed"):
            bad.rest.request("GET", "/api")
        _context(good)  # and the shared context is unharmed
    finally:
        good.stop()
        bad.stop()


def test_a_ca_file_replaced_on_disk_is_loaded_by_later_connections(
    servers: list[Any], tmp_path: Path
) -> None:
    from mcruntime.envtest._tls import authority

    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(authority().cert_pem)
    kc = servers[2].kubeconfig()
    del kc["clusters"][0]["cluster"]["certificate-authority-data"]
    kc["clusters"][0]["cluster"]["certificate-authority"] = str(ca_file)
    (cluster,) = _clusters(kc)
    try:
        first = _context(cluster)
        assert _context(cluster) is first  # kept while the file is unchanged
        cluster.rest._pool.clear()  # the next request connects again
        replaced = tmp_path / "ca.new"
        replaced.write_bytes(authority().cert_pem)
        os.replace(replaced, ca_file)
        assert _context(cluster) is not first
    finally:
        cluster.stop()


def _go_before_1_15_certificates() -> tuple[bytes, bytes, bytes]:
    """(CA, serving certificate for 127.0.0.1, its key), PEM, as Go before 1.15 made them for
    kubeadm: the CA has no subject key identifier, so the serving certificate has no authority
    key identifier. A kubeadm CA is valid for ten years: such clusters still run."""
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


class _APIVersions(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the test looks at the open connection

    def do_GET(self) -> None:
        body = b'{"kind":"APIVersions","versions":["v1"]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def legacy_kubeadm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The kubeconfig of an HTTPS server with `_go_before_1_15_certificates()`."""
    ca, cert, key = _go_before_1_15_certificates()
    d = tmp_path_factory.mktemp("legacy-kubeadm")
    (d / "tls.crt").write_bytes(cert)
    (d / "tls.key").write_bytes(key)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(d / "tls.crt", d / "tls.key")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _APIVersions)
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
    t = threading.Thread(target=httpd.serve_forever, name="test-legacy-kubeadm", daemon=True)
    t.start()
    cluster = {
        "server": f"https://127.0.0.1:{httpd.server_port}",
        "certificate-authority-data": base64.b64encode(ca).decode(),
    }
    yield {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "legacy", "cluster": cluster}],
        "users": [{"name": "legacy", "user": {"token": "t"}}],
        "contexts": [{"name": "legacy", "context": {"cluster": "legacy", "user": "legacy"}}],
        "current-context": "legacy",
    }
    httpd.shutdown()
    httpd.server_close()
    t.join(5)


def test_a_cluster_ca_kubectl_accepts_is_accepted_on_every_python(
    legacy_kubeadm: dict[str, Any],
) -> None:
    # Python 3.13 (with urllib3 2.3+) verifies strictly by RFC 5280 and would refuse it:
    # "Missing Authority Key Identifier"; kubectl, and mcruntime on 3.11, accept it
    (cluster,) = _clusters(legacy_kubeadm)
    try:
        assert cluster.rest.request("GET", "/api")["versions"] == ["v1"]
        assert _context(cluster).verify_mode == ssl.CERT_REQUIRED  # still verified
    finally:
        cluster.stop()


def test_a_connection_with_a_context_of_its_own_verifies_as_kubectl_too(
    legacy_kubeadm: dict[str, Any],
) -> None:
    # through a proxy urllib3 builds each connection's context: that one must not be strict
    proxy = ConnectProxy()
    kc = {**legacy_kubeadm, "clusters": [dict(legacy_kubeadm["clusters"][0])]}
    kc["clusters"][0]["cluster"] = {**kc["clusters"][0]["cluster"], "proxy-url": proxy.url}
    (cluster,) = _clusters(kc)
    try:
        assert cluster.rest.request("GET", "/api")["versions"] == ["v1"]
        assert proxy.targets
    finally:
        cluster.stop()
        proxy.close()
