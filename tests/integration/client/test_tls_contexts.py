"""TLS contexts shared by connections with the same TLS settings, and only by those."""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcruntime import Cluster
from mcruntime.errors import Unreachable
from tests._httpserver import Handler
from tests._legacy_tls import serving_tls
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


class _APIVersions(Handler):
    protocol_version = "HTTP/1.1"  # keep-alive: the test looks at the open connection

    def do_GET(self) -> None:
        self.answer(200, b'{"kind":"APIVersions","versions":["v1"]}')


@pytest.fixture(scope="module")
def legacy_kubeadm() -> Iterator[dict[str, Any]]:
    """The kubeconfig of an HTTPS server with a kubeadm CA made by Go before 1.15."""
    with serving_tls(_APIVersions) as (url, ca):
        cluster = {"server": url, "certificate-authority-data": base64.b64encode(ca).decode()}
        yield {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "legacy", "cluster": cluster}],
            "users": [{"name": "legacy", "user": {"token": "t"}}],
            "contexts": [{"name": "legacy", "context": {"cluster": "legacy", "user": "legacy"}}],
            "current-context": "legacy",
        }


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
