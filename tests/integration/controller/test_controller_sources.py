"""Sources and handlers: a Channel fed from code, map-function handlers, and field indexes in reconcilers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request
from mcruntime import predicate as p
from mcruntime.cluster import Cluster
from mcruntime.handler import enqueue_requests_from_map_func
from mcruntime.source import Channel
from tests.integration.controller._controller_helpers import Calls, configmap

pytestmark = pytest.mark.timeout(30)


def secret(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
    }


def test_channel_events_enqueue_their_object(make_manager: Callable[..., Manager]) -> None:
    mgr = make_manager()
    calls = Calls()
    plain = Channel()
    mapped = Channel(
        enqueue_requests_from_map_func(lambda o: [("jobs", f"{o['metadata']['name']}-job")])
    )
    filtered = Channel(
        predicates=(p.from_func(lambda o: o["metadata"].get("labels", {}).get("go") == "yes"),)
    )
    (
        mcruntime.controller_managed_by(mgr)
        .named("channels")
        .watches(plain)
        .watches(mapped)
        .watches(filtered)
        .complete(calls.record)
    )
    mgr.start()
    plain.send({"metadata": {"name": "tick", "namespace": "timers"}})
    plain.send({"metadata": {"name": "cluster-wide"}})
    mapped.send({"metadata": {"name": "build"}})
    filtered.send({"metadata": {"name": "blocked", "labels": {"go": "no"}}})
    filtered.send({"metadata": {"name": "passed", "labels": {"go": "yes"}}})
    plain.send({"metadata": {"name": "elsewhere"}}, cluster_name="not-engaged")
    plain.send({"metadata": {"name": "last"}})
    calls.wait_count(1, "last")
    assert set(calls.requests()) == {
        Request("timers", "tick"),
        Request("", "cluster-wide"),
        Request("jobs", "build-job"),
        Request("", "passed"),
        Request("", "last"),
    }


def test_map_function_handler_enqueues_the_mapped_requests(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = Calls()

    def app_of(obj: dict[str, Any]) -> list[Request | tuple[str, str]]:
        app = (obj["metadata"].get("labels") or {}).get("app")
        if not app:
            return []
        return [Request("default", app), ("default", f"{app}-extra")]

    (
        mcruntime.controller_managed_by(mgr)
        .for_("v1/ConfigMap", p.Funcs(create=lambda e: False))
        .watches("v1/Secret", enqueue_requests_from_map_func(app_of))
        .complete(calls.record)
    )
    mgr.start()
    kube.client.create(secret("s1", {"app": "web"}))
    kube.client.create(secret("plain", {}))
    kube.client.create(secret("s2", {"app": "db"}))
    calls.wait(
        lambda c: c.names() >= {"web", "web-extra", "db", "db-extra"}, what="mapped requests"
    )
    assert all(r.namespace == "default" and r.cluster_name == "" for r in calls.requests())
    assert "s1" not in calls.names() and "plain" not in calls.names()

    before = calls.count("web")
    kube.client.delete("v1/Secret", "s1", "default")
    calls.wait_count(before + 1, "web")


def test_field_index_serves_reconciler_lists(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    mgr.get_field_indexer().index_field(
        "v1/ConfigMap", "data.owner", lambda o: (o.get("data") or {}).get("owner")
    )
    owned: dict[str, list[str]] = {}
    calls = Calls()

    def reconcile(req: Request) -> None:
        client = mgr.get_cluster(req.cluster_name).client
        items = client.list("v1/ConfigMap", req.namespace, index=("data.owner", req.name))
        owned[req.name] = sorted(o["metadata"]["name"] for o in items)
        calls.record(req)

    (
        mcruntime.controller_managed_by(mgr)
        .named("by-owner")
        .watches(
            "v1/ConfigMap",
            enqueue_requests_from_map_func(
                lambda o: (
                    [(o["metadata"]["namespace"], o["data"]["owner"])]
                    if (o.get("data") or {}).get("owner")
                    else []
                )
            ),
        )
        .complete(reconcile)
    )
    mgr.start()
    kube.client.create(configmap("a", data={"owner": "alice"}))
    kube.client.create(configmap("b", data={"owner": "alice"}))
    kube.client.create(configmap("c", data={"owner": "bob"}))
    calls.wait(
        lambda c: owned.get("alice") == ["a", "b"] and owned.get("bob") == ["c"],
        what=f"indexed lists {owned}",
    )
    kube.client.patch("v1/ConfigMap", "b", {"data": {"owner": "bob"}}, "default")
    calls.wait(
        lambda c: owned.get("alice") == ["a"] and owned.get("bob") == ["b", "c"],
        what=f"re-indexed {owned}",
    )
