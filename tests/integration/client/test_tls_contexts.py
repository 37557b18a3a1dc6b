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
