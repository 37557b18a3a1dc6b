"""Predicates filter update events before they reach the queue: reconcile counts move only when they should.

Absence is checked without sleeping: after a filtered write the test creates a
marker object (creates pass these predicates). One informer delivers events in
order and one worker takes requests in order, so once the marker is reconciled
a filtered-through request for the earlier write would already have been seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import count
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request
from mcruntime import predicate as p
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.event import CreateEvent, DeleteEvent
from tests.integration.controller._controller_helpers import (
    WIDGET_KIND,
    Calls,
    configmap,
    serves,
    widget,
    widget_crd,
)

pytestmark = pytest.mark.timeout(30)

_markers = count()


def start(
    mgr: Manager, kind: str, *preds: p.Predicate, event_filter: tuple[p.Predicate, ...] = ()
) -> Calls:
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)

    builder = mcruntime.controller_managed_by(mgr).named("watcher").for_(kind, *preds)
    if event_filter:
        builder = builder.with_event_filter(*event_filter)
    builder.complete(reconcile)
    mgr.start()
    return calls


def barrier(calls: Calls, create: Callable[[str], None]) -> None:
    """Create a marker object and wait for its reconcile: every earlier event has been handled."""
    name = f"marker-{next(_markers)}"
    create(name)
    calls.wait_count(1, name)


def test_generation_changed_passes_spec_changes_only(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    kube.client.create(widget_crd())
    wait_for(lambda: serves(kube, WIDGET_KIND), what="Widget served")
    mgr = make_manager()
    calls = start(mgr, WIDGET_KIND, p.GenerationChanged())

    def mark(name: str) -> None:
        kube.client.create(widget(name))

    kube.client.create(widget("w", size=1))
    calls.wait_count(1, "w")

    kube.client.patch(WIDGET_KIND, "w", {"metadata": {"labels": {"a": "b"}}}, "default")
    kube.client.patch_status(WIDGET_KIND, "w", {"status": {"observedSize": 1}}, "default")
    barrier(calls, mark)
    assert calls.count("w") == 1, "label and status writes keep the generation: filtered"

    updated = kube.client.patch(WIDGET_KIND, "w", {"spec": {"size": 2}}, "default")
    assert updated["metadata"]["generation"] == 2
    calls.wait_count(2, "w")
    barrier(calls, mark)
    assert calls.count("w") == 2


def test_label_changed_event_filter_ignores_data_changes(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    calls = start(mgr, "v1/ConfigMap", event_filter=(p.LabelChanged(),))

    def mark(name: str) -> None:
        kube.client.create(configmap(name))

    kube.client.create(configmap("cm", data={"k": "1"}))
    calls.wait_count(1, "cm")

    kube.client.patch("v1/ConfigMap", "cm", {"data": {"k": "2"}}, "default")
    kube.client.patch("v1/ConfigMap", "cm", {"metadata": {"annotations": {"x": "y"}}}, "default")
    barrier(calls, mark)
    assert calls.count("cm") == 1, "data and annotation changes are filtered"

    kube.client.patch("v1/ConfigMap", "cm", {"metadata": {"labels": {"tier": "web"}}}, "default")
    calls.wait_count(2, "cm")
    barrier(calls, mark)
    assert calls.count("cm") == 2


def test_combined_predicates_and_custom_funcs(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    mgr = make_manager()
    # updates pass when labels or annotations changed; nothing named "skip-*" ever passes
    not_skipped = p.from_func(lambda o: not o["metadata"]["name"].startswith("skip-"))
    calls = start(mgr, "v1/ConfigMap", (p.LabelChanged() | p.AnnotationChanged()) & not_skipped)

    def mark(name: str) -> None:
        kube.client.create(configmap(name))

    kube.client.create(configmap("skip-me"))
    kube.client.create(configmap("cm"))
    calls.wait_count(1, "cm")

    kube.client.patch("v1/ConfigMap", "cm", {"metadata": {"annotations": {"a": "1"}}}, "default")
    calls.wait_count(2, "cm")
    kube.client.patch("v1/ConfigMap", "cm", {"data": {"k": "v"}}, "default")
    kube.client.patch("v1/ConfigMap", "skip-me", {"metadata": {"labels": {"a": "1"}}}, "default")
    barrier(calls, mark)
    assert calls.count("cm") == 2
    assert calls.count("skip-me") == 0


def test_not_inverts_update_decisions(kube: Cluster, make_manager: Callable[..., Manager]) -> None:
    mgr = make_manager()
    # creates and deletes pass (Funcs lets them through); updates pass only without a label change
    calls = start(
        mgr, "v1/ConfigMap", p.or_(p.not_(p.LabelChanged()), p.Funcs(update=lambda e: False))
    )

    def mark(name: str) -> None:
        kube.client.create(configmap(name))

    kube.client.create(configmap("cm"))
    calls.wait_count(1, "cm")
    kube.client.patch("v1/ConfigMap", "cm", {"metadata": {"labels": {"a": "1"}}}, "default")
    barrier(calls, mark)
    assert calls.count("cm") == 1
    kube.client.patch("v1/ConfigMap", "cm", {"data": {"k": "v"}}, "default")
    calls.wait_count(2, "cm")
    kube.client.delete("v1/ConfigMap", "cm", "default")
    calls.wait_count(3, "cm")


def test_a_delete_the_watch_missed_reaches_the_predicates_with_its_state_unknown(
    srv: Any, kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    # as controller-runtime's DeleteStateUnknown: a delete found by the relist after a 410
    # (the object's final state was never seen) says so; one the watch told does not
    mgr = make_manager()
    paused, resume = threading.Event(), threading.Event()
    deletes: list[tuple[str, bool]] = []

    def created(e: CreateEvent) -> bool:
        if e.object["metadata"]["name"] == "pause":  # holds the thread reading the watches
            paused.set()
            assert resume.wait(20)
        return True

    def deleted(e: DeleteEvent) -> bool:
        deletes.append((e.object["metadata"]["name"], e.delete_state_unknown))
        return True

    calls = start(mgr, "v1/ConfigMap", p.Funcs(create=created, delete=deleted))
    for name in ("told", "missed"):
        kube.client.create(configmap(name))
        calls.wait_count(1, name)
    kube.client.delete("v1/ConfigMap", "told", "default")
    calls.wait_count(2, "told")
    kube.client.create(configmap("pause"))
    assert paused.wait(10)
    srv.drop_watches()  # the watch is down while "missed" is deleted ...
    kube.client.delete("v1/ConfigMap", "missed", "default")
    srv.compact()  # ... and cannot resume: the relist finds it gone
    resume.set()
    calls.wait_count(2, "missed")
    assert deletes == [("told", False), ("missed", True)]
