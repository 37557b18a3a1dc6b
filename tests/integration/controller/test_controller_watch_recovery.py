"""No lost events: changes made while the watch is down (expired history, server restart) are reconciled."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import NotFound
from mcruntime.handler import Funcs
from mcruntime.source import Kind
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(40)

GONE = "<gone>"


class Observed(Calls):
    """Records each reconcile and the state the reconciler read from the cache."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, Any] = {}

    def reconciler(self, mgr: Manager) -> Callable[[Request], None]:
        def reconcile(req: Request) -> None:
            try:
                cm = mgr.get_cluster(req.cluster_name).client.get(
                    "v1/ConfigMap", req.name, req.namespace
                )
                state: Any = dict(cm.get("data") or {})
            except NotFound:
                state = GONE
            self.seen[req.name] = state
            self.record(req)

        return reconcile

    def wait_seen(self, want: dict[str, Any], timeout: float = 15.0) -> None:
        self.wait(
            lambda c: all(self.seen.get(k) == v for k, v in want.items()),
            timeout,
            f"reconciled states {want}, seen {self.seen}",
        )


def test_changes_during_an_expired_watch_are_all_reconciled(
    srv: Any, kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    for name in ("keep", "change", "remove"):
        kube.client.create(configmap(name, data={"v": "0"}))
    paused, resume = threading.Event(), threading.Event()

    def hold(event: Any, queue: Any) -> None:
        """Keeps the ConfigMap informer's thread in a handler: it reads no watch events meanwhile."""
        if event.object["metadata"]["name"] == "pause":
            paused.set()
            assert resume.wait(20)

    mgr = make_manager()
    seen = Observed()
    (
        mcruntime.controller_managed_by(mgr)
        .named("recovery")
        .for_("v1/ConfigMap")
        .watches(Kind("v1/ConfigMap", Funcs(create=hold)))
        .complete(seen.reconciler(mgr))
    )
    mgr.start()
    seen.wait_seen({"keep": {"v": "0"}, "change": {"v": "0"}, "remove": {"v": "0"}})

    kube.client.create(configmap("pause"))
    assert paused.wait(10)
    srv.drop_watches()
    kube.client.create(configmap("new", data={"v": "1"}))
    kube.client.patch("v1/ConfigMap", "change", {"data": {"v": "1"}}, "default")
    kube.client.delete("v1/ConfigMap", "remove", "default")
    kube.client.create(configmap("brief"))
    kube.client.delete("v1/ConfigMap", "brief", "default")
    srv.compact()
    resume.set()

    seen.wait_seen({"new": {"v": "1"}, "change": {"v": "1"}, "remove": GONE, "pause": {}})
    kube.client.create(configmap("after"))
    seen.wait_seen({"after": {}})
    assert seen.count("keep") == 1, "the relist delivers only the difference"
    assert seen.count("brief") == 0, (
        "an object created and deleted while disconnected was never seen"
    )
    informer = mgr.get_cluster("").cache.get_informer("v1/ConfigMap")
    assert sorted(o["metadata"]["name"] for o in informer.store.list()) == [
        "after",
        "change",
        "keep",
        "new",
        "pause",
    ]


def test_changes_after_an_api_server_restart_are_all_reconciled(
    srv: Any, kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    for name in ("stay", "edit", "doomed"):
        kube.client.create(configmap(name, data={"v": "0"}))
    mgr = make_manager()
    seen = Observed()
    mcruntime.controller_managed_by(mgr).named("restart").for_("v1/ConfigMap").complete(
        seen.reconciler(mgr)
    )
    mgr.start()
    seen.wait_seen({"stay": {"v": "0"}, "edit": {"v": "0"}, "doomed": {"v": "0"}})
    informer = mgr.get_cluster("").cache.get_informer("v1/ConfigMap")

    srv.stop()
    wait_for(lambda: informer.last_error is not None, what="the informer noticed the outage")
    srv.start()
    kube.client.create(configmap("born", data={"v": "1"}))
    kube.client.patch("v1/ConfigMap", "edit", {"data": {"v": "1"}}, "default")
    kube.client.delete("v1/ConfigMap", "doomed", "default")

    seen.wait_seen({"born": {"v": "1"}, "edit": {"v": "1"}, "doomed": GONE})
    wait_for(lambda: informer.last_error is None, what="the informer recovered")
    assert seen.count("stay") == 1


def test_restart_with_compacted_history_relists_and_catches_up(
    srv: Any, kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    kube.client.create(configmap("old", data={"v": "0"}))
    mgr = make_manager()
    seen = Observed()
    mcruntime.controller_managed_by(mgr).named("restart-410").for_("v1/ConfigMap").complete(
        seen.reconciler(mgr)
    )
    mgr.start()
    seen.wait_seen({"old": {"v": "0"}})
    informer = mgr.get_cluster("").cache.get_informer("v1/ConfigMap")

    srv.stop()
    wait_for(lambda: informer.last_error is not None, what="the informer noticed the outage")
    srv.start()
    kube.client.patch("v1/ConfigMap", "old", {"data": {"v": "1"}}, "default")
    kube.client.create(configmap("fresh"))
    srv.compact()
    srv.drop_watches()
    kube.client.create(configmap("latest"))

    seen.wait_seen({"old": {"v": "1"}, "fresh": {}, "latest": {}})
