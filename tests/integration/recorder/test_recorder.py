"""Event recorders against embedded API servers: events land in the object's own cluster,
repeats are aggregated, posting never blocks, and nothing of a disengaged cluster remains."""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from typing import Any, ClassVar

import pytest

import mcruntime
from mcruntime._threads import mcruntime_threads
from mcruntime.client import Client, Resource
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.metrics import Metrics
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request, reconciling
from mcruntime.recorder import CorrelatorOptions, RecorderProvider

pytestmark = pytest.mark.timeout(60)


def _api(server: Any, name: str) -> Client:
    c = Cluster.from_kubeconfig(server.kubeconfig(), name=name)
    return Client(c.rest, c.rest_mapper, cluster_name=name)


def _events(client: Client, namespace: str = "default") -> list[dict[str, Any]]:
    return client.list("v1/Event", namespace)


def _cm(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


def _ref_of(cm: dict[str, Any]) -> dict[str, str]:
    """The ``involvedObject`` of an Event about ConfigMap ``cm`` (without its resourceVersion)."""
    meta = cm["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "uid": meta["uid"],
    }


def _recorder_threads(cluster: str) -> list[threading.Thread]:
    return [t for t in mcruntime_threads() if t.name == f"mcruntime/recorder/{cluster}"]


def test_reconcile_posts_events_into_the_objects_own_cluster(
    make_envtest_fleet, make_envtest_server
):
    fleet = make_envtest_fleet(2)
    hub = make_envtest_server("hub")
    provider = Provider()
    for name in ("cluster-0", "cluster-1"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(hub.kubeconfig(), provider=provider)
    recorder = mgr.get_event_recorder_for("widget-controller")
    member = _api(fleet["cluster-1"], "cluster-1")
    other = _api(fleet["cluster-0"], "cluster-0")
    created = member.create(_cm("web"))

    def reconcile(req: Request) -> None:
        if req.cluster_name == "cluster-1" and req.name == "web":
            obj = mgr.get_cluster(req.cluster_name).client.get(
                "v1/ConfigMap", req.name, req.namespace
            )
            recorder.eventf(obj, "Warning", "SyncFailed", "cannot sync %s: %s", req.name, "quota")

    mcruntime.controller_managed_by(mgr).named("events").for_("v1/ConfigMap").complete(reconcile)
    with mgr:
        (event,) = wait_for(lambda: _events(member))
    assert _events(other) == [] and _events(_api(hub, "hub")) == []
    assert event["involvedObject"] == {
        **_ref_of(created),
        "resourceVersion": created["metadata"]["resourceVersion"],
    }
    assert (event["type"], event["reason"]) == ("Warning", "SyncFailed")
    assert event["message"] == "cannot sync web: quota" and event["count"] == 1
    assert event["source"]["component"] == "widget-controller" and event["source"]["host"]
    assert event["reportingComponent"] == "widget-controller"
    assert event["reportingInstance"] == event["source"]["host"]
    assert event["firstTimestamp"] == event["lastTimestamp"]
    assert not _recorder_threads("cluster-1")  # the manager stopped its senders


def _provider(server: Any, name: str, **options: Any) -> tuple[RecorderProvider, Cluster]:
    cluster = Cluster.from_kubeconfig(server.kubeconfig(), name=name)
    metrics = Metrics()

    def lookup(n: str) -> Cluster:
        if n != name:
            from mcruntime.errors import ClusterNotFound

            raise ClusterNotFound(name=n)
        return cluster

    return RecorderProvider(lookup, metrics=metrics, **options), cluster


def test_identical_events_become_one_event_with_a_count(envtest_server):
    provider, cluster = _provider(
        envtest_server, "c", correlator_options=CorrelatorOptions(spam_burst=100)
    )
    api = _api(envtest_server, "c")
    obj = api.create(_cm("busy"))
    rec = provider.get_event_recorder_for("ctl")
    try:
        with reconciling(Request("default", "busy", "c")):
            for _ in range(100):
                assert rec.event(obj, "Normal", "Synced", "synced")
        wait_for(lambda: [e.get("count") for e in _events(api)] == [100])
        (event,) = _events(api)
        assert event["firstTimestamp"] <= event["lastTimestamp"]
    finally:
        provider.stop()
        cluster.stop()


def test_repeats_beyond_the_per_object_burst_are_dropped_and_counted(envtest_server):
    provider, cluster = _provider(envtest_server, "c")  # client-go's defaults: burst 25
    api = _api(envtest_server, "c")
    obj = api.create(_cm("spam"))
    rec = provider.get_event_recorder_for("ctl")
    metrics = provider.metrics
    assert metrics is not None
    dropped = {"cluster": "c", "reason": "rate_limited"}
    try:
        for _ in range(40):
            rec.event(obj, "Normal", "Synced", "synced", cluster_name="c")
        wait_for(lambda: metrics.sample("mcruntime_events_dropped_total", dropped) == 15)
        wait_for(lambda: [e.get("count") for e in _events(api)] == [25])
    finally:
        provider.stop()
        cluster.stop()


def test_similar_events_are_combined(envtest_server):
    provider, cluster = _provider(envtest_server, "c")
    api = _api(envtest_server, "c")
    obj = api.create(_cm("similar"))
    rec = provider.get_event_recorder_for("ctl")
    try:
        for i in range(14):
            rec.event(obj, "Normal", "Scaled", f"scaled to {i}", cluster_name="c")
        wait_for(lambda: sum(e.get("count", 1) for e in _events(api)) == 14)
        combined = [e for e in _events(api) if e["message"].startswith("(combined")]
        assert len(_events(api)) == 11 and len(combined) == 1 and combined[0]["count"] == 4
    finally:
        provider.stop()
        cluster.stop()


def test_posting_never_blocks_and_a_full_queue_drops(envtest_server):
    provider, cluster = _provider(envtest_server, "c", queue_size=5, send_timeout=1.0)
    api = _api(envtest_server, "c")
    obj = api.create(_cm("frozen"))
    rec = provider.get_event_recorder_for("ctl")
    envtest_server.freeze()
    try:
        began = time.monotonic()
        queued = [rec.event(obj, "Normal", f"R{i}", "m", cluster_name="c") for i in range(50)]
        assert time.monotonic() - began < 0.5
        assert queued.count(False) >= 40
        assert provider.metrics is not None
        full = provider.metrics.sample(
            "mcruntime_events_dropped_total", {"cluster": "c", "reason": "queue_full"}
        )
        assert full == queued.count(False)
    finally:
        envtest_server.thaw()
        provider.stop()
        cluster.stop()


def test_an_event_outside_a_reconcile_needs_a_cluster_name(envtest_server):
    provider, cluster = _provider(envtest_server, "c")
    rec = provider.get_event_recorder_for("ctl")
    with pytest.raises(ValueError, match="cluster_name="):
        rec.event(_cm("x"), "Normal", "Synced", "m")
    with pytest.raises(ValueError, match="'Normal' or 'Warning'"):
        rec.event(_cm("x"), "Info", "Synced", "m", cluster_name="c")
    provider.stop()
    cluster.stop()


def test_a_message_or_reason_that_is_not_a_str_is_refused_at_the_call(envtest_server, caplog):
    """Accepted, it was dropped later on the cluster's sender thread (``TypeError:
    unhashable type: 'dict'``), opening that cluster's failure streak."""
    provider, cluster = _provider(envtest_server, "c")
    rec = provider.get_event_recorder_for("ctl")
    try:
        with pytest.raises(TypeError, match="^an event's message must be a str, not dict$"):
            rec.event(_cm("x"), "Normal", "Synced", {"keys": 3}, cluster_name="c")
        with pytest.raises(TypeError, match="^an event's message must be a str, not None$"):
            rec.eventf(_cm("x"), "Normal", "Synced", None, cluster_name="c")
        with pytest.raises(TypeError, match="^an event's reason must be a str, not int$"):
            rec.event(_cm("x"), "Normal", 3, "m", cluster_name="c")
        assert "recorder:" not in caplog.text
    finally:
        provider.stop()
        cluster.stop()


def test_nothing_of_a_disengaged_cluster_remains(make_envtest_fleet):
    fleet = make_envtest_fleet(2)
    provider = Provider()
    for name in ("cluster-0", "cluster-1"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(provider=provider)
    rec = mgr.get_event_recorder_for("ctl")
    mcruntime.controller_managed_by(mgr).named("noop").for_("v1/ConfigMap").complete(lambda r: None)
    api = _api(fleet["cluster-0"], "cluster-0")
    obj = api.create(_cm("gone"))
    with mgr:
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0", "cluster-1"])
        assert rec.event(obj, "Normal", "Hello", "m", cluster_name="cluster-0")
        assert rec.event(obj, "Normal", "Hello", "m", cluster_name="cluster-1")
        wait_for(lambda: _events(api))
        assert len(_recorder_threads("cluster-0")) == 1
        provider.remove("cluster-0")
        wait_for(lambda: not _recorder_threads("cluster-0"))
        assert len(_recorder_threads("cluster-1")) == 1
        # an event for the cluster gone (a reconcile ending after it left) and for names
        # never engaged: counted, but under no cluster's label, so no series of a gone
        # cluster stays behind and names never engaged do not grow the endpoint
        assert not rec.event(obj, "Normal", "Hello", "again", cluster_name="cluster-0")
        for name in ("typo-0", "typo-1"):
            assert not rec.event(obj, "Normal", "Hello", "m", cluster_name=name)
        not_engaged = {"cluster": "", "reason": "cluster_not_engaged"}
        assert mgr.metrics.sample("mcruntime_events_dropped_total", not_engaged) == 3
        text = mgr.metrics.exposition().decode()
        assert [line for line in text.splitlines() if 'cluster="cluster-0"' in line] == []
        assert "typo-" not in text
    assert not _recorder_threads("cluster-1")


def test_events_are_found_the_way_kubectl_describe_looks_them_up(envtest_server):
    provider, cluster = _provider(envtest_server, "c")
    api = _api(envtest_server, "c")
    obj = api.create(_cm("described"))
    rec = provider.get_event_recorder_for("ctl")
    try:
        for _ in range(3):
            rec.event(obj, "Warning", "Degraded", "one replica is down", cluster_name="c")
        wait_for(lambda: [e.get("count") for e in _events(api)] == [3])
        # kubectl describe lists events by these field selectors on the involved object
        meta = obj["metadata"]
        found = api.list(
            "v1/Event",
            "default",
            fields={
                "involvedObject.name": "described",
                "involvedObject.namespace": "default",
                "involvedObject.kind": "ConfigMap",
                "involvedObject.uid": meta["uid"],
            },
        )
        assert [(e["type"], e["reason"], e["count"]) for e in found] == [("Warning", "Degraded", 3)]
    finally:
        provider.stop()
        cluster.stop()


def test_an_async_reconciler_posts_into_its_requests_cluster(make_envtest_fleet):
    fleet = make_envtest_fleet(2)
    provider = Provider()
    for name in ("cluster-0", "cluster-1"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(provider=provider)
    recorder = mgr.get_event_recorder_for("async-controller")
    members = {name: _api(fleet[name], name) for name in ("cluster-0", "cluster-1")}
    for name, client in members.items():
        client.create(_cm(f"in-{name}"))

    async def reconcile(req: Request) -> None:
        if req.name.startswith("in-"):
            recorder.event(_cm(req.name), "Normal", "Seen", f"seen in {req.cluster_name}")

    mcruntime.controller_managed_by(mgr).named("async").for_("v1/ConfigMap").complete(reconcile)
    with mgr:
        for name, client in members.items():
            (event,) = wait_for(lambda c=client: _events(c))
            assert event["message"] == f"seen in {name}"
            assert event["involvedObject"]["name"] == f"in-{name}"


def test_a_cluster_that_refuses_events_is_named_once_per_failure_streak(envtest_server, caplog):
    # the recorder writes as a service account that may not create Events (until granted)
    admin = _api(envtest_server, "admin")
    config = envtest_server.kubeconfig(service_account="default/ctl")
    token = config["users"][0]["user"]["token"]
    cluster = Cluster.from_kubeconfig(config, name="c")
    metrics = Metrics()
    provider = RecorderProvider(lambda n: cluster, metrics=metrics)
    rec = provider.get_event_recorder_for("ctl")
    objs = [admin.create(_cm(f"cm-{i}")) for i in range(20)]
    errors = {"cluster": "c", "reason": "error"}
    caplog.set_level("INFO", logger="mcruntime.recorder")
    try:
        for obj in objs:
            assert rec.event(obj, "Normal", "Synced", "synced", cluster_name="c")
        wait_for(lambda: metrics.sample("mcruntime_events_dropped_total", errors) == 20)
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1, warnings
        assert warnings[0].startswith("cluster=c recorder: writing events failed: ")
        assert "events is forbidden" in warnings[0]
        assert "mcruntime_events_dropped_total" in warnings[0]
        assert token not in caplog.text

        rbac = "rbac.authorization.k8s.io"
        admin.create(
            {
                "apiVersion": f"{rbac}/v1",
                "kind": "Role",
                "metadata": {"name": "events", "namespace": "default"},
                "rules": [
                    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}
                ],
            }
        )
        admin.create(
            {
                "apiVersion": f"{rbac}/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "events", "namespace": "default"},
                "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "events"},
                "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": "default"}],
            }
        )
        rec.event(objs[0], "Normal", "Granted", "written at last", cluster_name="c")
        wait_for(lambda: [e["reason"] for e in _events(admin)] == ["Granted"])
        wait_for(lambda: "works again" in caplog.text)
        recoveries = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
        assert recoveries == [
            "cluster=c recorder: writing events works again after 20 failed attempts "
            "(their events were dropped)"
        ]
        assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
    finally:
        provider.stop()
        cluster.stop()


class TypedConfigMap(Resource):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "ConfigMap"
    data: dict[str, str] | None = None


@pytest.mark.parametrize(
    ("failure_events", "kind"),
    [(True, "v1/ConfigMap"), (None, "v1/ConfigMap"), (True, TypedConfigMap)],
    ids=["on", "off", "on-typed"],
)
def test_failure_events_tell_kubectl_describe_why_a_reconcile_fails(
    make_envtest_fleet: Any, tmp_path: Any, failure_events: bool | None, kind: Any
) -> None:
    fleet = make_envtest_fleet(2)
    provider = Provider()
    for name in ("cluster-0", "cluster-1"):
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = mcruntime.Manager(provider=provider)
    member = _api(fleet["cluster-1"], "cluster-1")
    created = member.create(_cm("web"))
    failures: list[str] = []

    def reconcile(req: Request) -> None:
        if req.cluster_name == "cluster-1":
            failures.append(req.name)
            raise ValueError(f"quota exceeded for {req.name}")

    (
        mcruntime.controller_managed_by(mgr)
        .named("widgets")
        .for_(kind)
        .with_options(failure_events=failure_events)
        .complete(reconcile)
    )
    with mgr:
        wait_for(lambda: failures.count("web") >= 3)
        if failure_events:
            # one Event, counted again at each retry (the recorder aggregates repeats)
            wait_for(lambda: [e["count"] for e in _events(member)] >= [2])
    events = _events(member)
    assert _events(_api(fleet["cluster-0"], "cluster-0")) == []
    if not failure_events:
        assert events == []  # off by default: the error's text is not posted
        return
    (event,) = events
    assert (event["type"], event["reason"]) == ("Warning", "ReconcileError")
    assert event["message"] == "ValueError: quota exceeded for web"
    assert event["source"]["component"] == "widgets"
    assert event["involvedObject"] == _ref_of(created)
    kubeconfig = fleet["cluster-1"].write_kubeconfig(tmp_path / "kubeconfig")
    described = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "describe", "configmap", "web"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    (line,) = [x for x in described.splitlines() if "ReconcileError" in x]
    assert line.split()[:2] == ["Warning", "ReconcileError"]
    assert line.endswith("widgets  ValueError: quota exceeded for web"), line


def test_an_on_failure_hook_that_fails_is_said_once_per_streak(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_envtest_server("hooked")
    provider = Provider()
    provider.add("hooked", Cluster.from_kubeconfig(server.kubeconfig(), name="hooked"))
    mgr = mcruntime.Manager(provider=provider)
    _api(server, "hooked").create(_cm("web"))
    failures: list[str] = []

    def reconcile(req: Request) -> None:
        failures.append(req.name)
        raise ValueError("still broken")

    hooked: list[str] = []

    def hook(req: Request, exc: BaseException) -> None:
        hooked.append(req.name)
        raise RuntimeError("event sink down")

    ctrl = (
        mcruntime.controller_managed_by(mgr)
        .named("hooked")
        .for_("v1/ConfigMap")
        .complete(reconcile)
    )
    ctrl.on_failure = hook
    with mgr:
        # (counted before the stop: its leave of the cluster ends the streak, and a
        # reconcile still failing then starts another)
        wait_for(lambda: hooked.count("web") >= 5)
        said = [
            r
            for r in caplog.records
            if r.levelno >= logging.WARNING and "on_failure" in r.getMessage()
        ]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert "RuntimeError: event sink down" in said[0].getMessage()
    assert "cluster=hooked" in said[0].getMessage()


def _member_manager(fleet: Any) -> tuple[mcruntime.Manager, Provider]:
    """A manager of the fleet's members (no local cluster), and the provider holding them."""
    provider = Provider()
    for name in fleet.names:
        provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    return mcruntime.Manager(provider=provider), provider


def test_the_events_queued_when_the_manager_stops_are_written(make_envtest_fleet):
    """They were dropped without a word: the stop tore the cluster down first, and its
    sender emptied the queue as the cluster's calls were cut (7 of 300 written)."""
    fleet = make_envtest_fleet(1)
    mgr, provider = _member_manager(fleet)
    rec = mgr.get_event_recorder_for("fan-out")
    posted: list[bool] = []

    def reconcile(req: Request) -> None:
        if req.name == "parent":
            posted.extend(
                rec.event(_cm(f"child-{i}"), "Normal", "Created", f"created child-{i}")
                for i in range(300)
            )

    mcruntime.controller_managed_by(mgr).named("fan").for_("v1/ConfigMap").complete(reconcile)
    api = _api(fleet["cluster-0"], "cluster-0")
    with mgr:
        api.create(_cm("parent"))
        wait_for(lambda: len(posted) == 300)
    assert posted.count(True) == 300
    assert len(_events(api)) == 300
    assert not _recorder_threads("cluster-0")


def test_events_queued_for_a_cluster_that_leaves_are_said_dropped(make_envtest_fleet, caplog):
    """The cluster's calls are cut when it leaves; its sender emptied the queue one failed
    write at a time, so the line counting what was dropped was never written."""
    fleet = make_envtest_fleet(1)
    mgr, provider = _member_manager(fleet)
    rec = mgr.get_event_recorder_for("ctl")
    mcruntime.controller_managed_by(mgr).named("noop").for_("v1/ConfigMap").complete(lambda r: None)
    caplog.set_level("INFO", logger="mcruntime.recorder")
    with mgr:
        wait_for(lambda: mgr.engaged_clusters() == ["cluster-0"])
        fleet.freeze("cluster-0")
        try:
            # the first is being written when it leaves (the member does not answer), or queued
            for i in range(11):
                assert rec.event(_cm(f"cm-{i}"), "Normal", "Hello", "m", cluster_name="cluster-0")
            provider.remove("cluster-0")
            wait_for(lambda: not _recorder_threads("cluster-0"))
        finally:
            fleet.thaw("cluster-0")
    said = [r.getMessage() for r in caplog.records if "queued events dropped" in r.getMessage()]
    assert said == ["cluster=cluster-0 11 queued events dropped"]


def test_an_event_in_a_namespace_being_terminated_is_no_failure_of_the_cluster(
    envtest_server, caplog
):
    """It was a warning that the cluster's writes failed, opening a streak that then kept a
    real failure after it at debug level: a finalizer's events during a namespace's cleanup
    are expected to be refused (client-go drops them quietly)."""
    provider, cluster = _provider(envtest_server, "c")
    api = _api(envtest_server, "c")
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}})
    hold = {"name": "held", "namespace": "doomed", "finalizers": ["example.com/hold"]}
    held = api.create({**_cm("held"), "metadata": hold})
    api.delete("v1/Namespace", "doomed")
    wait_for(lambda: api.get("v1/Namespace", "doomed")["status"].get("phase") == "Terminating")
    rec = provider.get_event_recorder_for("ctl")
    metrics = provider.metrics
    assert metrics is not None
    caplog.set_level("INFO", logger="mcruntime.recorder")
    try:
        assert rec.event(held, "Normal", "Finalizing", "cleaning up", cluster_name="c")
        terminating = {"cluster": "c", "reason": "namespace_terminating"}
        wait_for(lambda: metrics.sample("mcruntime_events_dropped_total", terminating) == 1)
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        # a failure after it is said: no streak was open
        orphan = {**_cm("orphan"), "metadata": {"name": "orphan", "namespace": "never-made"}}
        assert rec.event(orphan, "Warning", "Orphaned", "m", cluster_name="c")
        (warning,) = wait_for(
            lambda: [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        )
        assert 'namespaces "never-made" not found' in warning
        errors = {"cluster": "c", "reason": "error"}
        assert metrics.sample("mcruntime_events_dropped_total", errors) == 1
    finally:
        api.patch("v1/ConfigMap", "held", {"metadata": {"finalizers": None}}, "doomed")
        provider.stop()
        cluster.stop()


def test_a_full_queue_is_said_once_per_streak(envtest_server, caplog):
    """Its drops were counted in the metric only: a resync recording one event per object of a
    big cluster lost most of them without a line in the log."""
    provider, cluster = _provider(envtest_server, "c", queue_size=5)
    api = _api(envtest_server, "c")
    rec = provider.get_event_recorder_for("ctl")
    metrics = provider.metrics
    assert metrics is not None
    full = {"cluster": "c", "reason": "queue_full"}
    caplog.set_level("INFO", logger="mcruntime.recorder")
    envtest_server.freeze()  # the writes wait: the queue fills
    try:
        queued = [
            rec.event(_cm(f"cm-{i}"), "Normal", "Synced", "m", cluster_name="c") for i in range(50)
        ]
    finally:
        envtest_server.thaw()
    dropped = queued.count(False)
    assert dropped >= 40 and metrics.sample("mcruntime_events_dropped_total", full) == dropped
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.startswith(
        "cluster=c recorder: queueing events failed: the queue is full (5 events"
    )
    assert "mcruntime_events_dropped_total" in warning
    try:
        wait_for(lambda: len(_events(api)) == 50 - dropped)
        assert rec.event(_cm("later"), "Normal", "Synced", "m", cluster_name="c")
        recoveries = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert recoveries == [
            f"cluster=c recorder: queueing events works again after {dropped} failed attempts "
            "(their events were dropped)"
        ]
    finally:
        provider.stop()
        cluster.stop()
