"""A member's kubeconfig rotated in its credentials only (a token, a client certificate) is taken
in place: nothing is listed or reconciled again, writes go on with the new credential, the open
watches stream on; a change of server still engages the cluster again."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Proxy, wait_for
from mcruntime.providers import clusters
from tests._client_keys import client_certificate, pem
from tests._connections import established_to
from tests._rbac import grant_cluster_role, username_of
from tests.integration.multicluster._mc_helpers import (
    Recorder,
    configmap,
    configmap_controller,
    running,
    thread_names,
)

pytestmark = pytest.mark.timeout(60)

NS = "kube-system"
SA = "rotating"
#: no health probe in the way of the request counts (each test lasts seconds)
QUIET = mcruntime.ManagerOptions(cluster_health_interval=3600)
SWAPPED = "took new credentials in place"


@pytest.fixture
def server(make_envtest_server: Any) -> APIServer:
    return make_envtest_server()  # over TLS


@pytest.fixture
def writer(server: APIServer) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(server.kubeconfig(), name="writer")
    c.client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA, "namespace": NS}}
    )
    grant_cluster_role(
        c.client, SA, [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], f"{NS}/{SA}"
    )
    for name in ("a", "b", "c"):
        c.client.create(configmap(name))
    yield c
    c.stop()


def bound_token(writer: Cluster, holder: str) -> str:
    """A token of the ServiceAccount bound to Secret ``holder``, as a TokenRequest issues it:
    deleting the Secret revokes it (and it alone)."""
    secret = writer.client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": holder, "namespace": NS}}
    )
    review = writer.rest.request(
        "POST",
        f"/api/v1/namespaces/{NS}/serviceaccounts/{SA}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "name": holder,
                    "uid": secret["metadata"]["uid"],
                }
            },
        },
    )
    return str(review["status"]["token"])


def revoke(writer: Cluster, holder: str) -> None:
    writer.client.delete("v1/Secret", holder, NS)


def certificate_user(name: str) -> dict[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    return {
        "client-certificate-data": base64.b64encode(client_certificate(key, user=name)).decode(),
        "client-key-data": base64.b64encode(pem(key)).decode(),
    }


def rotate(provider: clusters.Provider, server: APIServer | Proxy, user: dict[str, Any]) -> None:
    """Add member ``m1`` again, from ``server``'s kubeconfig with ``user`` as its user."""
    doc = server.kubeconfig()
    doc["users"][0]["user"] = user
    provider.add("m1", Cluster.from_kubeconfig(doc, name="m1"))


@contextmanager
def member(
    server: APIServer, user: dict[str, Any]
) -> Iterator[tuple[clusters.Provider, mcruntime.Manager, Recorder]]:
    """A running manager with a ConfigMap controller and member ``m1`` (``server`` as
    ``user``), its three ConfigMaps reconciled."""
    provider = clusters.Provider()
    rotate(provider, server, user)
    mgr = mcruntime.Manager(provider=provider, options=QUIET)
    rec = Recorder()
    configmap_controller(mgr, rec)
    with running(mgr):
        wait_for(lambda: rec.count() >= 3, what="the three ConfigMaps reconciled")
        yield provider, mgr, rec


def gets(cluster: Cluster) -> int:
    """The GETs ``cluster`` sent: lists and watches opened (reads come from its cache)."""
    return sum(n for (method, _), n in cluster.rest.request_counts().items() if method == "GET")


def said(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if text in r.getMessage()]


def test_a_rotated_token_is_taken_in_place_without_relisting_or_reconciling(
    server: APIServer, writer: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = bound_token(writer, "holder-1"), bound_token(writer, "holder-2")
    caplog.set_level(logging.INFO)
    with member(server, {"token": first}) as (provider, mgr, rec):
        engaged = mgr.get_cluster("m1")
        reconciled, listed, threads = rec.count(), gets(engaged), thread_names()

        rotate(provider, server, {"token": second})
        revoke(writer, "holder-1")  # from now on only the new token is accepted

        assert mgr.get_cluster("m1") is engaged
        engaged.client.create(configmap("written-after"))  # sent with the new token
        # delivered by the watch opened before the rotation: it streams on
        wait_for(lambda: rec.saw("m1", "default/written-after"))
        assert rec.count() == reconciled + 1, "objects were reconciled again"
        assert gets(engaged) == listed, "the informers listed or watched again"

        # the server ends the watches: they are opened again with the new token, not relisted
        server.drop_watches()
        writer.client.create(configmap("after-rewatch"))
        wait_for(lambda: rec.saw("m1", "default/after-rewatch"))
        assert rec.count() == reconciled + 2
        assert not any(code == "401" for _, code in engaged.rest.request_counts())
        assert thread_names() == threads
    assert said(caplog, SWAPPED) == [
        "cluster=m1 took new credentials in place (its token changed): it is not engaged "
        "again, its informers and caches go on"
    ]
    assert first not in caplog.text and second not in caplog.text
    assert said(caplog, "replaced") == []


def test_a_rotated_client_certificate_is_presented_by_the_next_connections(
    server: APIServer, writer: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with member(server, certificate_user("rotating-old")) as (provider, mgr, rec):
        engaged = mgr.get_cluster("m1")
        assert username_of(engaged.rest) == "rotating-old"  # (its connection stays pooled)
        reconciled, listed, connections = rec.count(), gets(engaged), established_to(server.port)

        rotate(provider, server, certificate_user("rotating-new"))

        assert mgr.get_cluster("m1") is engaged
        assert username_of(engaged.rest) == "rotating-new"
        # the idle connection that presented the old one was closed, the watch's was not
        assert established_to(server.port) == connections
        engaged.client.create(configmap("written-after"))
        wait_for(lambda: rec.saw("m1", "default/written-after"))
        assert rec.count() == reconciled + 1
        assert gets(engaged) == listed
    assert said(caplog, SWAPPED) == [
        "cluster=m1 took new credentials in place (its client certificate changed): it is "
        "not engaged again, its informers and caches go on"
    ]


def test_a_revoked_token_fails_once_in_the_log_and_the_next_rotation_recovers_in_place(
    server: APIServer, writer: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with member(server, {"token": bound_token(writer, "h1")}) as (provider, mgr, rec):
        engaged = mgr.get_cluster("m1")
        reconciled = rec.count()
        revoke(writer, "h1")
        server.drop_watches()  # the watches are opened again, with the revoked token: 401
        # six attempts refused: the informer now waits 6.4 s (+-10%) before its next one
        wait_for(lambda: engaged.rest.request_counts().get(("GET", "401"), 0) >= 6, timeout=15)
        (failing,) = [r for r in caplog.records if "Unauthorized" in r.getMessage()]
        assert failing.levelno == logging.WARNING and "cluster=m1" in failing.getMessage()

        rotate(provider, server, {"token": bound_token(writer, "h2")})
        writer.client.create(configmap("after-recovery"))
        # the informer tries again at once, not after its backoff
        wait_for(lambda: rec.saw("m1", "default/after-recovery"), timeout=4)
        assert mgr.get_cluster("m1") is engaged
        assert rec.count() == reconciled + 1
    assert len(said(caplog, "works again")) == 1


def test_a_change_of_server_engages_the_cluster_again(
    server: APIServer, writer: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with (
        Proxy(server) as proxy,  # the same API server at another address
        member(server, {"token": bound_token(writer, "h1")}) as (provider, mgr, rec),
    ):
        engaged = mgr.get_cluster("m1")
        reconciled = rec.count()
        rotate(provider, proxy, {"token": bound_token(writer, "h2")})
        wait_for(lambda: rec.count() >= reconciled + 3, what="every object reconciled again")
        assert mgr.get_cluster("m1") is not engaged
        assert engaged.stopped
    assert said(caplog, SWAPPED) == []
    assert said(caplog, "replaced") == ["provider=clusters cluster=m1 replaced: engaging it again"]
