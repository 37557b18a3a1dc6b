"""The installer watches what it installed: a removed configuration or a CRD re-created
without its conversion is put back within a second or so, not at the next periodic check.

Every test checks once a minute (``install_resync=60``): what is put back within
seconds was put back because a watch saw it go.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException

import mcruntime
from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.webhook import WebhookServer, WebhookServerOptions
from tests._logs import logged
from tests._rbac import grant_cluster_role
from tests.integration.webhook.test_webhook_replicas import GROUP, NAME, V1, NoHuge, crd

pytestmark = pytest.mark.timeout(60)

#: well under the periodic check (``install_resync`` 60 s, at least 45 s with its spread)
PROMPTLY = 3.0
APPS = f"apps.{GROUP}"


class Cluster:
    """One API server with the test's CRDs, and the kubernetes clients that read it."""

    def __init__(self, srv: Any, *, create: bool = True) -> None:
        self.srv = srv
        api = config.new_client_from_config_dict(srv.kubeconfig())
        self.ext = client.ApiextensionsV1Api(api)
        self.adm = client.AdmissionregistrationV1Api(api)
        if create:
            self.ext.create_custom_resource_definition(crd("widgets", "Widget", ("v1",)))
            self.ext.create_custom_resource_definition(crd("apps", "App", ("v1", "v2")))

    def conversion(self) -> str | None:
        try:
            got = self.ext.read_custom_resource_definition(APPS)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return str(got.spec.conversion.strategy)

    def validating(self) -> bool:
        try:
            self.adm.read_validating_webhook_configuration(NAME)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True


def webhooks(mgr: mcruntime.Manager) -> None:
    mcruntime.webhook_managed_by(mgr).for_(f"{GROUP}/v1/Widget").with_validator(NoHuge()).complete()
    mcruntime.webhook_managed_by(mgr).for_(f"{GROUP}/v2/App").with_converter(
        "v2", {"v1": V1()}
    ).complete()


def server() -> WebhookServer:
    return WebhookServer(
        WebhookServerOptions(host="127.0.0.1", port=0, install=True, install_resync=60)
    )


def replica(cluster: Cluster) -> tuple[mcruntime.Manager, WebhookServer]:
    srv = server()
    mgr = mcruntime.Manager(
        cluster.srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=srv)
    )
    webhooks(mgr)
    return mgr, srv


@pytest.fixture
def cluster(make_envtest_server: Any) -> Iterator[Cluster]:
    yield Cluster(make_envtest_server("put-back"))


def test_a_crd_deleted_and_created_again_gets_its_conversion_back_within_seconds(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    mgr, srv = replica(cluster)
    with caplog.at_level(logging.INFO, logger="mcruntime.webhook"), mgr:
        wait_for(lambda: srv.installed_clusters() == [""], what="installed")
        wait_for(lambda: cluster.conversion() == "Webhook", what="the conversion installed")
        # as an operator author does: delete the CRD, then create it again (without the
        # conversion, as a generated CRD is)
        cluster.ext.delete_custom_resource_definition(APPS)
        wait_for(lambda: cluster.conversion() is None, what="the CRD gone")
        cluster.ext.create_custom_resource_definition(crd("apps", "App", ("v1", "v2")))
        wait_for(cluster.conversion, timeout=PROMPTLY, equals="Webhook", what="the conversion back")
        # the configuration too
        cluster.adm.delete_validating_webhook_configuration(NAME)
        wait_for(cluster.validating, timeout=PROMPTLY, what="the configuration back")
        # a CRD that goes is no failure to report: it is put back once it is there again
        assert not logged(caplog, logging.WARNING, starting="cluster=local webhook")
    assert not cluster.validating()
    assert (
        cluster.conversion() == "Webhook"
    )  # (left calling the webhook: see test_webhook_conversion)


def test_a_crd_whose_conversion_is_set_to_none_gets_it_back_within_seconds(
    cluster: Cluster,
) -> None:
    mgr, srv = replica(cluster)
    with mgr:
        wait_for(lambda: cluster.conversion() == "Webhook", what="the conversion installed")
        # as a manifest whose conversion says None does, replacing the CRD
        cluster.ext.patch_custom_resource_definition(
            APPS, {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
        )
        wait_for(cluster.conversion, timeout=PROMPTLY, equals="Webhook", what="the conversion back")


def test_a_cluster_that_leaves_keeps_no_install_thread_or_watch(
    make_envtest_fleet: Any,
) -> None:
    fleet = make_envtest_fleet(2)
    for srv in fleet:
        Cluster(srv)
    provider = clusters.Provider()
    for srv in fleet:
        provider.add(srv.name, mcruntime.Cluster.from_kubeconfig(srv.kubeconfig(), name=srv.name))
    webhook_server = server()
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(webhook_server=webhook_server)
    )
    webhooks(mgr)

    def names(cluster: str) -> list[str]:
        return [t.name for t in mcruntime_threads() if f"/{cluster}/" in t.name]

    def reader() -> list[str]:  # the thread that reads every watch: here, the installer's
        return [t.name for t in mcruntime_threads() if t.name == "mcruntime/watches"]

    with mgr:
        wait_for(
            lambda: webhook_server.installed_clusters() == ["cluster-0", "cluster-1"],
            what="installed",
        )
        # one thread per cluster, as before: the watches are read by the shared reader
        assert names("cluster-0") == ["mcruntime/webhook/cluster-0/install"]
        wait_for(reader, what="the installer's watches read")
        provider.remove("cluster-0", wait=30)
        wait_for(lambda: not names("cluster-0"), what="cluster-0's threads gone")
        # the cluster that stays is still watched
        cluster_1 = Cluster(fleet["cluster-1"], create=False)
        cluster_1.adm.delete_validating_webhook_configuration(NAME)
        wait_for(cluster_1.validating, timeout=PROMPTLY, what="cluster-1's configuration back")
        provider.remove("cluster-1", wait=30)
        wait_for(lambda: not names("cluster-1"), what="cluster-1's threads gone")
        # no watch of either cluster is left: the shared reader ended with its last one
        wait_for(lambda: not reader(), what="every watch ended")


def test_two_writers_that_undo_each_other_fall_back_to_the_periodic_check(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # another writer that puts its own conversion back at once (a replica of another
    # version, say): the installer's woken checks wait longer each time, so the two do
    # not write in a tight loop
    mgr, srv = replica(cluster)
    theirs = {"strategy": "None", "webhook": None}
    with mgr:
        wait_for(lambda: srv.installed_clusters() == [""], what="installed")
        wait_for(lambda: cluster.conversion() == "Webhook", what="the conversion installed")
        writes = 0
        until = time.monotonic() + 4.0
        while time.monotonic() < until:  # the other writer, as fast as it can
            if cluster.conversion() == "Webhook":
                cluster.ext.patch_custom_resource_definition(
                    APPS, {"spec": {"conversion": copy.deepcopy(theirs)}}
                )
                writes += 1
        # woken checks 0.5, 1, 2 s apart: a few put-backs in four seconds (a tight loop:
        # hundreds); the first is prompt
        assert 2 <= writes <= 5, writes


def _role(admin: mcruntime.Cluster, *, watch: bool, create: bool) -> None:
    """Let service account default/operator do what installing needs (docs/security.md),
    with or without ``watch``."""
    more = ["watch"] if watch else []
    rbac = "rbac.authorization.k8s.io"
    role = {
        "apiVersion": f"{rbac}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "installer"},
        "rules": [
            {
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                "verbs": ["get", "create", "patch", "delete", *more],
            },
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "verbs": ["get", "patch", *more],
            },
        ],
    }
    if not create:
        current = admin.uncached_client.get(f"{rbac}/v1/ClusterRole", "installer")
        admin.uncached_client.update({**role, "metadata": current["metadata"]})
        return
    grant_cluster_role(admin.client, "installer", role["rules"], "default/operator")


def test_a_watch_that_fails_leaves_the_periodic_check_and_is_said_once(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # credentials that may write the configurations but not watch them: every check's
    # watches are refused; said once, then at debug level, and the periodic check goes on
    admin = mcruntime.Cluster.from_kubeconfig(cluster.srv.kubeconfig(), name="admin")
    _role(admin, watch=False, create=True)
    srv = WebhookServer(
        WebhookServerOptions(host="127.0.0.1", port=0, install=True, install_resync=0.3)
    )
    mgr = mcruntime.Manager(
        cluster.srv.kubeconfig(service_account="default/operator"),
        options=mcruntime.ManagerOptions(webhook_server=srv),
    )
    webhooks(mgr)
    caplog.set_level(logging.DEBUG, logger="mcruntime.webhook")
    watching = "cluster=local webhook: watching the installed webhook configuration "

    def lines(level: int) -> list[str]:
        return logged(caplog, level, starting=watching)

    try:
        with mgr:
            wait_for(
                lambda: any("still failing (3)" in m for m in lines(logging.DEBUG)),
                what="three checks whose watches were refused",
            )
            (warning,) = lines(logging.WARNING)
            assert warning.startswith(f"{watching}failed: ") and "forbidden" in warning
            assert "checking every install_resync seconds" in warning
            cluster.adm.delete_validating_webhook_configuration(NAME)
            wait_for(cluster.validating, what="put back by the periodic check")
            _role(admin, watch=True, create=False)
            wait_for(lambda: lines(logging.INFO), what="watched again once allowed")
            (recovery,) = lines(logging.INFO)
            assert recovery.startswith(f"{watching}works again after ")
            assert len(lines(logging.WARNING)) == 1
    finally:
        admin.stop()
