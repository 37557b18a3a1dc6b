"""TLS by default: the CA in the kubeconfig, client certificates, plain HTTP on request, keep-alive."""

from __future__ import annotations

import asyncio
import base64
import datetime
import http.client
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client, config

from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet, _tls, wait_for
from mcruntime.envtest._tls import CertificateAuthority
from mcruntime.envtest._webhook_call import WebhookCallError, call_webhook
from tests._client_keys import client_certificate, pem
from tests._httpserver import Handler
from tests._legacy_tls import serving_tls

pytestmark = pytest.mark.timeout(30)


def test_kubeconfig_carries_the_ca_and_the_server_certificate_covers_loopback(
    server: APIServer,
) -> None:
    cluster = server.kubeconfig()["clusters"][0]["cluster"]
    assert cluster["server"] == f"https://127.0.0.1:{server.port}"
    assert base64.b64decode(cluster["certificate-authority-data"]) == server.ca_data
    conn = http.client.HTTPSConnection(
        "127.0.0.1", server.port, timeout=5, context=server.client_ssl_context()
    )
    conn.request("GET", "/healthz")
    assert conn.getresponse().read() == b"ok"
    der = conn.sock.getpeercert(binary_form=True)
    sans = x509.load_der_x509_certificate(der).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert {str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)} == {
        "127.0.0.1",
        "::1",
    }
    assert sans.value.get_values_for_type(x509.DNSName) == ["localhost"]


def test_a_client_that_does_not_trust_the_ca_fails_the_handshake(server: APIServer) -> None:
    conn = http.client.HTTPSConnection(
        "127.0.0.1", server.port, timeout=5, context=ssl.create_default_context()
    )
    with pytest.raises(ssl.SSLCertVerificationError):
        conn.request("GET", "/healthz")


def test_client_certificate_names_user_and_groups_like_kubeadm(server: APIServer) -> None:
    user = server.kubeconfig(auth="certificate")["users"][0]["user"]
    assert "token" not in user
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["client-certificate-data"]))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubernetes-admin"
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_client_certificate_of_system_masters_may_write(server: APIServer) -> None:
    with config.new_client_from_config_dict(server.kubeconfig(auth="certificate")) as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_config_map("default", {"metadata": {"name": "by-cert"}})
        assert core.read_namespaced_config_map("by-cert", "default").metadata.name == "by-cert"


def test_read_only_client_certificate_reads_and_gets_403_naming_its_user(
    server: APIServer,
) -> None:
    cfg = server.kubeconfig(auth="certificate", read_only=True)
    with config.new_client_from_config_dict(cfg) as api:
        core = client.CoreV1Api(api)
        assert "default" in {n.metadata.name for n in core.list_namespace().items}
        with pytest.raises(client.ApiException) as e:
            core.create_namespaced_config_map("default", {"metadata": {"name": "nope"}})
    assert e.value.status == 403
    assert (
        'User "system:serviceaccount:envtest:read-only" cannot create'
        in orjson.loads(e.value.body)["message"]
    )


def test_no_credentials_over_tls_is_401(server: APIServer) -> None:
    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    conn.request("GET", "/api/v1/namespaces")
    resp = conn.getresponse()
    assert resp.status == 401 and orjson.loads(resp.read())["reason"] == "Unauthorized"


def test_a_wrong_token_is_401_even_with_a_valid_client_certificate(server: APIServer) -> None:
    cfg = server.kubeconfig(auth="certificate")
    cfg["users"][0]["user"]["token"] = "wrong"
    with config.new_client_from_config_dict(cfg) as api, pytest.raises(client.ApiException) as e:
        client.CoreV1Api(api).list_namespace()
    assert e.value.status == 401


def test_a_certificate_from_another_ca_is_refused(server: APIServer, tmp_path) -> None:
    pair = CertificateAuthority("someone-else").client_pair("mallory", ("system:masters",))
    (tmp_path / "c.crt").write_bytes(pair.cert_pem)
    (tmp_path / "c.key").write_bytes(pair.key_pem)
    ctx = server.client_ssl_context()
    ctx.load_cert_chain(tmp_path / "c.crt", tmp_path / "c.key")
    conn = http.client.HTTPSConnection(server.host, server.port, timeout=5, context=ctx)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        conn.request("GET", "/api/v1/namespaces")
        conn.getresponse().read()


@pytest.mark.parametrize(("not_before", "until"), [(2, -1), (-1, 2)], ids=["expired", "future"])
def test_a_client_certificate_out_of_its_dates_is_401_not_a_failed_handshake(
    server: APIServer, tmp_path, not_before: int, until: int
) -> None:
    # kube-apiserver checks the dates in its x509 authenticator, after the handshake:
    # kubectl says "Unauthorized" for an expired certificate, not "EOF"
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes-admin"),
        ]
    )
    request = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    cert = _tls.authority().sign_request(
        request,
        key_usage=["digital signature"],
        client_auth=True,
        not_before=datetime.timedelta(hours=not_before),
        duration=datetime.timedelta(hours=until),
    )
    (tmp_path / "c.pem").write_bytes(
        cert
        + key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    ctx = server.client_ssl_context()
    ctx.load_cert_chain(tmp_path / "c.pem")
    conn = http.client.HTTPSConnection(server.host, server.port, timeout=5, context=ctx)
    conn.request("GET", "/api/v1/namespaces")
    resp = conn.getresponse()
    assert resp.status == 401 and orjson.loads(resp.read())["reason"] == "Unauthorized"


def test_a_connection_kept_alive_past_its_client_certificate_end_gets_401(
    server: APIServer, tmp_path
) -> None:
    # kube-apiserver's x509 authenticator verifies the peer's chain at every request (at the
    # time of the request), not once per connection
    key = ec.generate_private_key(ec.SECP256R1())
    lasts = datetime.timedelta(seconds=2)
    expires = datetime.datetime.now(datetime.UTC) + lasts
    (tmp_path / "c.pem").write_bytes(
        client_certificate(key, datetime.timedelta(minutes=5), lasts) + pem(key)
    )
    ctx = server.client_ssl_context()
    ctx.load_cert_chain(tmp_path / "c.pem")
    conn = http.client.HTTPSConnection(server.host, server.port, timeout=5, context=ctx)
    conn.request("GET", "/api/v1/namespaces")
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    resp.read()
    sock = conn.sock
    wait_for(lambda: datetime.datetime.now(datetime.UTC) > expires, timeout=10)
    conn.request("GET", "/api/v1/namespaces")
    resp = conn.getresponse()
    assert conn.sock is sock, "the connection was not kept alive"
    assert resp.status == 401 and orjson.loads(resp.read())["reason"] == "Unauthorized"
    conn.close()


def test_plain_http_is_an_explicit_option() -> None:
    with APIServer("plain", tls=False) as srv:
        assert srv.url.startswith("http://") and srv.ca_data is None
        cluster = srv.kubeconfig()["clusters"][0]["cluster"]
        assert "certificate-authority-data" not in cluster
        with config.new_client_from_config_dict(srv.kubeconfig()) as api:
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
        with pytest.raises(ValueError, match="client certificates need TLS"):
            srv.kubeconfig(auth="certificate")


def test_fleet_kubeconfig_uses_either_credential() -> None:
    with Fleet(2) as fleet:
        for auth in ("token", "certificate"):
            cfg = fleet.kubeconfig(auth=auth)
            for ctx in fleet.names:
                cluster = Cluster.from_kubeconfig(cfg, context=ctx, name=ctx)
                names = {n["metadata"]["name"] for n in cluster.api_reader.list("v1/Namespace")}
                assert "kube-system" in names


def test_requests_reuse_one_tls_connection(server: APIServer) -> None:
    with config.new_client_from_config_dict(server.kubeconfig(auth="certificate")) as api:
        core = client.CoreV1Api(api)
        for i in range(20):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"k{i}"}})
        assert len(core.list_namespaced_config_map("default").items) >= 20
        assert len(server._conns) == 1


_KILLED_SCRIPT = """
import os, signal
from mcruntime.envtest import APIServer
srv = APIServer("killed").start()
assert srv.tls
print(os.getpid(), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no atexit, no finally: how a killed process ends
"""


def test_a_killed_process_leaves_no_serving_key_on_disk(tmp_path) -> None:
    """The serving key is on disk only while ``ssl`` reads it, so a process that is killed
    (SIGKILL, or SIGTERM with no handler) while its servers run leaves none behind."""
    out = subprocess.run(
        [sys.executable, "-c", _KILLED_SCRIPT],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert out.returncode == -9, out.stderr
    assert out.stdout.strip().isdigit(), "the server started before the kill"
    left = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")]
    assert left == [], f"left in the temporary directory: {left}"


class _Allow(Handler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.answer(200, b'{"kind":"AdmissionReview","response":{"uid":"u","allowed":true}}')


def test_a_webhook_certificate_kube_apiserver_accepts_is_accepted_on_every_python() -> None:
    # signed by a CA without a subject key identifier (Go before 1.15): Go accepts it, Python
    # 3.13's default context ("Missing Authority Key Identifier") would not
    with serving_tls(_Allow) as (url, ca):
        config = {"url": f"{url}/validate", "caBundle": base64.b64encode(ca).decode()}
        out = asyncio.run(call_webhook(config, {"kind": "AdmissionReview"}, 10, "legacy"))
    assert out["response"]["allowed"] is True


class _Dripping(Handler):
    """Answers a byte at a time, each well within a read's timeout (an overloaded webhook)."""

    stop = threading.Event()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 200\r\n\r\n")
            self.wfile.flush()
            while not self.stop.wait(0.1):  # 20 s for the whole body
                self.wfile.write(b" ")
                self.wfile.flush()
        except OSError:
            return  # the caller gave up


def test_a_webhook_that_answers_too_slowly_is_cut_at_its_timeout_with_its_thread() -> None:
    """kube-apiserver's call ends at the webhook's timeoutSeconds; envtest's did, but its
    thread went on reading the trickle (each byte within the socket's timeout) for as long
    as the webhook sent it, long after the call failed and after the server stopped."""
    handler = type("Handler", (_Dripping,), {"stop": threading.Event()})
    try:
        with serving_tls(handler) as (url, ca):
            config = {"url": f"{url}/validate", "caBundle": base64.b64encode(ca).decode()}
            began = time.monotonic()
            with pytest.raises(
                WebhookCallError, match=r"context deadline exceeded \(timeout 0.5s\)"
            ):
                asyncio.run(call_webhook(config, {"kind": "AdmissionReview"}, 0.5, "dripping"))
            assert time.monotonic() - began < 1.5
            wait_for(
                lambda: not [t for t in threading.enumerate() if t.name == _THREAD],
                timeout=2,
                what="the webhook call's thread to end",
            )
    finally:
        handler.stop.set()


_THREAD = "mcruntime/envtest/dripping/webhook"


def test_a_close_notify_right_after_the_handshake_logs_nothing(
    server: APIServer, caplog: pytest.LogCaptureFixture
) -> None:
    # a client's last handshake message and its close_notify in one segment (a Go client
    # dropping a connection it dialed): asyncio logged "returning true from eof_received()
    # has no effect when using ssl" for each
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = server.client_ssl_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with sock, caplog.at_level("WARNING", logger="asyncio"):
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                incoming.write(sock.recv(65536))
        with pytest.raises(ssl.SSLWantReadError):
            tls.unwrap()
        sock.sendall(outgoing.read())  # the client's Finished and its close_notify at once
        sock.settimeout(5)
        while sock.recv(65536):  # until the server closes the connection
            pass
        # a request after it is served: the log of the closed connection came before
        conn = http.client.HTTPSConnection(
            "127.0.0.1", server.port, timeout=5, context=server.client_ssl_context()
        )
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b"ok"
        conn.close()
    assert not [r for r in caplog.records if "eof_received" in r.getMessage()]
