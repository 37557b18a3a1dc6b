"""Fault injection of the embedded server: stop/start, dropped watches, compaction, latency.

Each test uses a private server so the session backend is never disturbed; on
other backends the tests skip.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from mcruntime._threads import start_thread, thread_name
from mcruntime.envtest import APIServer, WaitTimeout, wait_for
from mcruntime.envtest.pytest_plugin import KubeBackend
from tests._connections import established_to

from ._support import configmap, names_of, watch_events

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server(kube_backend: KubeBackend, make_envtest_server: Callable[..., APIServer]) -> APIServer:
    kube_backend.require_server()
    return make_envtest_server("faults")


@pytest.fixture
def server_api(server: APIServer) -> Iterator[ApiClient]:
    from kubernetes import config

    api = config.new_client_from_config_dict(server.kubeconfig())
    api.configuration.retries = 0
    try:
        yield api
    finally:
        api.close()


class BackgroundWatch:
    """A watch on configmaps of ``default`` in a thread; records events and how it ended."""

    def __init__(self, core: client.CoreV1Api, timeout: int = 30) -> None:
        self.events: list[dict[str, Any]] = []
        self.first = threading.Event()
        self.ended = threading.Event()
        self.error: BaseException | None = None

        def run() -> None:
            def until(events: list[dict[str, Any]]) -> bool:
                self.events = list(events)
                self.first.set()
                return False

            try:
                watch_events(
                    core.list_namespaced_config_map, "default", until=until, timeout=timeout
                )
            except BaseException as e:
                self.error = e
            finally:
                self.ended.set()

        self.thread = start_thread(run, thread_name("conformance-watch", "faults"))


def test_stopped_server_refuses_connections_and_restarts_with_port_and_data(
    server: APIServer, server_api: ApiClient
) -> None:
    core = client.CoreV1Api(server_api)
    core.create_namespaced_config_map("default", configmap("kept", {"k": "v"}))
    port = server.port
    server.stop()
    assert not server.running
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.read_namespaced_config_map("kept", "default", _request_timeout=2)
    server.start()
    assert server.running
    assert server.port == port
    assert core.read_namespaced_config_map("kept", "default").data == {"k": "v"}


def test_stop_cuts_open_watches(server: APIServer, server_api: ApiClient) -> None:
    core = client.CoreV1Api(server_api)
    core.create_namespaced_config_map("default", configmap("seen"))
    watch = BackgroundWatch(core)
    assert watch.first.wait(10)
    began = time.monotonic()
    server.stop()
    assert watch.ended.wait(10), "watch still open after stop()"
    assert time.monotonic() - began < 10
    server.start()


def test_drop_watches_ends_streams_and_keeps_serving(
    server: APIServer, server_api: ApiClient
) -> None:
    core = client.CoreV1Api(server_api)
    core.create_namespaced_config_map("default", configmap("first"))
    watches = [BackgroundWatch(core) for _ in range(3)]
    for w in watches:
        assert w.first.wait(10)
    server.drop_watches()
    for w in watches:
        assert w.ended.wait(10), "watch still open after drop_watches()"
        assert w.error is None or not isinstance(w.error, ApiException), w.error
        assert names_of(w.events) == ["first"]
    assert server.running
    core.create_namespaced_config_map("default", configmap("second"))
    events = watch_events(
        core.list_namespaced_config_map,
        "default",
        until=lambda ev: "second" in names_of(ev),
        timeout=10,
    )
    assert sorted(names_of(events)) == ["first", "second"]


def test_compact_forces_relist_then_watch_resumes(server: APIServer, server_api: ApiClient) -> None:
    core = client.CoreV1Api(server_api)
    core.create_namespaced_config_map("default", configmap("a"))
    listed = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", configmap("b"))
    server.compact()
    with pytest.raises(ApiException) as info:
        watch_events(core.list_namespaced_config_map, "default", resource_version=listed, timeout=5)
    assert info.value.status == 410
    relisted = core.list_namespaced_config_map("default")
    assert sorted(i.metadata.name for i in relisted.items) == ["a", "b"]
    core.create_namespaced_config_map("default", configmap("c"))
    events = watch_events(
        core.list_namespaced_config_map,
        "default",
        resource_version=relisted.metadata.resource_version,
        until=lambda ev: "c" in names_of(ev),
        timeout=10,
    )
    assert names_of(events) == ["c"]


def test_latency_delays_every_request(server: APIServer, server_api: ApiClient) -> None:
    core = client.CoreV1Api(server_api)
    core.list_namespaced_config_map("default")
    server.latency = 0.2
    for call in (
        lambda: core.list_namespaced_config_map("default"),
        lambda: core.create_namespaced_config_map("default", configmap("slow")),
        lambda: core.read_namespaced_config_map("slow", "default"),
    ):
        began = time.monotonic()
        call()
        assert time.monotonic() - began >= 0.2
    server.latency = 0.0


def test_resource_version_tracks_the_latest_write(server: APIServer, server_api: ApiClient) -> None:
    core = client.CoreV1Api(server_api)
    created = core.create_namespaced_config_map("default", configmap("rv"))
    assert server.resource_version == created.metadata.resource_version
    patched = core.patch_namespaced_config_map("rv", "default", {"data": {"x": "y"}})
    assert server.resource_version == patched.metadata.resource_version


def test_frozen_server_accepts_reads_and_never_answers_until_thawed(
    server: APIServer, server_api: ApiClient
) -> None:
    core = client.CoreV1Api(server_api)
    core.create_namespaced_config_map("default", configmap("before"))
    server.freeze()
    assert server.frozen
    began = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError) as info:
        core.read_namespaced_config_map("before", "default", _request_timeout=(2, 0.5))
    assert "Read timed out" in str(info.value)  # connected, then no answer: no refusal
    assert time.monotonic() - began >= 0.5
    # a write sent while frozen is not applied until the server thaws
    created: list[Any] = []
    writer = start_thread(
        lambda: created.append(
            client.CoreV1Api(server_api).create_namespaced_config_map(
                "default", configmap("during")
            )
        ),
        thread_name("conformance-writer", "faults"),
    )
    writer.join(0.5)
    assert writer.is_alive() and not created
    server.thaw()
    assert not server.frozen
    writer.join(10)
    assert created and created[0].metadata.name == "during"
    assert core.read_namespaced_config_map("before", "default").metadata.name == "before"


def test_a_frozen_server_answers_once_restarted(server: APIServer, server_api: ApiClient) -> None:
    # a hung kube-apiserver that is killed and started again answers: the restart ends
    # the hang, as stop() and start() do here
    core = client.CoreV1Api(server_api)
    core.create_namespaced_config_map("default", configmap("kept"))
    server.freeze()
    server.stop()
    server.start()
    assert not server.frozen
    read = core.read_namespaced_config_map("kept", "default", _request_timeout=(2, 2))
    assert read.metadata.name == "kept"


def test_frozen_server_keeps_watch_sockets_open_and_silent(
    server: APIServer, server_api: ApiClient
) -> None:
    core = client.CoreV1Api(server_api)
    core.create_namespaced_config_map("default", configmap("seen"))
    watch = BackgroundWatch(core)
    assert watch.first.wait(10)
    server.freeze()
    from kubernetes import config

    config_api = config.new_client_from_config_dict(server.kubeconfig())
    try:
        other = client.CoreV1Api(config_api)
        # writes through another path are held too, so the watch has nothing to say
        holder = start_thread(
            lambda: other.create_namespaced_config_map("default", configmap("late")),
            thread_name("conformance-writer", "faults"),
        )
        holder.join(0.5)
        assert holder.is_alive()
        assert not watch.ended.is_set(), "a frozen server must keep the watch socket open"
        assert names_of(watch.events) == ["seen"]
        assert established_to(server.port) >= 2
        server.thaw()
        holder.join(10)
        with contextlib.suppress(WaitTimeout):  # the assertion below shows the events seen
            wait_for(lambda: "late" in names_of(watch.events), timeout=10, interval=0.05)
        assert names_of(watch.events) == ["seen", "late"]
    finally:
        server.thaw()
        config_api.close()
