"""One process serves a fleet of 100 embedded clusters with three live watches on each."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client import ApiClient

from mcruntime._threads import start_thread, thread_name
from mcruntime.envtest import Fleet
from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import configmap, watch_events

CLUSTERS = 100

pytestmark = pytest.mark.timeout(60)


class Watcher:
    """One watch in its own thread: ``ready`` once the initial events arrived, ``seen`` once
    the object named ``target`` arrived afterwards."""

    def __init__(self, cluster: str, what: str, func: Callable[..., Any], *args: Any) -> None:
        self.cluster, self.what = cluster, what
        self.ready = threading.Event()
        self.seen = threading.Event()
        self.error: BaseException | None = None

        def until(events: list[dict[str, Any]]) -> bool:
            names = [e["raw_object"]["metadata"]["name"] for e in events if e["type"] != "BOOKMARK"]
            if names:
                self.ready.set()
            if "target" in names:
                self.seen.set()
                return True
            return False

        def run() -> None:
            try:
                watch_events(func, *args, until=until, timeout=45)
            except BaseException as e:
                self.error = e
                self.ready.set()

        self.thread = start_thread(run, thread_name("conformance-scale", cluster, what))


def wait_all(events: list[threading.Event], deadline: float) -> list[int]:
    """Indexes of events still unset at ``deadline`` (monotonic)."""
    for e in events:
        e.wait(max(0.0, deadline - time.monotonic()))
    return [i for i, e in enumerate(events) if not e.is_set()]


def test_hundred_clusters_deliver_events_on_three_hundred_concurrent_watches(
    kube_backend: KubeBackend, make_envtest_fleet: Callable[..., Fleet]
) -> None:
    kube_backend.require_server("needs embedded servers to build a 100-cluster fleet")
    began = time.monotonic()
    fleet = make_envtest_fleet(CLUSTERS, prefix="scale")
    assert len(fleet.names) == CLUSTERS
    assert len({fleet[n].port for n in fleet.names}) == CLUSTERS

    apis: dict[str, ApiClient] = {}
    watchers: list[Watcher] = []
    try:
        for name in fleet.names:
            api = config.new_client_from_config_dict(fleet[name].kubeconfig())
            apis[name] = api
            core = client.CoreV1Api(api)
            core.create_namespaced_config_map("default", configmap("seed"))
            core.create_namespaced_secret("default", {"metadata": {"name": "seed"}})
            watchers += [
                Watcher(name, "configmaps", core.list_namespaced_config_map, "default"),
                Watcher(name, "secrets", core.list_namespaced_secret, "default"),
                Watcher(name, "namespaces", core.list_namespace),
            ]
        late = wait_all([w.ready for w in watchers], time.monotonic() + 30)
        assert not late, f"{len(late)} watches never started, e.g. {watchers[late[0]].cluster}"
        assert [w for w in watchers if w.error] == []

        for name, api in apis.items():
            core = client.CoreV1Api(api)
            core.create_namespaced_config_map("default", configmap("target", {"cluster": name}))
            core.create_namespaced_secret("default", {"metadata": {"name": "target"}})
            core.create_namespace({"metadata": {"name": "target"}})

        missed = wait_all([w.seen for w in watchers], time.monotonic() + 30)
        assert not missed, "no event on " + ", ".join(
            f"{watchers[i].cluster}/{watchers[i].what}" for i in missed[:10]
        )
        errors = [(w.cluster, w.what, w.error) for w in watchers if w.error]
        assert errors == []
        for w in watchers:
            w.thread.join(10)
        assert not [w for w in watchers if w.thread.is_alive()]
    finally:
        for api in apis.values():
            api.close()
    assert time.monotonic() - began < 60
