"""kube-apiserver's validation of Events (``pkg/apis/core/validation/events.go``): the old
rules for every write, the strict ones of ``events.k8s.io/v1`` for what it creates and
updates. A test on envtest that writes Events must fail where a cluster would refuse them."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from ._support import assert_status, raises_status, raw, unique

pytestmark = pytest.mark.timeout(60)

_TIME = "2026-01-01T00:00:00.000000Z"


def _core_event(ns: str, **fields: Any) -> dict[str, Any]:
    """A core/v1 Event as client-go's tools/record writes it (no eventTime)."""
    return {
        "metadata": {"name": unique("ev")},
        "involvedObject": {"kind": "ConfigMap", "name": "web", "namespace": ns},
        "reason": "Synced",
        "message": "synced",
        "type": "Normal",
        "source": {"component": "ctl"},
        "count": 1,
        **fields,
    }


def _v1_event(ns: str, **fields: Any) -> dict[str, Any]:
    """An events.k8s.io/v1 Event as client-go's tools/events writes it."""
    return {
        "metadata": {"name": unique("ev")},
        "eventTime": _TIME,
        "reportingController": "example.com/ctl",
        "reportingInstance": "ctl-0",
        "action": "Reconcile",
        "reason": "Synced",
        "note": "synced",
        "type": "Normal",
        "regarding": {"kind": "ConfigMap", "name": "web", "namespace": ns},
        **fields,
    }


def _fields(status: dict[str, Any]) -> list[str]:
    return [c["field"] for c in status["details"]["causes"]]


def test_a_core_event_is_in_the_namespace_of_its_object(core: client.CoreV1Api, ns: str) -> None:
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_event(
            "default", _core_event(ns, metadata={"name": unique("ev"), "namespace": "default"})
        )
    assert _fields(status) == ["involvedObject.namespace"]
    assert "does not match event.namespace" in status["message"]
    # a cluster-scoped object's Event goes to "default", as client-go writes it
    node = {"kind": "Node", "name": "n1"}
    core.create_namespaced_event("default", _core_event(ns, involvedObject=node))


def test_the_old_rules_let_a_core_event_without_event_time_through(
    core: client.CoreV1Api, ns: str
) -> None:
    """No eventTime: neither the message's length nor the type nor the name is checked
    beyond a path segment (the strict rules are events.k8s.io/v1's)."""
    event = _core_event(ns, message="m" * 2000, type="Info")
    event["metadata"]["name"] = f"system:{unique('role')}.18ec9583b9a9fc2a"
    created = core.create_namespaced_event(ns, event)
    assert len(created.message) == 2000 and created.type == "Info"


def test_a_core_event_with_an_event_time_needs_what_the_new_api_needs(
    core: client.CoreV1Api, ns: str
) -> None:
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_event(ns, _core_event(ns, eventTime=_TIME, message="m" * 1025))
    # required, and not a qualified name: empty, and not matching its pattern
    assert _fields(status) == [
        *["reportingController"] * 3,
        "reportingInstance",
        "action",
        "message",
    ]


@pytest.mark.parametrize(
    ("fields", "refused"),
    [
        ({"eventTime": None}, ["eventTime"]),
        ({"type": "Info"}, ["type"]),
        ({"action": None}, ["action"]),
        ({"reportingController": "not a name!"}, ["reportingController"]),
        ({"note": "n" * 1025}, ["message"]),
        ({"deprecatedCount": 3}, ["count"]),
        ({"deprecatedSource": {"component": "ctl"}}, ["source"]),
        ({"series": {"count": 1, "lastObservedTime": _TIME}}, ["series.count"]),
        ({"metadata": {"name": "Not:A.Subdomain"}}, ["metadata.name"]),
    ],
    ids=[
        "no-event-time",
        "type",
        "no-action",
        "controller",
        "note",
        "count",
        "source",
        "series",
        "name",
    ],
)
def test_events_k8s_io_refuses_what_its_strict_rules_do(
    kube_api_client: client.ApiClient, ns: str, fields: dict[str, Any], refused: list[str]
) -> None:
    event = {k: v for k, v in _v1_event(ns, **fields).items() if v is not None}
    # sent as it is: the typed client refuses an Event without eventTime before sending it
    answer = raw(
        kube_api_client,
        "POST",
        f"/apis/events.k8s.io/v1/namespaces/{ns}/events",
        body=event,
        content_type="application/json",
    )
    assert _fields(assert_status(answer, 422, "Invalid")) == refused


def test_an_event_written_through_events_k8s_io_keeps_what_it_said(
    kube_api_client: client.ApiClient, core: client.CoreV1Api, ns: str
) -> None:
    """Its note, reason, regarding object... are fixed; its series may grow (what client-go's
    tools/events patches). Through core/v1, the old rules only apply."""
    events = client.EventsV1Api(kube_api_client)
    name = events.create_namespaced_event(ns, _v1_event(ns)).metadata.name
    with raises_status(422, "Invalid") as status:
        events.patch_namespaced_event(name, ns, {"note": "changed"})
    assert _fields(status) == ["message"]
    assert "field is immutable" in status["message"]
    series = {"count": 2, "lastObservedTime": _TIME}
    assert events.patch_namespaced_event(name, ns, {"series": series}).series.count == 2
    assert core.patch_namespaced_event(name, ns, {"message": "changed"}).message == "changed"
