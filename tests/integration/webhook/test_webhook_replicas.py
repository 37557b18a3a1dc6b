"""``install=True`` with several replicas: who holds the configurations, and drift put back.

The replicas of an operator (or the old and new pod of a rolling update) write
the same webhook configurations and CRD conversion; the one that stops first
must not take them away from the others, and the last one removes them.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client import ApiException

import mcruntime
import mcruntime.webhook._install as install_module
from mcruntime.envtest import wait_for
from mcruntime.webhook import (
    AdmissionRequest,
    Denied,
    WebhookServer,
    WebhookServerOptions,
    generate_certificates,
)
from tests._logs import logged

pytestmark = pytest.mark.timeout(60)

GROUP = "replicas.mcruntime.io"
OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
NAME = "mcruntime-webhooks"
HOLDERS = "webhook.mcruntime.io/holders"


def crd(plural: str, kind: str, versions: tuple[str, ...]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": v == versions[-1],
                    "schema": {"openAPIV3Schema": OPEN},
                }
                for v in versions
            ],
        },
    }


class NoHuge:
    def validate_create(self, request: AdmissionRequest, obj: Any) -> None:
        if obj.get("spec", {}).get("size") == "huge":
            raise Denied("spec.size huge is not allowed")

    def validate_update(self, request: AdmissionRequest, old: Any, new: Any) -> None:
        self.validate_create(request, new)

    def validate_delete(self, request: AdmissionRequest, obj: Any) -> None:
        return None


class V1:
    def to_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj

    def from_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        return obj


class Cluster:
    """One API server and the kubernetes clients a test reads it with."""

    def __init__(self, srv: Any) -> None:
        self.srv = srv
        api = config.new_client_from_config_dict(srv.kubeconfig())
        self.ext = client.ApiextensionsV1Api(api)
        self.adm = client.AdmissionregistrationV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.ext.create_custom_resource_definition(crd("widgets", "Widget", ("v1",)))
        self.ext.create_custom_resource_definition(crd("apps", "App", ("v1", "v2")))

    def replica(self, **options: Any) -> tuple[mcruntime.Manager, WebhookServer]:
        server = WebhookServer(
            WebhookServerOptions(host="127.0.0.1", port=0, install=True, **options)
        )
        mgr = mcruntime.Manager(
            self.srv.kubeconfig(), options=mcruntime.ManagerOptions(webhook_server=server)
        )
        mcruntime.webhook_managed_by(mgr).for_(f"{GROUP}/v1/Widget").with_validator(
            NoHuge()
        ).complete()
        mcruntime.webhook_managed_by(mgr).for_(f"{GROUP}/v2/App").with_converter(
            "v2", {"v1": V1()}
        ).complete()
        return mgr, server

    def validating(self) -> Any:
        return self.adm.read_validating_webhook_configuration(NAME)

    def holders(self) -> dict[str, Any]:
        annotations = self.validating().metadata.annotations or {}
        held: dict[str, Any] = json.loads(annotations[HOLDERS])
        return held

    def crd_holders(self) -> str | None:
        """The holders annotation of the CRD (None: none)."""
        crd = self.ext.read_custom_resource_definition(f"apps.{GROUP}")
        held: str | None = (crd.metadata.annotations or {}).get(HOLDERS)
        return held

    def conversion(self) -> str:
        return str(
            self.ext.read_custom_resource_definition(f"apps.{GROUP}").spec.conversion.strategy
        )

    def installed(self) -> bool:
        try:
            self.validating()
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def create_widget(self, name: str, size: str) -> None:
        self.custom.create_namespaced_custom_object(
            GROUP,
            "v1",
            "default",
            "widgets",
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "Widget",
                "metadata": {"name": name},
                "spec": {"size": size},
            },
        )


@pytest.fixture
def cluster(make_envtest_server: Any) -> Iterator[Cluster]:
    yield Cluster(make_envtest_server("replicas"))


def test_a_replica_that_stops_leaves_the_webhooks_to_the_replica_still_running(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # both replicas serve the same certificate behind one address (a Service's):
    # here the address of the replica that stays
    generate_certificates(["127.0.0.1"]).write(tmp_path)
    stays, stays_server = cluster.replica(cert_dir=str(tmp_path))
    stays.start()
    try:
        wait_for(lambda: stays_server.installed_clusters() == [""], what="first replica installed")
        url = f"https://127.0.0.1:{stays_server.port}"
        leaves, leaves_server = cluster.replica(cert_dir=str(tmp_path), url=url)
        with caplog.at_level(logging.INFO, logger="mcruntime.webhook"), leaves:
            wait_for(lambda: leaves_server.installed_clusters() == [""], what="second installed")
            assert set(cluster.holders()) == {
                stays_server.install_identity,
                leaves_server.install_identity,
            }
        # the replica that left said why it removed nothing
        assert logged(
            caplog,
            logging.INFO,
            starting="cluster=local webhook configuration validatingwebhookconfigurations "
            f"left in place: still held by {stays_server.install_identity}",
        )
        assert set(cluster.holders()) == {stays_server.install_identity}
        assert cluster.conversion() == "Webhook"
        # the webhooks still work: the replica still running answers them
        with pytest.raises(ApiException) as refused:
            cluster.create_widget("w", "huge")
        assert "spec.size huge is not allowed" in refused.value.body
        cluster.create_widget("w", "small")
    finally:
        stays.stop()
    # the last replica to stop removes them; the CRD's conversion stays (unheld)
    assert not cluster.installed()
    assert (cluster.conversion(), cluster.crd_holders()) == ("Webhook", None)


def test_a_configuration_removed_or_changed_while_installed_is_put_back(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    mgr, server = cluster.replica(install_resync=0.2)
    with caplog.at_level(logging.INFO, logger="mcruntime.webhook"), mgr:
        wait_for(lambda: server.installed_clusters() == [""], what="installed")
        url = cluster.validating().webhooks[0].client_config.url
        cluster.adm.delete_validating_webhook_configuration(NAME)
        wait_for(cluster.installed, what="the configuration put back")
        assert cluster.validating().webhooks[0].client_config.url == url
        # said once the write has returned: the test may see the write before the line
        wait_for(
            lambda: logged(
                caplog,
                logging.INFO,
                starting="cluster=local webhook configuration validatingwebhookconfigurations "
                "put back: it was removed",
            ),
            what="the put-back said",
        )
        cluster.adm.patch_validating_webhook_configuration(
            NAME,
            [{"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": "https://x:1"}],
        )
        wait_for(
            lambda: cluster.validating().webhooks[0].client_config.url == url,
            what="the URL put back",
        )
        cluster.ext.patch_custom_resource_definition(
            f"apps.{GROUP}", {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
        )
        wait_for(lambda: cluster.conversion() == "Webhook", what="the conversion put back")
    assert not cluster.installed()


def test_replicas_writing_different_configurations_say_so_once_not_at_every_check(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # two versions during a rollout (here: two addresses) put their own webhooks back at
    # every check until one stops: an info line and one warning per object and replica,
    # then debug lines, and one line when the configuration stays as written again
    caplog.set_level(logging.DEBUG, logger="mcruntime.webhook")
    old, old_server = cluster.replica(install_resync=0.2)
    new, new_server = cluster.replica(install_resync=0.2)
    items = ("validatingwebhookconfigurations", f"crd:apps.{GROUP}")
    prefix = "cluster=local webhook"

    def lines(level: int, text: str) -> list[str]:
        return logged(caplog, level, starting=prefix, containing=text)

    def put_backs(item: str) -> list[str]:  # logged at any level
        return [
            m
            for r in caplog.records
            if (m := r.getMessage()).startswith(prefix)
            and (f"{item} put back: " in m or f"{item} as written " in m)
            and "works again" not in m
        ]

    with old:
        wait_for(lambda: old_server.installed_clusters() == [""], what="installed by one")
        with new:
            wait_for(
                lambda: all(len(put_backs(i)) >= 8 for i in items),
                timeout=30,
                what="both objects put back again and again",
            )
            for item in items:
                put_back = lines(logging.INFO, f"configuration {item} put back: it was ")
                again = lines(
                    logging.WARNING, f"keeping webhook configuration {item} as written failed"
                )
                assert 1 <= len(put_back) <= 2, put_back  # one per replica
                assert 1 <= len(again) <= 2, again
                assert "something else writes it back" in again[0]
        wait_for(
            lambda: all(lines(logging.INFO, f"{i} as written works again after ") for i in items),
            timeout=30,
            what="the configuration stays as written once the other replica stopped",
        )


def test_holds_of_replicas_that_are_gone_do_not_keep_the_configuration(
    cluster: Cluster,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    gone_pid = int(done.stdout)
    here = socket.gethostname()
    later, past = "2999-01-01T00:00:00Z", "2000-01-01T00:00:00Z"
    stale = {
        # not renewed within its duration since this replica saw it (a hold that says no
        # duration lasts the replica's own: 2 s here): it died elsewhere without a word
        "expired": {"host": "elsewhere", "pid": 7, "expires": past},
        # a process of this host that exited
        "exited": {"host": here, "pid": gone_pid, "expires": later},
        # this process before a restart (a container's pid 1, say)
        "restarted": {"host": here, "pid": os.getpid(), "expires": later},
    }
    cluster.adm.create_validating_webhook_configuration(
        {
            "metadata": {"name": NAME, "annotations": {HOLDERS: json.dumps(stale)}},
            "webhooks": [],
        }
    )
    mgr, server = cluster.replica(install_resync=0.2)
    with mgr:
        wait_for(lambda: server.installed_clusters() == [""], what="installed")
        wait_for(
            lambda: set(cluster.holders()) == {server.install_identity},
            what="the holds of replicas that are gone dropped",
        )
    assert not cluster.installed()
    assert (cluster.conversion(), cluster.crd_holders()) == ("Webhook", None)


def test_a_fresh_hold_of_another_replica_keeps_the_configuration(cluster: Cluster) -> None:
    other = {"pod-b": {"host": "node-b", "pid": 1, "expires": "2999-01-01T00:00:00Z"}}
    cluster.adm.create_validating_webhook_configuration(
        {
            "metadata": {"name": NAME, "annotations": {HOLDERS: json.dumps(other)}},
            "webhooks": [],
        }
    )
    mgr, server = cluster.replica()
    with mgr:
        wait_for(lambda: server.installed_clusters() == [""], what="installed")
        assert set(cluster.holders()) == {"pod-b", server.install_identity}
    assert cluster.holders() == other
    assert len(cluster.validating().webhooks) == 1


class SkewedClock:
    """What ``mcruntime.webhook._install`` sees as its ``time`` module in the tests of
    replicas whose clocks differ: ``time()`` is off by a replica's own offset while that
    replica's holds are read, claimed or judged (`skew`); ``monotonic()`` and the
    machine's clock are untouched."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._local = threading.local()
        shim = types.SimpleNamespace(
            **{k: getattr(time, k) for k in dir(time) if not k.startswith("__")}
        )
        shim.time = lambda: time.time() + getattr(self._local, "offset", 0.0)
        monkeypatch.setattr(install_module, "time", shim)

    def skew(self, server: WebhookServer, offset: float) -> None:
        """Run ``server``'s replica on a clock ``offset`` seconds off."""
        holds = server._installer._holds
        for name in ("claim", "due", "read"):
            method = getattr(holds, name)

            def skewed(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
                self._local.offset = offset
                try:
                    return _method(*args, **kwargs)
                finally:
                    self._local.offset = 0.0

            setattr(holds, name, skewed)


def test_replicas_whose_clocks_differ_do_not_drop_each_others_holds(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a hold lasts 600 s (install_resync 60): a replica 11 min behind took the other's
    # hold for expired and dropped it, which re-added it at once, ~140 writes a second
    clock = SkewedClock(monkeypatch)
    generate_certificates(["127.0.0.1"]).write(tmp_path)
    first, first_server = cluster.replica(cert_dir=str(tmp_path))
    with first:
        wait_for(lambda: first_server.installed_clusters() == [""], what="first installed")
        url = f"https://127.0.0.1:{first_server.port}"
        second, second_server = cluster.replica(cert_dir=str(tmp_path), url=url)
        clock.skew(second_server, -660.0)
        with second:
            wait_for(lambda: second_server.installed_clusters() == [""], what="second installed")
            both = {first_server.install_identity, second_server.install_identity}
            wait_for(lambda: set(cluster.holders()) == both, what="both holds")
            time.sleep(1.0)
            before = cluster.validating().metadata.resource_version
            time.sleep(5.0)
            assert cluster.validating().metadata.resource_version == before  # no write
            assert set(cluster.holders()) == both


def test_a_replica_whose_hold_keeps_being_dropped_re_adds_it_with_backoff(
    cluster: Cluster,
) -> None:
    # something (a replica of another version, a member cluster's admin) drops this
    # replica's hold whenever it sees it: each woken check re-adds it, the next waits longer
    mgr, server = cluster.replica()
    with mgr:
        wait_for(lambda: server.installed_clusters() == [""], what="installed")
        identity = server.install_identity
        re_added = 0
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            held = cluster.holders()
            if identity in held:
                re_added += 1
                del held[identity]
                cluster.adm.patch_validating_webhook_configuration(
                    NAME, {"metadata": {"annotations": {HOLDERS: json.dumps(held)}}}
                )
            time.sleep(0.02)
        # 0.5 s, then 1, 2, 4: about four re-adds in 5 s (once a woken check each, at once)
        assert re_added <= 8, re_added


def test_a_replica_whose_clock_is_ahead_does_not_remove_what_another_holds_when_it_stops(
    cluster: Cluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the replica that stops (the old pod of a rolling update) runs 11 min ahead: the
    # other's hold (600 s) looked expired to it, and it removed the configuration
    clock = SkewedClock(monkeypatch)
    generate_certificates(["127.0.0.1"]).write(tmp_path)
    stays, stays_server = cluster.replica(cert_dir=str(tmp_path))
    with stays:
        wait_for(lambda: stays_server.installed_clusters() == [""], what="first replica installed")
        url = f"https://127.0.0.1:{stays_server.port}"
        leaves, leaves_server = cluster.replica(cert_dir=str(tmp_path), url=url)
        leaves.start()
        wait_for(lambda: leaves_server.installed_clusters() == [""], what="second installed")
        both = {stays_server.install_identity, leaves_server.install_identity}
        wait_for(lambda: set(cluster.holders()) == both, what="both holds")
        uid = cluster.validating().metadata.uid
        clock.skew(leaves_server, 660.0)
        with caplog.at_level(logging.INFO, logger="mcruntime.webhook"):
            leaves.stop()
        for item in ("validatingwebhookconfigurations", f"crd:apps.{GROUP}"):
            assert logged(
                caplog,
                logging.INFO,
                starting=f"cluster=local webhook configuration {item} left in place: "
                f"still held by {stays_server.install_identity}",
            )
        assert not logged(caplog, logging.INFO, containing="webhook configuration removed")
        assert cluster.validating().metadata.uid == uid  # never removed, not put back
        assert set(cluster.holders()) == {stays_server.install_identity}
