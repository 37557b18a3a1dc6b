"""A TLS failure says what to check, as kubectl's x509 errors do: which certificate, and why.

Before, every one of them read "TLS handshake failed", whatever had failed. The servers
are envtest (a wrong CA, a name the certificate does not hold) and a small TLS server of
the test's own for what envtest cannot serve (an expired certificate, a client
certificate required).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcruntime import Cluster
from mcruntime._certs import CertificateAuthority
from mcruntime.client import _rest as rest
from mcruntime.envtest import APIServer
from mcruntime.errors import DeadlineExceeded, Unreachable
from tests._silent import silent_server

pytestmark = pytest.mark.timeout(60)


def failure(kubeconfig: dict[str, Any]) -> str:
    cluster = Cluster.from_kubeconfig(kubeconfig, name="c")
    try:
        with pytest.raises(Unreachable) as err:
            cluster.rest.request("GET", "/api", timeout=5)
        return str(err.value)
    finally:
        cluster.stop()


def with_cluster(kubeconfig: dict[str, Any], **fields: Any) -> dict[str, Any]:
    doc = copy.deepcopy(kubeconfig)
    doc["clusters"][0]["cluster"].update(fields)
    return doc


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[Any]:
    """``tls_server(context)``: a port where ``context`` does TLS handshakes, and no more."""
    listeners: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def serve(context: ssl.SSLContext) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def accept() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return  # closed at teardown
                tls = context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                try:
                    tls.settimeout(5)
                    tls.do_handshake()
                    tls.recv(1)
                except (OSError, ssl.SSLError):
                    # read what the client sent after its side of the handshake (TLS 1.3
                    # sends its request before the server's alert arrives), so closing
                    # sends a FIN: a reset could overtake the alert on its way
                    tls.settimeout(0.5)
                    with contextlib.suppress(OSError):
                        while socket.socket.recv(tls, 4096):
                            pass
                finally:
                    tls.close()

        t = threading.Thread(target=accept, name="test/tls-server", daemon=True)
        t.start()
        threads.append(t)
        return int(listener.getsockname()[1])

    yield serve
    for listener in listeners:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        listener.close()
    for t in threads:
        t.join(5)


def server_context(
    tmp_path: Path,
    ca: CertificateAuthority,
    common_name: str = "server",
    hosts: tuple[str, ...] = ("127.0.0.1",),
) -> ssl.SSLContext:
    pair = ca.issue(common_name, server=True, hosts=hosts)
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    return ctx


def kubeconfig_for(port: int, ca: CertificateAuthority) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}",
                    "certificate-authority-data": base64.b64encode(ca.cert_pem).decode(),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "not-logged"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }


def test_a_ca_the_kubeconfig_does_not_trust_is_named(envtest_server: APIServer) -> None:
    other = base64.b64encode(CertificateAuthority("another-ca").cert_pem).decode()
    message = failure(
        with_cluster(envtest_server.kubeconfig(), **{"certificate-authority-data": other})
    )
    assert (
        "TLS handshake failed: the server's certificate is not signed by a CA the kubeconfig "
        "trusts: check its certificate-authority" in message
    )


def test_a_name_the_certificate_does_not_hold_is_named(envtest_server: APIServer) -> None:
    message = failure(
        with_cluster(envtest_server.kubeconfig(), **{"tls-server-name": "api.example.com"})
    )
    assert message.endswith(
        "TLS handshake failed: the server's certificate is not valid for 'api.example.com' (not "
        "one of its subject alternative names; a Common Name does not count, nor for kubectl)"
    )


def test_a_server_named_only_in_its_certificate_s_common_name_is_told_why(
    tls_server: Any, tmp_path: Path
) -> None:
    # kubectl (Go since 1.15) refuses it too: "certificate relies on legacy Common Name field"
    ca = CertificateAuthority("cn-only")
    port = tls_server(server_context(tmp_path, ca, common_name="127.0.0.1", hosts=()))
    message = failure(kubeconfig_for(port, ca))
    assert message.endswith(
        "TLS handshake failed: the server's certificate is not valid for '127.0.0.1' (not one "
        "of its subject alternative names; a Common Name does not count, nor for kubectl)"
    )


def test_an_expired_server_certificate_is_named(tls_server: Any, tmp_path: Path) -> None:
    # valid from 5 minutes ago until 4 minutes ago
    ca = CertificateAuthority("expired", validity=datetime.timedelta(minutes=-4))
    port = tls_server(server_context(tmp_path, ca))
    message = failure(kubeconfig_for(port, ca))
    assert message.endswith("TLS handshake failed: the server's certificate has expired")
    assert "not-logged" not in message


def test_a_required_client_certificate_is_named(tls_server: Any, tmp_path: Path) -> None:
    ca = CertificateAuthority("mtls")
    ctx = server_context(tmp_path, ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=ca.cert_pem.decode())
    port = tls_server(ctx)
    message = failure(kubeconfig_for(port, ca))  # a token, no client certificate
    assert message.endswith("TLS handshake failed: the server requires a client certificate")


def test_a_client_certificate_refused_in_the_handshake_as_expired_says_when(
    tls_server: Any, tmp_path: Path
) -> None:
    # a server that checks the client certificate in its handshake (not kube-apiserver,
    # which answers 401): the failure says when the kubeconfig's certificate expired
    ca, clients = (
        CertificateAuthority("mtls"),
        CertificateAuthority("expired-clients", validity=datetime.timedelta(minutes=-4)),
    )
    ctx = server_context(tmp_path, ca)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=clients.cert_pem.decode())
    port = tls_server(ctx)
    pair = clients.issue("someone", server=False)
    doc = kubeconfig_for(port, ca)
    doc["users"][0]["user"] = {
        "client-certificate-data": base64.b64encode(pair.cert_pem).decode(),
        "client-key-data": base64.b64encode(pair.key_pem).decode(),
    }
    message = failure(doc)
    assert f"cannot reach 127.0.0.1:{port}: " in message
    assert (
        message.endswith("Z)") and "(the kubeconfig's client certificate expired at 20" in message
    )
    assert "PRIVATE KEY" not in message


def test_a_server_that_does_not_speak_tls_is_named_at_once(make_envtest_server: Any) -> None:
    plain = make_envtest_server("plain", tls=False)
    config = plain.kubeconfig()
    server = config["clusters"][0]["cluster"]["server"].replace("http://", "https://")
    message = failure(with_cluster(config, server=server, **{"insecure-skip-tls-verify": True}))
    assert message.endswith(
        "TLS handshake failed: the server does not speak TLS on this port (an http:// server?)"
    )


def test_a_server_that_holds_the_tls_handshake_is_said_to_and_bounded_by_the_connect_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a hung API server, or a load balancer with no live backend: the TCP connection is
    # taken, the handshake never answered. urllib3 calls it a "read" timeout and gave
    # the read timeout (30s) in the message of a call that had waited the connect timeout
    monkeypatch.setattr(rest, "CONNECT_TIMEOUT", 1.0)
    with silent_server() as hung:
        port = int(hung.url.rsplit(":", 1)[1])
        config = kubeconfig_for(port, CertificateAuthority("ca"))
        cluster = Cluster.from_kubeconfig(config, name="c")
        try:
            began = time.monotonic()
            with pytest.raises(Unreachable) as unreachable:
                cluster.rest.request("GET", "/api", timeout=10)
            assert time.monotonic() - began < 3
            assert str(unreachable.value) == (
                f"[cluster c] cannot reach 127.0.0.1:{port}: TLS handshake timed out"
            )
            # within a deadline shorter than the connect timeout, the deadline ends it
            monkeypatch.setattr(rest, "CONNECT_TIMEOUT", 10.0)
            with pytest.raises(DeadlineExceeded) as expired:
                cluster.rest.request("GET", "/api", timeout=0.5)
            assert str(expired.value).endswith("within 0.5s (TLS handshake timed out)")
        finally:
            cluster.stop()
