"""Server addresses kubeconfigs carry besides ``https://host:port``, read as kubectl reads them.

A path prefix (``https://rancher.example/k8s/clusters/c-abc``: Rancher and other API
gateways serve each cluster under one) is kept before every request's and watch's path;
an IPv6 address (``https://[::1]:6443``) is dialled as such. A gateway of the test's own
(`tests._proxy.PrefixGateway`) stands in in front of a real envtest server (a request without the prefix
gets its 404).
"""

from __future__ import annotations

import base64
import logging
import ssl
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import Configuration, CoreV1Api

from mcruntime import Cluster
from mcruntime.envtest import APIServer, _tls, wait_for
from mcruntime.errors import Unreachable
from tests._proxy import PrefixGateway

pytestmark = pytest.mark.timeout(60)

PREFIX = b"/k8s/clusters/c-abc"


@pytest.fixture
def gateways() -> Iterator[Callable[..., PrefixGateway]]:
    made: list[PrefixGateway] = []

    def make(target: int, prefix: bytes = b"", **options: Any) -> PrefixGateway:
        made.append(PrefixGateway(target, prefix, **options))
        return made[-1]

    yield make
    for g in made:
        g.close()


def serving_context() -> ssl.SSLContext:
    """A serving context with the envtest CA's certificate for 127.0.0.1 (the gateway's)."""
    pair = _tls.authority().server_pair()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "tls.pem")
        path.write_bytes(pair.cert_pem + pair.key_pem)
        ctx.load_cert_chain(path)
    return ctx


def _names(cluster: Cluster) -> set[str]:
    """The names of the ConfigMaps of ``default`` in ``cluster``'s cache."""
    return {o["metadata"]["name"] for o in cluster.cache.list("v1/ConfigMap", namespace="default")}


def lists_and_watches(kubeconfig: dict[str, Any]) -> None:
    cluster = Cluster.from_kubeconfig(kubeconfig, name="c")
    try:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}}
        cluster.client.create({**cm, "metadata": {**cm["metadata"], "name": "listed"}})
        informer = cluster.cache.get_informer("v1/ConfigMap")
        cluster.start()
        assert informer.wait_for_sync(10)
        assert "listed" in _names(cluster)
        cluster.client.create({**cm, "metadata": {**cm["metadata"], "name": "watched"}})
        wait_for(lambda: "watched" in _names(cluster))
    finally:
        cluster.stop()


def test_a_server_with_a_path_prefix_is_served_under_it(
    make_envtest_server: Callable[..., APIServer], gateways: Callable[..., PrefixGateway]
) -> None:
    plain = make_envtest_server("behind-gateway", tls=False)
    gateway = gateways(plain.port, PREFIX, tls=serving_context())
    kubeconfig = plain.kubeconfig()
    cluster = kubeconfig["clusters"][0]["cluster"]
    cluster["server"] = f"https://127.0.0.1:{gateway.port}{PREFIX.decode()}"
    cluster["certificate-authority-data"] = base64.b64encode(_tls.authority().cert_pem).decode()
    lists_and_watches(kubeconfig)
    assert gateway.unprefixed == []


def test_an_ipv6_server_address_is_dialled_and_named(
    envtest_server: APIServer, gateways: Callable[..., PrefixGateway]
) -> None:
    try:
        v6 = gateways(envtest_server.port, tls=None, host="::1")
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    kubeconfig = envtest_server.kubeconfig()
    kubeconfig["clusters"][0]["cluster"]["server"] = f"https://[::1]:{v6.port}"
    lists_and_watches(kubeconfig)  # the serving certificate holds ::1
    kubeconfig["clusters"][0]["cluster"]["server"] = "https://[::1]:1"
    cluster = Cluster.from_kubeconfig(kubeconfig, name="c")
    try:
        with pytest.raises(Unreachable) as err:
            cluster.rest.request("GET", "/api", timeout=5)
    finally:
        cluster.stop()
    assert str(err.value) == "[cluster c] cannot reach [::1]:1: connection refused"


def test_a_query_and_fragment_of_the_server_are_dropped_as_client_go_drops_them(
    make_envtest_server: Callable[..., APIServer],
    gateways: Callable[..., PrefixGateway],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """client-go's RESTClient takes the server's URL without its query and fragment
    (rest/client.go ``NewRESTClient``). They were glued between the prefix and every
    request's path (``/k8s/clusters/c-abc?access_token=.../api/v1/...``: a 404 for each
    call), and urllib3's DEBUG line of each request logged the query, a token with it."""
    caplog.set_level(logging.DEBUG)
    plain = make_envtest_server("behind-gateway", tls=False)
    gateway = gateways(plain.port, PREFIX, tls=serving_context())
    kubeconfig = plain.kubeconfig()
    cluster = kubeconfig["clusters"][0]["cluster"]
    cluster["server"] = (
        f"https://127.0.0.1:{gateway.port}{PREFIX.decode()}?access_token=q-s3cret#part"
    )
    cluster["certificate-authority-data"] = base64.b64encode(_tls.authority().cert_pem).decode()
    lists_and_watches(kubeconfig)
    # the kubernetes package's API classes, on the cluster's configuration, too
    loaded = Cluster.from_kubeconfig(kubeconfig, name="c")
    try:
        assert CoreV1Api(loaded.api_client).read_namespace("default").metadata.name == "default"
    finally:
        loaded.stop()
    # and a Configuration of the caller's own
    configuration = Configuration()
    configuration.host = f"http://127.0.0.1:{plain.port}/?access_token=q-s3cret"
    configuration.api_key = {"authorization": f"Bearer {plain.token}"}
    own = Cluster.from_config(configuration, name="own")
    try:
        assert own.uncached_client.get("v1/Namespace", "default")["metadata"]["name"] == "default"
    finally:
        own.stop()
    assert gateway.unprefixed == []
    assert "q-s3cret" not in caplog.text
