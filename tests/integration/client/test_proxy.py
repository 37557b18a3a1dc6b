"""A fleet behind an HTTP proxy: the environment's proxy settings, as kubectl and client-go read them.

``HTTPS_PROXY`` (or ``ALL_PROXY``) sends a cluster's requests and watches
through the proxy with ``CONNECT``; ``NO_PROXY`` exempts hosts; a kubeconfig's
``proxy-url`` wins over the environment. The proxy is a small one of the
test's own, in front of a real envtest server over TLS.
"""

from __future__ import annotations

import re
import socket
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcruntime.client import _rest as rest
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, _tls, wait_for
from mcruntime.errors import (
    ClusterLeft,
    ConfigError,
    CredentialError,
    DeadlineExceeded,
    NotFound,
    Unreachable,
)
from tests._issuer import Issuer
from tests._proxy import PRIVATE_HOST, ConnectProxy
from tests._silent import silent_server
from tests.integration.client._calls import cut_at_once

pytestmark = pytest.mark.timeout(60)

PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


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


@pytest.fixture
def https_proxy() -> Iterator[ConnectProxy]:
    """A proxy spoken to over TLS (``https://``), its certificate from the cluster's CA: client-go
    checks an https proxy's certificate with the cluster's TLS settings, and so does urllib3."""
    pair = _tls.authority().issue("proxy", server=True, hosts=["127.0.0.1"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "proxy.pem")
        path.write_bytes(pair.cert_pem + pair.key_pem)
        ctx.load_cert_chain(path)
    p = ConnectProxy(tls=ctx)
    yield p
    p.close()


@pytest.mark.parametrize(
    "via",
    [
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "socks5h proxy-url",
        "socks5 proxy-url",  # the proxy resolves the name, as with kubectl
        "https proxy-url",
    ],
)
def test_requests_and_watches_go_through_the_proxy(
    server: APIServer,
    proxy: ConnectProxy,
    https_proxy: ConnectProxy,
    proxy_env: Callable[..., None],
    via: str,
) -> None:
    # the server's name resolves only at the proxy: nothing reaches it directly
    kubeconfig = _private(server)
    if via == "https proxy-url":  # TLS to the proxy, the cluster's TLS inside it
        proxy_env()
        kubeconfig["clusters"][0]["cluster"]["proxy-url"] = https_proxy.url
        proxy = https_proxy
    elif via.startswith("socks"):  # urllib3's SOCKS pools (PySocks)
        proxy_env()
        scheme = via.split(" ", 1)[0]
        kubeconfig["clusters"][0]["cluster"]["proxy-url"] = proxy.socks_url.replace(
            "socks5h://", f"{scheme}://"
        )
    else:
        proxy_env(**{via: proxy.url})
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
    port = server.url.rsplit(":", 1)[1]
    assert proxy.targets and set(proxy.targets) == {f"{PRIVATE_HOST}:{port}"}


def _private(server: APIServer) -> dict[str, Any]:
    """A kubeconfig of ``server`` under a name only the test proxy resolves."""
    kubeconfig = server.kubeconfig()
    port = server.url.rsplit(":", 1)[1]
    entry = kubeconfig["clusters"][0]["cluster"]
    entry.update(server=f"https://{PRIVATE_HOST}:{port}", **{"tls-server-name": "localhost"})
    return kubeconfig


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


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
@pytest.mark.parametrize("no_proxy", [None, "example.com"])
def test_a_loopback_server_is_never_reached_through_the_environments_proxy(
    server: APIServer, proxy_env: Callable[..., None], host: str, no_proxy: str | None
) -> None:
    # Go's ProxyFromEnvironment: "requests to localhost or loopback addresses are never
    # proxied"; kubectl reaches a kind or minikube cluster behind a corporate proxy
    env = {"HTTPS_PROXY": "http://127.0.0.1:9"}  # discard port: nothing answers there
    if no_proxy is not None:
        env["NO_PROXY"] = no_proxy
    proxy_env(**env)
    kubeconfig = server.kubeconfig()
    entry = kubeconfig["clusters"][0]["cluster"]
    entry["server"] = entry["server"].replace("127.0.0.1", host)
    cluster = Cluster.from_kubeconfig(kubeconfig, name="loopback")
    try:
        cluster.client.create(_cm(f"direct-{host.replace('.', '-')}"))
    finally:
        cluster.stop()


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
    # (a loopback server would be reached directly, as Go reaches it)
    cluster = Cluster.from_kubeconfig(_private(server), name="refused")
    try:
        with pytest.raises(Unreachable) as err:
            cluster.client.create(_cm("never"), timeout=2)
    finally:
        cluster.stop()
    message = str(err.value)
    assert f"through the proxy 127.0.0.1:{port}: connection refused" in message, message
    assert "pr0xy-s3cret" not in message + caplog.text


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            b"407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=corp",
            "it answered 407 Proxy Authentication Required (check the user and password in the "
            "proxy's URL: proxy-url or HTTPS_PROXY)",
        ),
        (b"403 Forbidden", "it answered 403 Forbidden"),
        (b"502 Bad Gateway", "it answered 502 Bad Gateway"),
    ],
)
def test_a_proxy_that_refuses_the_tunnel_is_said_with_its_answer(
    server: APIServer, caplog: pytest.LogCaptureFixture, answer: bytes, said: str
) -> None:
    """A proxy that answers the CONNECT with an error (credentials it does not accept, a
    destination it does not allow, no way to the server): the error says what it answered.
    It said "OSError"."""
    refusing = socket.create_server(("127.0.0.1", 0))
    port = refusing.getsockname()[1]

    def refuse() -> None:
        try:
            conn, _ = refusing.accept()
        except OSError:
            return  # closed: the client never came
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 " + answer + b"\r\nContent-Length: 0\r\n\r\n")

    t = threading.Thread(target=refuse, name="test/refusing-proxy")
    t.start()
    kubeconfig = _private(server)
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = (
        f"http://corp-user:pr0xy-s3cret@127.0.0.1:{port}"
    )
    cluster = Cluster.from_kubeconfig(kubeconfig, name="refused")
    try:
        with pytest.raises(Unreachable) as err:
            cluster.client.create(_cm("never"), timeout=5)
    finally:
        cluster.stop()
        t.join(5)
        refusing.close()
    message = str(err.value)
    assert message == (
        f"[cluster refused] cannot reach {PRIVATE_HOST}:{server.url.rsplit(':', 1)[1]} through "
        f"the proxy 127.0.0.1:{port}: the proxy refused the tunnel (CONNECT): {said}"
    ), message
    assert "pr0xy-s3cret" not in message + caplog.text


@pytest.mark.parametrize(
    ("scheme", "silent"),
    [
        ("http", "the proxy did not answer the tunnel request (CONNECT) in time"),
        # an https:// proxy's own handshake comes first: it read "read timed out", Unreachable
        ("https", "the proxy's TLS handshake timed out"),
    ],
)
def test_a_hung_proxy_ends_with_the_calls_deadline(
    server: APIServer,
    proxy_env: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    scheme: str,
    silent: str,
) -> None:
    hung = socket.create_server(("127.0.0.1", 0))  # accepts (backlog) and never answers
    try:
        hung_port = hung.getsockname()[1]
        proxy_env(HTTPS_PROXY=f"{scheme}://127.0.0.1:{hung_port}")
        cluster = Cluster.from_kubeconfig(_private(server), name="hung-proxy")
        try:
            began = time.monotonic()
            with pytest.raises(DeadlineExceeded) as err:
                cluster.client.create(_cm("never"), timeout=1.0)
            took = time.monotonic() - began
            # a deadline longer than the connect timeout: the connect timeout ends it
            monkeypatch.setattr(rest, "CONNECT_TIMEOUT", 1.0)
            with pytest.raises(Unreachable) as unreachable:
                cluster.client.create(_cm("never"), timeout=10)
        finally:
            cluster.stop()
    finally:
        hung.close()
    assert took < 2.0, took
    proxy = f"through the proxy 127.0.0.1:{hung_port}"
    # it used to read "read timed out", and with the call's whole deadline
    # (the budget said is what was left of deadline(1) when the call began: 1s, or 0.999s on
    # a busy machine)
    assert re.search(
        rf"{re.escape(proxy)} within (1|0\.99\d)s \({re.escape(silent)}\)$", str(err.value)
    ), str(err.value)
    assert "hung-proxy" in str(err.value)
    assert str(unreachable.value).endswith(f"{proxy}: {silent}"), str(unreachable.value)


def test_a_server_that_holds_its_handshake_through_the_tunnel_is_said_so(
    proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy opens the tunnel; the server behind it takes the connection and never
    answers the TLS handshake (a hung API server, a load balancer with no live backend).
    As without a proxy: `TLS handshake timed out`. It said "read timed out"."""
    with silent_server() as silent:
        port = silent.url.rsplit(":", 1)[1]
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "c",
                    "cluster": {
                        "server": f"https://{PRIVATE_HOST}:{port}",
                        "proxy-url": proxy.url,
                        "insecure-skip-tls-verify": True,
                    },
                }
            ],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
        cluster = Cluster.from_kubeconfig(kubeconfig, name="held")
        try:
            with pytest.raises(DeadlineExceeded) as err:
                cluster.rest.request("GET", "/api", timeout=1.0)
            # a deadline longer than the connect timeout: the connect timeout ends it
            monkeypatch.setattr(rest, "CONNECT_TIMEOUT", 1.0)
            with pytest.raises(Unreachable) as unreachable:
                cluster.rest.request("GET", "/api", timeout=10)
        finally:
            cluster.stop()
    via = f"{PRIVATE_HOST}:{port} through the proxy 127.0.0.1:{proxy.port}"
    assert re.search(
        rf"no answer from {re.escape(via)} within (1|0\.99\d)s \(TLS handshake timed out\)$",
        str(err.value),
    ), str(err.value)
    assert str(unreachable.value).endswith(f"{via}: TLS handshake timed out"), unreachable.value


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


# -- SOCKS ------------------------------------------------------------------------------
#
# A kubeconfig's ``proxy-url: socks5://...`` (an ``ssh -D`` tunnel to a bastion) goes
# through urllib3's SOCKS pools, which need PySocks (``mcruntime[socks]``).


def _behind_socks(server: APIServer, proxy: ConnectProxy) -> dict[str, Any]:
    kubeconfig = _private(server)
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = proxy.socks_url
    return kubeconfig


def test_an_oidc_issuer_on_loopback_is_never_reached_through_the_environments_proxy(
    proxy_env: Callable[..., None], server: APIServer, tmp_path: Path
) -> None:
    # client-go's oidc transport uses Go's ProxyFromEnvironment too: loopback goes direct
    issuer = Issuer(tmp_path, server.token)
    try:
        proxy_env(HTTPS_PROXY="http://127.0.0.1:9", NO_PROXY="example.com")  # nothing there
        doc = server.kubeconfig("oidc")
        doc["users"][0]["user"] = issuer.user()
        cluster = Cluster.from_kubeconfig(doc, name="loopback-issuer")
        try:
            assert cluster.api_reader.list("v1/ConfigMap", namespace="default") == []
        finally:
            cluster.stop()
    finally:
        issuer.stop()


@pytest.mark.parametrize("scheme", ["socks5h", "https"])
def test_a_cluster_leaving_cuts_its_call_in_flight_through_a_socks_or_https_proxy(
    server: APIServer,
    proxy: ConnectProxy,
    https_proxy: ConnectProxy,
    proxy_env: Callable[..., None],
    scheme: str,
) -> None:
    # the server behind the proxy hangs: leaving must not wait for the call's deadline.
    # Through an https proxy the connection is TLS inside TLS (urllib3's SSLTransport)
    proxy_env()
    if scheme == "https":
        kubeconfig = _private(server)
        kubeconfig["clusters"][0]["cluster"]["proxy-url"] = https_proxy.url
    else:
        kubeconfig = _behind_socks(server, proxy)
    cluster = Cluster.from_kubeconfig(kubeconfig, name="proxy-hung")
    cluster.api_reader.list("v1/ConfigMap", namespace="default")  # connected, pooled
    raised: list[BaseException] = []

    def call() -> None:
        try:
            cluster.api_reader.list("v1/ConfigMap", namespace="default", timeout=30)
        except BaseException as exc:
            raised.append(exc)

    server.freeze()
    try:
        t = threading.Thread(target=call, name="test-proxied-call")
        t.start()
        t.join(0.3)
        assert t.is_alive(), "not blocked on the frozen server"
        left = time.monotonic()
        cluster.stop()
        t.join(5)
        assert not t.is_alive() and time.monotonic() - left < 1.0
        assert len(raised) == 1 and isinstance(raised[0], ClusterLeft), raised
    finally:
        server.thaw()


@pytest.mark.parametrize("how", ["cut_calls", "close"])
def test_a_call_waiting_for_a_socks_proxy_that_never_answers_is_cut_at_once(
    server: APIServer, proxy_env: Callable[..., None], how: str
) -> None:
    # the proxy takes the TCP connection and never answers the SOCKS greeting (a hung
    # bastion): PySocks waited for it in its own connect, which no cut reached
    proxy_env()
    with socket.create_server(("127.0.0.1", 0)) as hung:
        kubeconfig = _private(server)
        kubeconfig["clusters"][0]["cluster"]["proxy-url"] = (
            f"socks5://127.0.0.1:{hung.getsockname()[1]}"
        )
        cut_at_once(kubeconfig, how, "SOCKS greeting")


def test_a_socks_proxy_without_pysocks_is_a_config_error_naming_the_extra(
    server: APIServer, proxy_env: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy_env()
    monkeypatch.setitem(sys.modules, "socks", None)  # as if PySocks were not installed
    kubeconfig = server.kubeconfig()
    kubeconfig["clusters"][0]["cluster"]["proxy-url"] = "socks5://me:s3cret@127.0.0.1:1080"
    with pytest.raises(ConfigError) as err:
        Cluster.from_kubeconfig(kubeconfig, name="no-pysocks")
    assert "the SOCKS proxy 127.0.0.1:1080 of cluster https://" in str(err.value)
    assert "needs PySocks: pip install 'mcruntime[socks]'" in str(err.value)
    assert "s3cret" not in str(err.value)


def test_an_oidc_refresh_through_the_environments_socks_proxy_without_pysocks_names_the_extra(
    server: APIServer,
    proxy_env: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # the issuer is reached through ALL_PROXY's SOCKS proxy (the cluster is exempted): the
    # error said "the environment's SOCKS proxy needs PySocks", naming neither it nor the extra
    issuer = Issuer(tmp_path, server.token, host=PRIVATE_HOST)
    try:
        proxy_env(ALL_PROXY="socks5h://me:s3cret@127.0.0.1:9", NO_PROXY="127.0.0.1")
        monkeypatch.setitem(sys.modules, "socks", None)  # as if PySocks were not installed
        monkeypatch.setitem(sys.modules, "urllib3.contrib.socks", None)
        doc = server.kubeconfig("oidc")
        doc["users"][0]["user"] = issuer.user()
        cluster = Cluster.from_kubeconfig(doc, name="no-pysocks")
        try:
            with pytest.raises(CredentialError) as err:
                cluster.api_reader.list("v1/ConfigMap", namespace="default")
        finally:
            cluster.stop()
    finally:
        issuer.stop()
    assert str(err.value).endswith(
        "cannot refresh its id-token: the environment's SOCKS proxy 127.0.0.1:9 needs "
        "PySocks: pip install 'mcruntime[socks]'"
    ), str(err.value)
    assert "s3cret" not in str(err.value)
    assert issuer.forms == [], "nothing reached the issuer"
