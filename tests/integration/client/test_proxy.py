"""A fleet behind an HTTP proxy: the environment's proxy settings, as kubectl and client-go read them.

``HTTPS_PROXY`` (or ``ALL_PROXY``) sends a cluster's requests and watches
through the proxy with ``CONNECT``; ``NO_PROXY`` exempts hosts; a kubeconfig's
``proxy-url`` wins over the environment. The proxy is a small one of the
test's own, in front of a real envtest server over TLS.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.errors import NotFound, Unreachable
from tests._issuer import Issuer

pytestmark = pytest.mark.timeout(60)

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
#: a name no resolver knows (RFC 2606): only the test proxy reaches it
PRIVATE_HOST = "apiserver.invalid"


class ConnectProxy:
    """An HTTP proxy that tunnels ``CONNECT host:port`` and records each target.

    It resolves `PRIVATE_HOST` itself, as a proxy in front of a private network
    does: a client can reach a server named so only through the proxy.
    """

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.targets: list[str] = []
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._accept, name="test/proxy", daemon=True)]
        self._threads[0].start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            t = threading.Thread(target=self._tunnel, args=(client,), name="test/proxy-conn")
            with self._lock:
                self._socks.append(client)
                self._threads.append(t)
            t.start()

    def _tunnel(self, client: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = client.recv(4096)
            if not chunk:
                client.close()
                return
            head += chunk
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ", 2)
        if method != "CONNECT":
            client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            client.close()
            return
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection(
            ("127.0.0.1" if host == PRIVATE_HOST else host, int(port))
        )
        with self._lock:
            self.targets.append(target)
            self._socks.append(upstream)
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        pair = {client: upstream, upstream: client}
        try:
            while True:
                readable, _, _ = select.select(list(pair), [], [])
                for s in readable:
                    data = s.recv(65536)
                    if not data:
                        return
                    pair[s].sendall(data)
        except (OSError, ValueError):  # ValueError: `close` closed a socket select waits on
            return
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        with self._lock:
            socks, threads = [self._listener, *self._socks], list(self._threads)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        for t in threads:
            t.join(5)
        assert not any(t.is_alive() for t in threads), "the test proxy's threads did not stop"


@pytest.fixture
def proxy() -> Iterator[ConnectProxy]:
    p = ConnectProxy()
    yield p
    p.close()


@pytest.fixture
def proxy_env(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Sets proxy variables on an environment cleared of the machine's own."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)

    def set_env(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_env


@pytest.fixture
def server(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    return make_envtest_server("behind-proxy")


def _cm(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


def _cached(cluster: Cluster, name: str) -> bool:
    try:
        cluster.cache.get("v1/ConfigMap", name, "default")
    except NotFound:
        return False
    return True


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY"])
def test_requests_and_watches_go_through_the_environments_proxy(
    server: APIServer, proxy: ConnectProxy, proxy_env: Callable[..., None], variable: str
) -> None:
    proxy_env(**{variable: proxy.url})
    # the server's name resolves only at the proxy: nothing reaches it directly
    kubeconfig = server.kubeconfig()
    port = server.url.rsplit(":", 1)[1]
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://{PRIVATE_HOST}:{port}"
    kubeconfig["clusters"][0]["cluster"]["tls-server-name"] = "localhost"
    cluster = Cluster.from_kubeconfig(kubeconfig, name="behind-proxy")
    try:
        cluster.client.create(_cm("direct"))
        informer = cluster.cache.get_informer("v1/ConfigMap")
        cluster.start()
        assert informer.wait_for_sync(10)
        cluster.client.create(_cm("watched"))
        wait_for(lambda: _cached(cluster, "watched"))
    finally:
        cluster.stop()
    assert proxy.targets and set(proxy.targets) == {f"{PRIVATE_HOST}:{port}"}


def test_no_proxy_exempts_the_cluster(
    server: APIServer, proxy: ConnectProxy, proxy_env: Callable[..., None]
) -> None:
    proxy_env(HTTPS_PROXY=proxy.url, NO_PROXY="localhost,127.0.0.1")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="exempt")
    try:
        cluster.client.create(_cm("direct"))
    finally:
        cluster.stop()
    assert proxy.targets == []


def test_the_kubeconfigs_proxy_url_wins_over_the_environment(
    server: APIServer, proxy: ConnectProxy, proxy_env: Callable[..., None]
) -> None:
    proxy_env(HTTPS_PROXY="http://127.0.0.1:9")  # discard port: nothing answers there
    kubeconfig = server.kubeconfig()
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = proxy.url
    cluster = Cluster.from_kubeconfig(kubeconfig, name="own-proxy")
    try:
        cluster.client.create(_cm("via-own"))
    finally:
        cluster.stop()
    assert proxy.targets == [server.url.removeprefix("https://")]


def test_a_refusing_proxy_is_named_without_its_credentials(
    server: APIServer, proxy_env: Callable[..., None], caplog: pytest.LogCaptureFixture
) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: the proxy refuses
    proxy_env(HTTPS_PROXY=f"http://proxy-user:pr0xy-s3cret@127.0.0.1:{port}")
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="refused")
    try:
        with pytest.raises(Unreachable) as err:
            cluster.client.create(_cm("never"), timeout=2)
    finally:
        cluster.stop()
    message = str(err.value)
    assert f"through the proxy 127.0.0.1:{port}: connection refused" in message, message
    assert "pr0xy-s3cret" not in message + caplog.text


def test_a_hung_proxy_ends_with_the_calls_deadline(
    server: APIServer, proxy_env: Callable[..., None]
) -> None:
    hung = socket.create_server(("127.0.0.1", 0))  # accepts (backlog) and never answers
    try:
        hung_port = hung.getsockname()[1]
        proxy_env(HTTPS_PROXY=f"http://127.0.0.1:{hung_port}")
        cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="hung-proxy")
        try:
            began = time.monotonic()
            with pytest.raises(Unreachable) as err:  # DeadlineExceeded is one
                cluster.client.create(_cm("never"), timeout=1.0)
            took = time.monotonic() - began
        finally:
            cluster.stop()
    finally:
        hung.close()
    assert took < 2.0, took
    proxy = f"through the proxy 127.0.0.1:{hung_port}"
    assert "hung-proxy" in str(err.value) and proxy in str(err.value), str(err.value)


def test_an_oidc_issuer_is_reached_through_the_environments_proxy(
    proxy: ConnectProxy,
    proxy_env: Callable[..., None],
    server: APIServer,
    tmp_path: Path,
) -> None:
    # the issuer is on the private network behind the proxy; the cluster is exempted
    issuer = Issuer(tmp_path, server.token, host=PRIVATE_HOST)
    try:
        proxy_env(HTTPS_PROXY=proxy.url, NO_PROXY="127.0.0.1")
        doc = server.kubeconfig("oidc")
        doc["users"][0]["user"] = issuer.user()
        cluster = Cluster.from_kubeconfig(doc, name="behind")
        assert cluster.api_reader.list("v1/ConfigMap", namespace="default") == []
        port = issuer.url.rsplit(":", 1)[1]
        assert proxy.targets == [f"{PRIVATE_HOST}:{port}"] * 2, "discovery and token, tunnelled"
        assert issuer.forms[0]["client_id"] == ["mcruntime"], "a public client names itself"
        cluster.stop()
    finally:
        issuer.stop()
