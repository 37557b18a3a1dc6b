"""RESTClient against an embedded API server: JSON requests, typed errors, watches that stop fast."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client import ApiClient, Configuration

from mcruntime.client import RESTClient, RESTMapper
from mcruntime.cluster import Cluster
from mcruntime.errors import (
    AlreadyExists,
    ClusterLeft,
    Conflict,
    Forbidden,
    Gone,
    NotFound,
    Unauthorized,
    Unreachable,
)
from tests._logs import logged

pytestmark = pytest.mark.timeout(60)


def _cm(ns: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}}


def test_request_returns_plain_dicts(rest: RESTClient, ns: str) -> None:
    created = rest.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body=_cm(ns, "a"))
    assert type(created) is dict and created["metadata"]["name"] == "a"
    listed = rest.request("GET", f"/api/v1/namespaces/{ns}/configmaps", query={"limit": 10})
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]


def test_errors_carry_status_and_cluster_name(rest: RESTClient, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    with pytest.raises(NotFound) as err:
        rest.request("GET", f"{path}/missing")
    assert str(err.value).startswith("[cluster c1] ") and "missing" in str(err.value)
    assert err.value.status == 404 and err.value.reason == "NotFound"
    created = rest.request("POST", path, body=_cm(ns, "b"))
    with pytest.raises(AlreadyExists):
        rest.request("POST", path, body=_cm(ns, "b"))
    rest.request("PUT", f"{path}/b", body={**created, "data": {"x": "1"}})
    with pytest.raises(Conflict):
        rest.request("PUT", f"{path}/b", body={**created, "data": {"x": "2"}})


def test_watch_streams_events_in_order(rest: RESTClient, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    start_rv = rest.request("GET", path)["metadata"]["resourceVersion"]
    with rest.watch(path, query={"resourceVersion": start_rv}) as stream:
        rest.request("POST", path, body=_cm(ns, "w"))
        rest.request("DELETE", f"{path}/w")
        events = []
        for ev in stream:
            events.append((ev["type"], ev["object"]["metadata"]["name"]))
            if len(events) == 2:
                break
    assert events == [("ADDED", "w"), ("DELETED", "w")]


def test_close_from_another_thread_ends_a_blocked_watch_promptly(rest: RESTClient, ns: str) -> None:
    stream = rest.watch(f"/api/v1/namespaces/{ns}/configmaps")
    blocked = threading.Event()
    ended = threading.Event()
    seen: list[Any] = []

    def consume() -> None:
        blocked.set()
        seen.extend(stream)
        ended.set()

    t = threading.Thread(target=consume, name="test-watch-consumer")
    t.start()
    assert blocked.wait(5)
    assert not ended.wait(0.3)  # no events: the iteration really is blocked on the socket
    began = time.monotonic()
    stream.close()
    assert ended.wait(2), "iteration did not end after close()"
    assert time.monotonic() - began < 1.0
    t.join(2)
    assert seen == [] and stream.closed


def test_closing_the_client_ends_its_watches(server: Any, ns: str) -> None:
    api = ApiClient(_config(server))
    rest = RESTClient(api, cluster_name="temp")
    stream = rest.watch(f"/api/v1/namespaces/{ns}/configmaps")
    done = threading.Event()

    def consume() -> None:
        list(stream)
        done.set()

    t = threading.Thread(target=consume, name="test-watch-consumer")
    t.start()
    rest.close()
    assert done.wait(2)
    with pytest.raises(ClusterLeft, match=r"\[cluster temp\] the cluster left"):
        rest.request("GET", "/api")
    t.join(2)


def _config(server: Any) -> Configuration:
    from mcruntime._kubeconfig import load_config

    cfg: Configuration = load_config(config_dict=server.kubeconfig())
    return cfg


def test_unreachable_names_cluster_and_address_never_the_token(server: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubeconfig = server.kubeconfig()
    kubeconfig["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{port}"
    kubeconfig["users"][0]["user"]["token"] = "top-secret-token"
    from mcruntime._kubeconfig import load_config

    rest = RESTClient(ApiClient(load_config(config_dict=kubeconfig)), cluster_name="eu-1")
    with pytest.raises(Unreachable) as err:
        rest.request("GET", "/api")
    msg = str(err.value)
    assert f"127.0.0.1:{port}" in msg and "eu-1" in msg and "refused" in msg
    assert "top-secret-token" not in msg
    with pytest.raises(Unreachable):
        rest.watch("/api/v1/configmaps")


def test_discovery_is_lazy_per_group_version(
    rest: RESTClient, wait_until: Callable[..., Any]
) -> None:
    mapper = RESTMapper(rest)
    assert mapper.mapping("v1/ConfigMap").resource == "configmaps"
    assert set(mapper._gvs) == set()  # a kind every server serves: no discovery at all
    assert mapper.mapping("v1/Pod").resource == "pods"
    assert set(mapper._gvs) == {("", "v1")}


def test_bad_token_is_unauthorized_and_read_only_token_forbidden(server: Any, ns: str) -> None:
    from mcruntime._kubeconfig import load_config

    kubeconfig = server.kubeconfig()
    kubeconfig["users"][0]["user"]["token"] = "wrong-token-value"
    bad = load_config(config_dict=kubeconfig)
    with pytest.raises(Unauthorized) as err:
        RESTClient(ApiClient(bad), cluster_name="c1").request("GET", "/api/v1/namespaces")
    assert "wrong-token-value" not in str(err.value)

    ro = RESTClient(ApiClient(load_config(config_dict=server.kubeconfig(read_only=True))))
    assert ro.request("GET", f"/api/v1/namespaces/{ns}/configmaps")["items"] == []
    with pytest.raises(Forbidden):
        ro.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body=_cm(ns, "x"))


def test_too_old_resource_version_is_gone(rest: RESTClient, server: Any, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rest.request("POST", path, body=_cm(ns, "old"))
    server.compact()
    with pytest.raises(Gone):
        rest.request("GET", path, query={"resourceVersion": "1", "resourceVersionMatch": "Exact"})
    with rest.watch(path, query={"resourceVersion": "1"}) as stream:
        first = next(iter(stream))
    assert first["type"] == "ERROR" and first["object"]["code"] == 410


def test_server_ending_a_watch_ends_the_iteration(rest: RESTClient, server: Any, ns: str) -> None:
    stream = rest.watch(f"/api/v1/namespaces/{ns}/configmaps")
    ended = threading.Event()

    def consume() -> None:
        list(stream)
        ended.set()

    t = threading.Thread(target=consume, name="test-watch-consumer")
    t.start()
    server.drop_watches()
    assert ended.wait(5)
    t.join(2)


def test_more_calls_at_once_than_the_pool_holds_are_said_once_by_cluster(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """More calls at once to one cluster than its pool holds (64 connections; a controller
    with many workers on one cluster): the connections beyond it are closed after their call.
    That is said once, naming the cluster and what to change, not by urllib3 at every call
    (``Connection pool is full, discarding connection: 127.0.0.1``, no cluster named)."""
    server = make_envtest_server("busy")
    server.latency = 0.3  # every call is in flight at once
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="busy")
    caplog.set_level(logging.DEBUG)
    calls = [
        threading.Thread(target=cluster.uncached_client.list, args=("v1/ConfigMap",), daemon=True)
        for _ in range(64 + 16)
    ]
    try:
        for t in calls:
            t.start()
        for t in calls:
            t.join(30)
    finally:
        cluster.stop()
    leaked = [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("urllib3") and r.levelno >= logging.WARNING
    ]
    assert leaked == []
    (said,) = logged(caplog, logging.WARNING, logger="mcruntime.client")
    assert said.startswith("cluster=busy: more calls at once than its 64 pooled connections")
    assert "connection_pool_maxsize" in said


def test_a_cluster_s_client_adds_no_urllib3_retries_line_to_the_debug_log(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """urllib3's retries are off, set so that no pool converts them with a debug line of its
    own (`Converted retries value: False -> Retry(...)`, naming no cluster) for each cluster."""
    caplog.set_level(logging.DEBUG)
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name="quiet")
    try:
        cluster.uncached_client.list("v1/ConfigMap", namespace="default")
    finally:
        cluster.stop()
    assert [r.getMessage() for r in caplog.records if r.name == "urllib3.util.retry"] == []
