"""core/v1 and events.k8s.io/v1 Events are one set of objects, as in kube-apiserver."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client

from tests.unit.envtest.conftest import WatchReader

pytestmark = pytest.mark.timeout(30)

CORE_EVENT = {
    "metadata": {"name": "web.1"},
    "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "default", "uid": "u1"},
    "reason": "ScalingReplicaSet",
    "message": "Scaled up to 2",
    "type": "Normal",
    "source": {"component": "deployment-controller"},
    "count": 3,
    "firstTimestamp": "2026-01-01T00:00:00Z",
    "lastTimestamp": "2026-01-01T00:01:00Z",
    # the typed events.k8s.io model needs it (a real server sends null for core events without),
    # and an Event with it names what reported it and its action (kube-apiserver's validation)
    "eventTime": "2026-01-01T00:01:00.000000Z",
    "reportingComponent": "deployment-controller",
    "reportingInstance": "kcm-0",
    "action": "Scale",
}


def test_an_event_written_through_core_reads_through_events_k8s_io(api: client.ApiClient) -> None:
    core, events = client.CoreV1Api(api), client.EventsV1Api(api)
    created = core.create_namespaced_event("default", CORE_EVENT)
    view = events.read_namespaced_event("web.1", "default")
    assert view.metadata.uid == created.metadata.uid
    assert view.metadata.resource_version == created.metadata.resource_version
    assert (view.regarding.name, view.note, view.reason) == (
        "web",
        "Scaled up to 2",
        "ScalingReplicaSet",
    )
    assert (
        view.deprecated_count == 3 and view.deprecated_source.component == "deployment-controller"
    )
    listed = events.list_namespaced_event("default", field_selector="regarding.name=web").items
    assert [e.metadata.name for e in listed] == ["web.1"]
    assert events.list_namespaced_event("default", field_selector="regarding.name=db").items == []


def test_an_event_written_through_events_k8s_io_reads_through_core(api: client.ApiClient) -> None:
    core, events = client.CoreV1Api(api), client.EventsV1Api(api)
    events.create_namespaced_event(
        "default",
        {
            "metadata": {"name": "rec.1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "example.com/ctrl",
            "reportingInstance": "ctrl-0",
            "action": "Reconcile",
            "reason": "Synced",
            "type": "Normal",
            "note": "all good",
            "regarding": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
        },
    )
    ev = core.read_namespaced_event("rec.1", "default")
    assert (ev.message, ev.involved_object.name, ev.reporting_component) == (
        "all good",
        "c",
        "example.com/ctrl",
    )
    # (what it says is fixed through events.k8s.io/v1; its series grows, as tools/events does)
    series = {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}
    events.patch_namespaced_event("rec.1", "default", {"series": series})
    assert core.read_namespaced_event("rec.1", "default").series.count == 2
    events.delete_namespaced_event("rec.1", "default")
    assert core.list_namespaced_event("default").items == []


def test_a_watch_on_events_k8s_io_sees_core_writes(
    api: client.ApiClient, watches: Callable[..., WatchReader]
) -> None:
    core, events = client.CoreV1Api(api), client.EventsV1Api(api)
    w = watches(events.list_namespaced_event, "default", resource_version="0")
    core.create_namespaced_event("default", CORE_EVENT)
    ev = w.next_of({"ADDED"})
    assert ev["object"]["apiVersion"] == "events.k8s.io/v1"
    assert ev["object"]["note"] == "Scaled up to 2" and "message" not in ev["object"]
