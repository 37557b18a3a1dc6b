"""WATCH: initial events, resuming from a resourceVersion, selectors, bookmarks, timeouts, 410."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from mcruntime.envtest.pytest_plugin import KubeBackend

from ._support import (
    SYSTEM_NAMES,
    assert_status,
    configmap,
    names_of,
    pod,
    raw,
    rv,
    unique,
    watch_events,
)

pytestmark = pytest.mark.timeout(40)

Events = list[dict[str, Any]]


def kinds_and_names(events: Events) -> list[tuple[str, str]]:
    return [
        (e["type"], e["raw_object"]["metadata"]["name"])
        for e in events
        if e["type"] not in ("BOOKMARK", "ERROR")
        and e["raw_object"]["metadata"]["name"] not in SYSTEM_NAMES
    ]


@pytest.mark.parametrize("resource_version", [None, "0"], ids=["unset", "zero"])
def test_watch_replays_existing_objects_as_added_then_streams_live(
    core: client.CoreV1Api, ns: str, resource_version: str | None
) -> None:
    core.create_namespaced_config_map(ns, configmap("a"))
    core.create_namespaced_config_map(ns, configmap("b"))
    wrote: list[str] = []

    def until(events: Events) -> bool:
        if not wrote and {"a", "b"} <= set(names_of(events)):
            core.create_namespaced_config_map(ns, configmap("c"))
            wrote.append("c")
        return "c" in names_of(events)

    kwargs = {} if resource_version is None else {"resource_version": resource_version}
    events = watch_events(core.list_namespaced_config_map, ns, until=until, timeout=10, **kwargs)
    seen = kinds_and_names(events)
    assert sorted(seen[:2]) == [("ADDED", "a"), ("ADDED", "b")]
    assert seen[2:] == [("ADDED", "c")]


def test_watch_from_resource_version_delivers_every_later_event_in_order(
    core: client.CoreV1Api, ns: str
) -> None:
    start = core.create_namespaced_config_map(ns, configmap("before")).metadata.resource_version
    core.create_namespaced_config_map(ns, configmap("a", {"v": "1"}))
    core.patch_namespaced_config_map("a", ns, {"data": {"v": "2"}})
    core.patch_namespaced_config_map("before", ns, {"metadata": {"labels": {"x": "y"}}})
    core.delete_namespaced_config_map("a", ns)
    core.create_namespaced_config_map(ns, configmap("b"))

    events = watch_events(
        core.list_namespaced_config_map,
        ns,
        resource_version=start,
        until=lambda ev: ("ADDED", "b") in kinds_and_names(ev),
        timeout=10,
    )
    assert kinds_and_names(events) == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("MODIFIED", "before"),
        ("DELETED", "a"),
        ("ADDED", "b"),
    ]
    versions = [rv(e["raw_object"]) for e in events]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    assert all(v > int(start) for v in versions)
    data = [e["raw_object"].get("data") for e in events[:2]]
    assert data == [{"v": "1"}, {"v": "2"}]
    assert events[3]["raw_object"]["data"] == {"v": "2"}
    assert events[0]["raw_object"]["kind"] == "ConfigMap"
    assert events[0]["raw_object"]["apiVersion"] == "v1"


def test_watch_with_label_selector_sees_objects_entering_and_leaving(
    core: client.CoreV1Api, ns: str
) -> None:
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    core.create_namespaced_config_map(ns, configmap("m", labels={"team": "x"}))
    core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"team": "y"}}})
    core.create_namespaced_config_map(ns, configmap("n", labels={"team": "y"}))
    core.patch_namespaced_config_map("n", ns, {"data": {"still": "y"}})
    core.patch_namespaced_config_map("m", ns, {"metadata": {"labels": {"team": "x"}}})

    events = watch_events(
        core.list_namespaced_config_map,
        ns,
        resource_version=start,
        label_selector="team=x",
        until=lambda ev: len(kinds_and_names(ev)) >= 3,
        timeout=10,
    )
    assert kinds_and_names(events) == [("ADDED", "m"), ("DELETED", "m"), ("ADDED", "m")]


def test_watch_with_field_selector_sees_only_that_object(core: client.CoreV1Api, ns: str) -> None:
    start = core.list_namespaced_config_map(ns).metadata.resource_version
    for name in ("one", "two", "three"):
        core.create_namespaced_config_map(ns, configmap(name))
    core.patch_namespaced_config_map("two", ns, {"data": {"k": "2"}})
    events = watch_events(
        core.list_namespaced_config_map,
        ns,
        resource_version=start,
        field_selector="metadata.name=two",
        until=lambda ev: len(kinds_and_names(ev)) >= 2,
        timeout=10,
    )
    assert kinds_and_names(events) == [("ADDED", "two"), ("MODIFIED", "two")]


def test_watch_across_all_namespaces(core: client.CoreV1Api, ns: str) -> None:
    other = core.create_namespace({"metadata": {"name": unique("other")}}).metadata.name
    try:
        marker = unique("mark")
        core.create_namespaced_config_map(ns, configmap("x", labels={"mark": marker}))
        core.create_namespaced_config_map(other, configmap("x", labels={"mark": marker}))
        events = watch_events(
            core.list_config_map_for_all_namespaces,
            label_selector=f"mark={marker}",
            until=lambda ev: len(kinds_and_names(ev)) >= 2,
            timeout=10,
        )
        assert sorted(e["raw_object"]["metadata"]["namespace"] for e in events) == sorted(
            [ns, other]
        )
    finally:
        core.delete_namespace(other)


def test_watch_sends_bookmarks_when_allowed(core: client.CoreV1Api, ns: str) -> None:
    written = rv(core.create_namespaced_config_map(ns, configmap(unique("cm"))))
    events = watch_events(
        core.list_namespaced_config_map,
        ns,
        resource_version=str(written),
        allow_watch_bookmarks=True,
        until=lambda ev: any(e["type"] == "BOOKMARK" for e in ev),
        timeout=3,
    )
    bookmarks = [e["raw_object"] for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, f"no BOOKMARK within the watch's 3s: {events}"
    mark = bookmarks[0]
    assert mark["kind"] == "ConfigMap"
    assert mark["apiVersion"] == "v1"
    assert int(mark["metadata"]["resourceVersion"]) >= written


def test_timeout_seconds_ends_the_stream(core: client.CoreV1Api, ns: str) -> None:
    # from the list's resourceVersion: a real cluster's new namespace is not empty (kube-root-ca.crt)
    listed = core.list_namespaced_config_map(ns).metadata.resource_version
    began = time.monotonic()
    events = watch_events(core.list_namespaced_config_map, ns, resource_version=listed, timeout=1)
    elapsed = time.monotonic() - began
    assert [e for e in events if e["type"] != "BOOKMARK"] == []
    assert 0.5 <= elapsed < 10


def test_watch_from_compacted_resource_version_is_expired(
    kube_backend: KubeBackend, api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    server = kube_backend.require_server("needs the embedded server's compact()")
    old = core.create_namespaced_config_map(ns, configmap("old")).metadata.resource_version
    for i in range(3):
        core.patch_namespaced_config_map("old", ns, {"data": {"i": str(i)}})
    server.compact()

    resp = raw(
        api,
        "GET",
        f"/api/v1/namespaces/{ns}/configmaps",
        query=[("watch", "true"), ("resourceVersion", old), ("timeoutSeconds", "5")],
    )
    assert resp.status == 200
    lines = [json.loads(line) for line in resp.data.splitlines() if line.strip()]
    assert [e["type"] for e in lines] == ["ERROR"]
    status = lines[0]["object"]
    assert status["kind"] == "Status"
    assert status["code"] == 410
    assert status["reason"] == "Expired"

    with pytest.raises(ApiException) as info:
        watch_events(core.list_namespaced_config_map, ns, resource_version=old, timeout=5)
    assert info.value.status == 410


def test_deleting_a_namespace_sends_deleted_for_its_objects(core: client.CoreV1Api) -> None:
    doomed = core.create_namespace({"metadata": {"name": unique("doomed")}}).metadata.name
    marker = unique("mark")
    core.create_namespaced_config_map(doomed, configmap("inside", labels={"mark": marker}))
    start = core.list_config_map_for_all_namespaces(
        label_selector=f"mark={marker}"
    ).metadata.resource_version
    core.delete_namespace(doomed)
    events = watch_events(
        core.list_config_map_for_all_namespaces,
        label_selector=f"mark={marker}",
        resource_version=start,
        until=lambda ev: ("DELETED", "inside") in kinds_and_names(ev),
        timeout=30,
    )
    assert ("DELETED", "inside") in kinds_and_names(events)
    assert events[-1]["raw_object"]["metadata"]["namespace"] == doomed


def test_watch_with_a_pods_field_labels(core: client.CoreV1Api, ns: str) -> None:
    # spec.host is converted to spec.nodeName; spec.hostNetwork unset is "false"
    start = core.list_namespaced_pod(ns).metadata.resource_version
    core.create_namespaced_pod(ns, pod("host", nodeName="node-a", hostNetwork=True))
    core.create_namespaced_pod(ns, pod("elsewhere", nodeName="node-b"))
    core.create_namespaced_pod(ns, pod("bound", nodeName="node-a"))
    core.patch_namespaced_pod("bound", ns, {"metadata": {"labels": {"seen": "yes"}}})
    events = watch_events(
        core.list_namespaced_pod,
        ns,
        resource_version=start,
        field_selector="spec.host=node-a,spec.hostNetwork=false",
        until=lambda ev: len(kinds_and_names(ev)) >= 2,
        timeout=10,
    )
    assert kinds_and_names(events) == [("ADDED", "bound"), ("MODIFIED", "bound")]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            [("watch", "true"), ("sendInitialEvents", "true")],
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
            "resourceVersionMatch to NotOlderThan",
        ),
        (
            [("watch", "true"), ("resourceVersion", "1"), ("resourceVersionMatch", "NotOlderThan")],
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
            "sendInitialEvents is provided",
        ),
        (
            [("sendInitialEvents", "true")],
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ),
        (
            [("resourceVersionMatch", "Exact")],
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
            "resourceVersion is provided",
        ),
        (
            [("resourceVersion", "0"), ("resourceVersionMatch", "Exact")],
            'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
            'resourceVersion "0"',
        ),
    ],
    ids=[
        "initial-events-without-match",
        "match-without-initial-events",
        "list-initial-events",
        "match-without-rv",
        "exact-rv-0",
    ],
)
def test_list_and_watch_options_that_conflict_are_refused(
    api: ApiClient, ns: str, query: list[tuple[str, str]], message: str
) -> None:
    # apimachinery's ValidateListOptions, before anything is listed or watched
    resp = raw(api, "GET", f"/api/v1/namespaces/{ns}/configmaps", query=query)
    body = assert_status(resp, 422, "Invalid")
    assert body["message"] == f'ListOptions.meta.k8s.io "" is invalid: {message}'
    assert body["details"]["kind"] == "ListOptions"


def test_a_watch_list_of_a_resource_version_not_reached_ends_with_the_timeout_as_its_event(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # the cacher waits up to 3 s for a watch sending initial events to reach its
    # resourceVersion (waitUntilWatchCacheFreshAndForceAllEvents), then the watch answers
    # 200 and the 504 Status is its one event
    path = f"/api/v1/namespaces/{ns}/configmaps"
    current = int(core.list_namespaced_config_map(ns).metadata.resource_version)
    asked = current + 1_000_000
    query = [
        ("watch", "true"),
        ("sendInitialEvents", "true"),
        ("resourceVersionMatch", "NotOlderThan"),
        ("allowWatchBookmarks", "true"),
        ("resourceVersion", str(asked)),
        ("timeoutSeconds", "10"),
    ]
    began = time.monotonic()
    resp = raw(api, "GET", path, query=query, timeout=20)
    took = time.monotonic() - began
    assert resp.status == 200, resp.data
    (event,) = [json.loads(line) for line in resp.data.splitlines() if line.strip()]
    assert event["type"] == "ERROR"
    status = event["object"]
    assert (status["code"], status["reason"]) == (504, "Timeout")
    assert status["message"].startswith(f"Timeout: Too large resource version: {asked}, current: ")
    assert status["details"]["causes"] == [
        {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    ]
    assert 2.9 <= took < 8, took


def test_a_watch_with_send_initial_events_false_starts_from_now(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # the watch-list protocol's other half: no synthetic ADDED events for what exists
    core.create_namespaced_config_map(ns, configmap("before"))
    path = f"/api/v1/namespaces/{ns}/configmaps"

    def added(extra: list[tuple[str, str]]) -> list[str]:
        query = [("watch", "true"), ("timeoutSeconds", "1"), *extra]
        lines = raw(api, "GET", path, query=query).data.splitlines()
        events = [json.loads(line) for line in lines if line.strip()]
        return [e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"]

    assert "before" in added([])  # resourceVersion unset: the state first
    assert added([("sendInitialEvents", "false"), ("resourceVersionMatch", "NotOlderThan")]) == []


def test_a_watch_from_a_resource_version_not_reached_sends_only_what_comes_after_it(
    api: ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    # a plain watch does not wait for its resourceVersion (only a watch list does): it
    # starts at once, and the watch cache sends no event at or below it, bookmarks included
    path = f"/api/v1/namespaces/{ns}/configmaps"
    current = int(core.list_namespaced_config_map(ns).metadata.resource_version)
    asked = current + 3
    query = [
        ("watch", "true"),
        ("allowWatchBookmarks", "true"),
        ("resourceVersion", str(asked)),
        ("timeoutSeconds", "2"),
    ]
    method, url, headers, body, post = api.param_serialize(
        "GET", path, query_params=query, auth_settings=["BearerToken"]
    )
    # call_api returns once the server answered the watch's headers: the watch is open
    resp = api.call_api(method, url, headers, body, post, _request_timeout=20)
    assert resp.status == 200
    written = {
        name: rv(core.create_namespaced_config_map(ns, configmap(name)))
        for name in ("a", "b", "c", "d", "e")
    }
    events = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    after = [name for name, version in written.items() if version > asked]
    assert after, written
    assert names_of_raw(events) == after
    marks = [
        int(e["object"]["metadata"]["resourceVersion"]) for e in events if e["type"] == "BOOKMARK"
    ]
    assert all(mark >= asked for mark in marks), (marks, asked)


def names_of_raw(events: Events) -> list[str]:
    return [
        e["object"]["metadata"]["name"]
        for e in events
        if e["type"] not in ("BOOKMARK", "ERROR")
        and e["object"]["metadata"]["name"] not in SYSTEM_NAMES
    ]
