"""Informer against a real embedded API server over HTTP, with the real client."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import config

from mcruntime import _held_back as held_back
from mcruntime._threads import mcruntime_threads
from mcruntime.cache import Informer, _informer, first_list_here
from mcruntime.client import RESTClient
from mcruntime.client import deadline as client_deadline
from mcruntime.client import remaining as client_remaining
from mcruntime.envtest import wait_for
from mcruntime.errors import DeadlineExceeded
from tests._httpserver import Handler, serving
from tests._logs import logged
from tests.integration.cache._cache_helpers import CONFIGMAPS, Kube, Recorder

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def make_informer(rest: RESTClient) -> Iterator[Callable[..., Informer]]:
    made: list[Informer] = []

    def make(**kwargs: Any) -> Informer:
        kwargs.setdefault("cluster_name", "c1")
        inf = Informer(rest, CONFIGMAPS, **kwargs)
        made.append(inf)
        return inf

    yield make
    for inf in made:
        inf.stop()


def test_initial_list_then_watch_events_reach_handlers(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    for name in ("a", "b", "c"):
        kube.create(ns, name)
    inf = make_informer(namespace=ns)
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    assert inf.wait_for_sync(10)

    initial = rec.wait_count(3)
    assert sorted((t, k, extra) for t, k, _, extra in initial) == [
        ("add", f"{ns}/a", True),
        ("add", f"{ns}/b", True),
        ("add", f"{ns}/c", True),
    ]
    assert inf.last_sync_resource_version

    created = kube.create(ns, "d")
    updated = kube.update(ns, "a", {"k": "v"})
    kube.update(ns, "b", {"last": "state"})
    kube.delete(ns, "b")
    live = rec.wait_count(7)[3:]
    assert [e[:2] for e in live] == [
        ("add", f"{ns}/d"),
        ("update", f"{ns}/a"),
        ("update", f"{ns}/b"),
        ("delete", f"{ns}/b"),
    ]
    assert live[0] == ("add", f"{ns}/d", created["metadata"]["resourceVersion"], False)
    assert live[1] == (
        "update",
        f"{ns}/a",
        updated["metadata"]["resourceVersion"],
        initial_rv(initial, f"{ns}/a"),
    )
    deleted = rec.objects[-1][1]
    assert deleted["data"] == {"last": "state"}
    assert sorted(inf.store.keys()) == [f"{ns}/a", f"{ns}/c", f"{ns}/d"]
    got = inf.store.get(f"{ns}/a")
    assert got is not None and got["data"] == {"k": "v"}
    assert got["kind"] == "ConfigMap" and got["apiVersion"] == "v1"
    # the list is delivered by the informer's thread, watch events by the thread every watch shares
    assert rec.threads == {"mcruntime/informer/c1/ConfigMap", "mcruntime/watches"}


def initial_rv(events: list[tuple[str, str, str, Any]], key: str) -> str:
    return next(rv for t, k, rv, _ in events if k == key and t == "add")


def test_handler_added_after_sync_gets_replay_before_live_events(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    for i in range(20):
        kube.create(ns, f"cm-{i}")
    inf = make_informer(namespace=ns)
    inf.start()
    assert inf.wait_for_sync(10)

    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            kube.update(ns, f"cm-{i % 20}", {"n": str(i)})
            i += 1

    writer = threading.Thread(target=churn)
    writer.start()
    try:
        wait_for(lambda: inf.last_sync_resource_version and len(inf.store) == 20)
        rec = Recorder()
        reg = inf.add_event_handler(rec)
        assert reg.has_synced()
        rec.wait(lambda ev: sum(1 for e in ev if e[0] == "update") >= 10)
    finally:
        stop.set()
        writer.join()

    events = rec.snapshot()
    first: dict[str, tuple[str, Any]] = {}
    for typ, key, _, extra in events:
        first.setdefault(key, (typ, extra))
    assert set(first) == {f"{ns}/cm-{i}" for i in range(20)}
    assert all(v == ("add", True) for v in first.values()), first
    adds = Counter(k for t, k, _, _ in events if t == "add")
    assert set(adds.values()) == {1}
    # the replay is one contiguous block at the start
    assert [t for t, *_ in events[:20]] == ["add"] * 20


def test_removed_handler_gets_no_more_calls(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    inf = make_informer(namespace=ns)
    gone, kept = Recorder(), Recorder()
    reg = inf.add_event_handler(gone)
    inf.add_event_handler(kept)
    inf.start()
    assert inf.wait_for_sync(10)
    kube.create(ns, "a")
    gone.wait_count(1)
    reg.remove()
    assert not reg.has_synced()
    kube.create(ns, "b")
    kept.wait_count(2)
    assert [k for _, k, _, _ in gone.snapshot()] == [f"{ns}/a"]


def test_failing_handler_does_not_stop_the_informer(
    kube: Kube, make_informer: Callable[..., Informer], caplog: pytest.LogCaptureFixture
) -> None:
    class Broken:
        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
            raise RuntimeError("handler bug")

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            raise RuntimeError("handler bug")

        def on_delete(self, obj: dict[str, Any]) -> None:
            raise RuntimeError("handler bug")

    ns = kube.namespace()
    inf = make_informer(namespace=ns)
    inf.add_event_handler(Broken())
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    kube.create(ns, "a")
    kube.create(ns, "b")
    rec.wait_count(2)
    assert any("handler bug" in r.getMessage() or r.exc_info for r in caplog.records)


def _exit_for_bad(obj: dict[str, Any]) -> None:
    if obj["metadata"]["name"] == "bad":
        raise SystemExit("exit from a callback")


class _ExitingHandler:
    """A handler whose predicate or map function calls ``sys.exit()`` for the object "bad"."""

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        _exit_for_bad(obj)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        _exit_for_bad(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        _exit_for_bad(obj)


def _exiting_transform(obj: dict[str, Any]) -> dict[str, Any]:
    _exit_for_bad(obj)
    return obj


def _exiting_index(obj: dict[str, Any]) -> list[str]:
    _exit_for_bad(obj)
    return [obj["metadata"]["name"]]


@pytest.mark.parametrize("callback", ["handler", "transform", "index"])
def test_a_callback_calling_sys_exit_fails_its_object_only_not_the_watches_of_the_process(
    kube: Kube,
    make_informer: Callable[..., Informer],
    caplog: pytest.LogCaptureFixture,
    callback: str,
) -> None:
    """A SystemExit (a BaseException, not an Exception) from user code called for one event
    (a predicate or map function under a handler, a transform, an index function) fails
    that one object, logged naming the cluster and kind; it does not end the thread every
    watch of the process shares, nor any informer (other informers, and later events of
    the same one, still arrive)."""
    ns, other_ns = kube.namespace(), kube.namespace()
    failing = make_informer(
        namespace=ns, **({"transform": _exiting_transform} if callback == "transform" else {})
    )
    if callback == "handler":
        failing.add_event_handler(_ExitingHandler())
    if callback == "index":
        failing.add_indexers({"by-name": _exiting_index})
    rec, other_rec = Recorder(), Recorder()
    failing.add_event_handler(rec)
    other = make_informer(namespace=other_ns)
    other.add_event_handler(other_rec)
    failing.start()
    other.start()
    assert failing.wait_for_sync(10) and other.wait_for_sync(10)
    kube.create(other_ns, "first")
    other_rec.wait_count(1)  # the shared reader runs
    reader = next(t for t in mcruntime_threads() if t.name == "mcruntime/watches")
    with caplog.at_level(logging.WARNING):
        kube.create(ns, "bad")
        kube.create(ns, "good")
        kube.create(other_ns, "second")
        rec.wait(lambda ev: f"{ns}/good" in {k for _, k, _, _ in ev})
        other_rec.wait_count(2)
    assert reader.is_alive()
    assert failing.last_error is None and other.last_error is None
    names = {t.name for t in mcruntime_threads()}
    assert "mcruntime/informer/c1/ConfigMap" in names
    # a transform's failure is a warning (its streak's first), the others errors
    (line,) = [
        m
        for m in logged(caplog, logging.WARNING) + logged(caplog, logging.ERROR)
        if f"{ns}/bad" in m
    ]
    assert line.startswith("cluster=c1 ") and "kind=v1/ConfigMap" in line


def test_a_ctrl_c_while_the_main_thread_replays_to_a_handler_is_not_swallowed(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    """A KeyboardInterrupt on the main thread (where Python delivers Ctrl-C; a handler added
    there is replayed the store there) is the user's, not a handler's failure to contain:
    it goes on, while one raised on another thread fails that one call."""
    ns = kube.namespace()
    kube.create(ns, "a")
    inf = make_informer(namespace=ns)
    inf.start()
    assert inf.wait_for_sync(10)

    class Interrupted:
        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
            raise KeyboardInterrupt

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            pass

        def on_delete(self, obj: dict[str, Any]) -> None:
            pass

    assert threading.current_thread() is threading.main_thread()
    with pytest.raises(KeyboardInterrupt):
        inf.add_event_handler(Interrupted())
    contained: list[BaseException] = []

    def elsewhere() -> None:
        try:
            inf.add_event_handler(Interrupted())
        except BaseException as exc:
            contained.append(exc)

    t = threading.Thread(target=elsewhere, name="test-not-main")
    t.start()
    t.join(5)
    assert contained == []


def test_a_base_exception_that_ends_a_watch_is_a_failure_the_informer_retries(
    kube: Kube,
    make_informer: Callable[..., Informer],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever ends a watch (here a KeyboardInterrupt while an event is handled, as a
    reader's own bug would) is a failure of that informer, logged with its cluster and kind
    and retried with backoff: the informer's thread never ends while its cluster is engaged."""
    handle = _informer._Reflector._handle
    raised = threading.Event()

    def interrupted_once(self: Any, event: dict[str, Any]) -> None:
        if not raised.is_set():
            raised.set()
            raise KeyboardInterrupt
        handle(self, event)

    monkeypatch.setattr(_informer._Reflector, "_handle", interrupted_once)
    ns = kube.namespace()
    inf = make_informer(namespace=ns)
    rec = Recorder()
    inf.add_event_handler(rec)
    with caplog.at_level(logging.WARNING, logger="mcruntime.cache"):
        inf.start()
        assert inf.wait_for_sync(10)
        kube.create(ns, "a")
        rec.wait(lambda ev: f"{ns}/a" in {k for _, k, _, _ in ev})  # relisted after the failure
        kube.create(ns, "b")
        rec.wait(lambda ev: f"{ns}/b" in {k for _, k, _, _ in ev})
    assert raised.is_set()
    assert "mcruntime/informer/c1/ConfigMap" in {t.name for t in mcruntime_threads()}
    (warning,) = logged(caplog, logging.WARNING, logger="mcruntime.cache")
    assert warning.startswith(
        f"cluster=c1 informer kind=v1/ConfigMap namespace={ns}: listing and watching failed: "
        "KeyboardInterrupt; retrying with backoff"
    )


class _ExpiringWatches(Handler):
    """Lists work; the first ``expiring`` watches answer 410 Expired at once (a proxy or a
    broken watch cache), the later ones one event and then silence."""

    protocol_version = "HTTP/1.1"  # as kube-apiserver: the watch is read by the shared reader
    expiring = 3
    watches: list[str] = []
    released = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if "watch=true" not in self.path:
            self.answer(200, b'{"kind":"ConfigMapList","metadata":{"resourceVersion":"5"}}')
            return
        self.watches.append(self.path)
        if len(self.watches) <= self.expiring:
            status = b'{"kind":"Status","status":"Failure","reason":"Expired","code":410}'
            self.answer(410, status)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")  # as kube-apiserver streams a watch
        self.end_headers()
        event = b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}}\n'
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()
        self.released.wait(30)
        self.close_connection = True


def test_a_watch_expiring_at_every_resume_is_logged_once_per_streak(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server answering 410 to every watch right after a fresh list is relisted with
    backoff, logged at info once (the first expiry: a compaction ends a watch now and then),
    the later expiries of the streak at debug with their count, and one info line once a
    watch lasts again (badinput #14: one info line per relist, for ever)."""
    handler = type("Handler", (_ExpiringWatches,), {"watches": [], "released": threading.Event()})
    with (
        serving(handler, "expiring") as cluster,
        caplog.at_level(logging.DEBUG, logger="mcruntime.cache"),
    ):
        inf = Informer(cluster.rest, CONFIGMAPS, cluster_name="expiring")
        inf.start()
        try:
            wait_for(lambda: inf.last_sync_resource_version == "6", what="the bookmark")
        finally:
            inf.stop()
            handler.released.set()  # (the server's shutdown waits for its handlers)
    where = "cluster=expiring kind=v1/ConfigMap: "
    assert logged(caplog, logging.INFO, starting=where, containing="expired (") == [
        f"{where}resourceVersion 5 expired (Expired); relisting"
    ]
    assert logged(caplog, logging.DEBUG, starting=where, containing="expired again") == [
        f"{where}resourceVersion 5 expired again (Expired), {n} relists in a row; relisting "
        "after backoff"
        for n in (2, 3)
    ]
    assert logged(caplog, logging.INFO, starting=where, containing="works again") == [
        f"{where}watching works again after 3 relists in a row (each watch expired at once)"
    ]
    assert not logged(caplog, logging.WARNING, logger="mcruntime.cache")


def test_relist_after_compaction_delivers_exactly_the_missed_changes(
    envtest_server: Any,
    kube: Kube,
    make_informer: Callable[..., Informer],
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = kube.namespace()
    for name in ("keep", "change", "remove", "change-then-remove"):
        kube.create(ns, name)
    inf = make_informer(namespace=ns)
    rec = Recorder()
    paused, resume = threading.Event(), threading.Event()

    class Pause:
        """Holds the informer thread inside a handler, so it is not reading its watch."""

        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
            if obj["metadata"]["name"] == "pause":
                paused.set()
                assert resume.wait(20)

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None: ...

        def on_delete(self, obj: dict[str, Any]) -> None: ...

    inf.add_event_handler(Pause())
    inf.add_event_handler(rec)
    inf.start()
    assert inf.wait_for_sync(10)
    rec.wait_count(4)
    last_known = {k: rv for _, k, rv, _ in rec.snapshot()}

    kube.create(ns, "pause")
    assert paused.wait(10)
    # disconnected: the watch is dropped and the history it would resume from compacted
    envtest_server.drop_watches()
    kube.create(ns, "new")
    changed = kube.update(ns, "change", {"x": "1"})
    kube.delete(ns, "remove")
    kube.update(ns, "change-then-remove", {"x": "1"})
    kube.delete(ns, "change-then-remove")
    envtest_server.compact()
    with caplog.at_level(logging.INFO, logger="mcruntime.cache"):
        resume.set()
        rec.wait(
            lambda ev: (
                sum(1 for e in ev if e[0] == "delete") >= 2
                and any(e[1].endswith("/new") for e in ev)
            )
        )
        kube.create(ns, "after")
        rec.wait(lambda ev: any(e[1].endswith("/after") for e in ev))

    events = rec.snapshot()[4:]
    assert events[0][:2] == ("add", f"{ns}/pause")
    relist = sorted(events[1:-1])
    new = inf.store.get(f"{ns}/new")
    assert new is not None
    assert relist == sorted(
        [
            ("add", f"{ns}/new", new["metadata"]["resourceVersion"], False),
            (
                "update",
                f"{ns}/change",
                changed["metadata"]["resourceVersion"],
                last_known[f"{ns}/change"],
            ),
            ("delete", f"{ns}/remove", last_known[f"{ns}/remove"], None),
            ("delete", f"{ns}/change-then-remove", last_known[f"{ns}/change-then-remove"], None),
        ]
    )
    assert events[-1][:2] == ("add", f"{ns}/after")
    assert sorted(inf.store.keys()) == sorted(
        f"{ns}/{n}" for n in ("keep", "change", "pause", "new", "after")
    )
    assert any("relisting" in r.getMessage() for r in caplog.records)


def test_catches_up_after_server_restart(
    envtest_server: Any, kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    kube.create(ns, "before")
    inf = make_informer(namespace=ns)
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    assert inf.wait_for_sync(10)
    rec.wait_count(1)

    envtest_server.stop()
    wait_for(lambda: inf.last_error is not None)
    envtest_server.start()
    kube.create(ns, "after")
    kube.update(ns, "before", {"x": "1"})
    rec.wait(
        lambda ev: any(e[1].endswith("/after") for e in ev) and any(e[0] == "update" for e in ev)
    )
    wait_for(lambda: inf.last_error is None)
    events = rec.snapshot()
    assert Counter((t, k) for t, k, _, _ in events) == Counter(
        {("add", f"{ns}/before"): 1, ("add", f"{ns}/after"): 1, ("update", f"{ns}/before"): 1}
    )


def test_unreachable_server_logs_one_warning_per_failure_streak_and_one_info_on_recovery(
    envtest_server: Any, rest: RESTClient, caplog: pytest.LogCaptureFixture
) -> None:
    envtest_server.stop()
    inf = Informer(rest, CONFIGMAPS, cluster_name="c1")

    def lines(level: int) -> list[str]:
        return logged(caplog, level, logger="mcruntime.cache")

    with caplog.at_level(logging.DEBUG, logger="mcruntime.cache"):
        inf.start()
        try:
            assert not inf.wait_for_sync(0.2)
            wait_for(lambda: any("still failing (3)" in m for m in lines(logging.DEBUG)))
            assert inf.last_error is not None
            assert not inf.has_synced()
            (warning,) = lines(logging.WARNING) + lines(logging.ERROR)
            assert warning.startswith(
                "cluster=c1 informer kind=v1/ConfigMap: listing and watching failed: "
            )
            assert warning.endswith(
                "; retrying with backoff; further failures are logged at debug level "
                "until it recovers"
            )
            envtest_server.start()
            assert inf.wait_for_sync(15)
            wait_for(lambda: inf.last_error is None)
        finally:
            inf.stop()
    (recovery,) = [m for m in lines(logging.INFO) if "works again" in m]
    assert recovery.startswith(
        "cluster=c1 informer kind=v1/ConfigMap: listing and watching works again after "
    )
    assert len(lines(logging.WARNING)) == 1
    # the same names as record attributes, for a pipeline that ships records as JSON
    said = [r for r in caplog.records if r.name == "mcruntime.cache" and r.levelno >= logging.INFO]
    assert said and {(r.cluster, r.kind) for r in said} == {("c1", "v1/ConfigMap")}  # type: ignore[attr-defined]


def test_stop_ends_every_informer_thread_promptly(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    inf = make_informer(namespace=[ns, kube.namespace()], resync=30)
    inf.start()
    inf.start()
    assert inf.wait_for_sync(10)
    names = {t.name for t in mcruntime_threads()}
    assert {
        f"mcruntime/informer/c1/ConfigMap/{ns}",
        "mcruntime/informer/c1/ConfigMap/resync",
    } <= names
    inf.stop(timeout=5)
    assert not [t.name for t in mcruntime_threads() if t.name.startswith("mcruntime/informer/c1/")]
    # its watches were the only ones open: the shared reader ended with them, not later
    assert "mcruntime/watches" not in {t.name for t in mcruntime_threads()}
    with pytest.raises(RuntimeError, match="stopped"):
        inf.start()


def test_transform_runs_before_storing_and_drops_managed_fields_by_default(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    managed = {"managedFields": [{"manager": "test", "operation": "Update", "apiVersion": "v1"}]}
    kube.create(ns, "a", {"k": "v"}, meta=managed)  # fields to manage: empty maps are not
    raw = make_informer(namespace=ns, transform=None)
    default = make_informer(namespace=ns)

    def tag(obj: dict[str, Any]) -> dict[str, Any]:
        obj["metadata"].setdefault("annotations", {})["seen"] = "yes"
        return obj

    custom = make_informer(namespace=ns, transform=tag)
    for inf in (raw, default, custom):
        inf.start()
        assert inf.wait_for_sync(10)
    kube.create(ns, "b", {"k": "v"}, meta=managed)
    for store in (raw.store, default.store, custom.store):
        wait_for(lambda store=store: len(store) == 2)  # type: ignore[misc]
    assert all(o["metadata"].get("managedFields") for o in raw.store.list())
    assert all("managedFields" not in o["metadata"] for o in default.store.list())
    assert all(o["metadata"]["annotations"]["seen"] == "yes" for o in custom.store.list())


def test_label_selected_informer_sees_only_matching_objects(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    kube.create(ns, "web-1", app="web")
    kube.create(ns, "db-1", app="db")
    inf = make_informer(namespace=ns, label_selector="app=web")
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    assert inf.wait_for_sync(10)
    kube.create(ns, "web-2", app="web")
    kube.create(ns, "db-2", app="db")
    kube.update(ns, "db-1", {}, app="web")
    rec.wait(lambda ev: {k for _, k, _, _ in ev} >= {f"{ns}/web-2", f"{ns}/db-1"})
    assert sorted(inf.store.keys()) == sorted(f"{ns}/{n}" for n in ("web-1", "web-2", "db-1"))
    assert all(not k.endswith("db-2") for _, k, _, _ in rec.snapshot())


def test_paginated_initial_list_gets_every_object(
    kube: Kube, make_informer: Callable[..., Informer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_informer, "LIST_PAGE_SIZE", 3)
    ns = kube.namespace()
    for i in range(10):
        kube.create(ns, f"cm-{i}")
    inf = make_informer(namespace=ns)
    inf.start()
    assert inf.wait_for_sync(10)
    assert sorted(inf.store.keys()) == sorted(f"{ns}/cm-{i}" for i in range(10))


def test_resync_redelivers_every_object_as_an_update(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a")
    inf = make_informer(namespace=ns, resync=0.1)
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    rec.wait(lambda ev: sum(1 for e in ev if e[0] == "update") >= 2)
    updates = [e for e in rec.snapshot() if e[0] == "update"]
    assert all(rv == old for _, _, rv, old in updates)


def test_informers_started_together_resync_at_periods_spread_within_ten_percent(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    # as controller-runtime jitters its SyncPeriod: the informers of a fleet that joined at
    # once do not all resync at the same moment (a burst of every object of every cluster)
    ns = kube.namespace()
    kube.create(ns, "a")
    resync, n = 0.5, 10
    first: dict[int, float] = {}
    began: dict[int, float] = {}
    lock = threading.Lock()

    class FirstResync:
        def __init__(self, i: int) -> None:
            self.i = i

        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None: ...

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
            with lock:
                first.setdefault(self.i, time.monotonic())

        def on_delete(self, obj: dict[str, Any]) -> None: ...

    for i in range(n):
        inf = make_informer(namespace=ns, resync=resync)
        inf.add_event_handler(FirstResync(i))
        began[i] = time.monotonic()
        inf.start()
    wait_for(lambda: len(first) == n, timeout=10, what="every informer resynced")
    periods = [first[i] - began[i] for i in range(n)]
    assert all(0.9 * resync <= p < 1.1 * resync + 1.0 for p in periods), periods
    # ten periods drawn within [0.45, 0.55) spread over more than 0.025 s but for about
    # once in 30,000 runs; unjittered, they differ by the scheduling's noise alone
    assert max(periods) - min(periods) > 0.025, periods


def test_store_indexers_added_after_start(
    kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a", app="web")
    inf = make_informer(namespace=ns)
    inf.start()
    assert inf.wait_for_sync(10)
    inf.add_indexers({"app": lambda o: [o["metadata"].get("labels", {}).get("app", "")]})
    assert [o["metadata"]["name"] for o in inf.store.by_index("app", "web")] == ["a"]
    kube.update(ns, "a", {}, app="db")
    wait_for(lambda: inf.store.by_index("app", "db"))
    assert inf.store.by_index("app", "web") == []


# -- first_list_here ----------------------------------------------------------------------


def test_first_list_here_fills_the_store_before_the_block_ends_then_watches_on_its_thread(
    kube: Kube, make_informer: Callable[..., Informer], monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = kube.namespace()
    kube.create(ns, "a")
    inf, other = make_informer(namespace=ns), make_informer(namespace=ns, cluster_name="c2")
    listed_on: list[str] = []
    rec = Recorder()
    inf.add_event_handler(rec)
    real_list = _informer._Reflector._list

    def spy(self: Any, **kw: Any) -> None:
        listed_on.append(threading.current_thread().name)
        real_list(self, **kw)

    monkeypatch.setattr(_informer._Reflector, "_list", spy)
    with first_list_here():
        inf.start()
        other.start()  # the second informer of a block starts as usual
        assert not inf.has_synced()  # nothing listed inside the block
    assert inf.has_synced()  # listed as the block ended, on this thread
    assert other.wait_for_sync(10)
    assert sorted(listed_on) == sorted(
        [threading.current_thread().name, "mcruntime/informer/c2/ConfigMap"]
    )
    assert [k for _, k, _, _ in rec.snapshot()] == [f"{ns}/a"]
    assert "mcruntime/informer/c1/ConfigMap" in {t.name for t in mcruntime_threads()}
    kube.create(ns, "b")  # the watch goes on from the list's resourceVersion
    rec.wait(lambda ev: any(k == f"{ns}/b" for _, k, _, _ in ev))
    assert inf.last_error is None


def test_a_first_list_that_fails_is_retried_by_the_informer_s_thread(
    envtest_server: Any, rest: RESTClient, caplog: pytest.LogCaptureFixture
) -> None:
    envtest_server.stop()  # connections refused
    inf = Informer(rest, CONFIGMAPS, cluster_name="c1")
    try:
        with caplog.at_level(logging.INFO, logger="mcruntime.cache"):
            with client_deadline(10), first_list_here():
                inf.start()
            assert not inf.has_synced()
            # handed to the informer's thread: logged once there, and retried with backoff
            wait_for(lambda: inf.last_error is not None)
            envtest_server.start()
            assert inf.wait_for_sync(15)
            wait_for(lambda: inf.last_error is None)
        (warning,) = logged(caplog, logging.WARNING, logger="mcruntime.cache")
        assert warning.startswith(
            "cluster=c1 informer kind=v1/ConfigMap: listing and watching failed: "
            "[cluster c1] cannot reach 127.0.0.1:"
        )
        assert "connection refused; retrying with backoff" in warning
    finally:
        inf.stop()
    assert not [t for t in mcruntime_threads() if t.name.startswith("mcruntime/informer/c1/")]


def test_a_first_list_that_outlasts_the_caller_s_deadline_goes_on_on_the_informer_s_thread(
    kube: Kube,
    rest: RESTClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ns = kube.namespace()
    for name in ("a", "b", "c"):
        kube.create(ns, name)
    monkeypatch.setattr(_informer, "LIST_PAGE_SIZE", 1)
    inf = Informer(rest, CONFIGMAPS, namespace=ns, cluster_name="c1")
    asked: list[tuple[str, str | None]] = []
    real_request = rest.request

    def request(method: str, path: str, **kw: Any) -> Any:
        token = (kw.get("query") or {}).get("continue")
        if path.endswith("/configmaps"):
            asked.append((threading.current_thread().name, token))
            if token and threading.current_thread().name == "MainThread":
                # a big cluster's list: the caller's time runs out before the next page
                wait_for(lambda: (client_remaining() or 0) <= 0, timeout=5)
        return real_request(method, path, **kw)

    monkeypatch.setattr(rest, "request", request)
    try:
        with caplog.at_level(logging.INFO, logger="mcruntime.cache"):
            with client_deadline(0.2), first_list_here():
                inf.start()
            assert not inf.has_synced()
            assert inf.wait_for_sync(10)
        assert sorted(o["metadata"]["name"] for o in inf.store.list()) == ["a", "b", "c"]
        assert not logged(caplog, logging.WARNING, logger="mcruntime.cache")
        assert inf.last_error is None
        here, there = asked[:2], asked[2:]
        assert [t for t, _ in here] == ["MainThread", "MainThread"]
        # the informer's thread asked for the page the caller could not, not for the first
        assert there[0] == ("mcruntime/informer/c1/ConfigMap", here[1][1])
    finally:
        inf.stop()


def test_a_first_list_its_caller_s_deadline_cuts_mid_page_says_so_and_is_no_failure_of_the_cluster(
    kube: Kube, rest: RESTClient, envtest_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pages of 1, each request 0.5 s late: the caller's 1.3 s end while the third page is
    # under way; the server answered each page in time, so the cluster is not at fault
    ns = kube.namespace()
    for name in ("a", "b", "c"):
        kube.create(ns, name)
    monkeypatch.setattr(_informer, "LIST_PAGE_SIZE", 1)
    monkeypatch.setattr(envtest_server, "latency", 0.5)
    inf = Informer(rest, CONFIGMAPS, namespace=ns, cluster_name="c1")
    raised: list[BaseException] = []
    real_request = rest.request

    def request(method: str, path: str, **kw: Any) -> Any:
        try:
            return real_request(method, path, **kw)
        except Exception as exc:
            raised.append(exc)
            raise

    monkeypatch.setattr(rest, "request", request)
    met = held_back.Met()
    token = held_back.noting(met)
    try:
        with client_deadline(1.3), first_list_here():
            inf.start()
        assert inf.wait_for_sync(10)  # its thread went on with the list
    finally:
        held_back.stop_noting(token)
        inf.stop()
    assert not met.failed
    [cut] = raised
    assert isinstance(cut, DeadlineExceeded) and cut.by_caller, cut
    assert (
        "the list was cut by its caller's deadline (a wait for the cache to sync) after 2 "
        "pages, 2 objects"
    ) in str(cut)


def test_an_informer_stopped_during_its_first_list_here_starts_no_thread(
    envtest_server: Any, rest: RESTClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    envtest_server.freeze()
    inf = Informer(rest, CONFIGMAPS, cluster_name="c1")
    listing = threading.Event()
    started: list[str] = []
    real_list, real_start_thread = _informer._Reflector._list, _informer.start_thread

    def spy(self: Any, **kw: Any) -> None:
        listing.set()
        real_list(self, **kw)

    def start_thread(target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
        started.append(name)
        return real_start_thread(target, name, *args)

    def start_listing_here() -> None:
        with client_deadline(30), first_list_here():
            inf.start()

    monkeypatch.setattr(_informer._Reflector, "_list", spy)
    monkeypatch.setattr(_informer, "start_thread", start_thread)
    lister = threading.Thread(target=start_listing_here, name="lister")
    try:
        lister.start()
        assert listing.wait(10)
        inf.stop()
        rest.close()  # what a cluster that leaves does: its calls end at once
        lister.join(10)
        assert not lister.is_alive()
    finally:
        envtest_server.thaw()
    assert not inf.has_synced()
    assert started == []  # not even a thread that would end at once, after stop() returned
    assert not [t for t in mcruntime_threads() if t.name.startswith("mcruntime/informer/c1/")]


def test_a_watch_cut_after_it_worked_is_watched_again_at_once_without_a_warning(
    envtest_server: Any, kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    """A member's API server replicas restarting one at a time behind one address (a rolling
    upgrade) reset the connections they served; the next connection reaches a replica that
    answers. As client-go's reflector takes it, a watch that worked and was cut is a watch that
    ended: watched again at once from its resourceVersion, nothing lost and nothing warned
    about. It was a warning per informer per replica restart ("listing and watching failed:
    ... connection broken mid-answer"), and an info line when the next watch worked."""
    from mcruntime.envtest import Proxy

    ns = kube.namespace()
    proxy = Proxy(envtest_server).start()
    api = config.new_client_from_config_dict(proxy.kubeconfig())
    rest = RESTClient(api, cluster_name="c1")
    inf = Informer(rest, CONFIGMAPS, namespace=ns, cluster_name="c1")
    rec = Recorder()
    inf.add_event_handler(rec)
    try:
        with caplog.at_level(logging.DEBUG, logger="mcruntime.cache"):
            inf.start()
            assert inf.wait_for_sync(10)
            for i in range(3):
                # (the watch has to have worked: an event, or SHORT_WATCH open)
                kube.create(ns, f"before-{i}")
                rec.wait(lambda ev, i=i: any(k == f"{ns}/before-{i}" for _, k, _, _ in ev))
                proxy.reset_connections()
                kube.create(ns, f"after-{i}")
                rec.wait(lambda ev, i=i: any(k == f"{ns}/after-{i}" for _, k, _, _ in ev))
            cuts = logged(caplog, logging.DEBUG, containing="watch cut after it worked")
            assert len(cuts) == 3, cuts
        assert inf.last_error is None
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
        assert said == [], said
        added = [k for t, k, _, _ in rec.snapshot() if t == "add"]
        assert sorted(added) == sorted(
            f"{ns}/{when}-{i}" for i in range(3) for when in ("before", "after")
        )
    finally:
        inf.stop()
        rest.close()
        api.close()
        proxy.stop()


def test_a_member_restored_from_a_backup_with_its_revision_bumped_is_relisted_to_match(
    envtest_server: Any, kube: Kube, make_informer: Callable[..., Informer]
) -> None:
    """A member's etcd restored from a backup as etcd's procedure for Kubernetes says
    (``--bump-revision``): its resourceVersions jump ahead and its restarted API server
    expires every older one, so the informer's resume gets 410 and it lists again. The cache
    then matches the server, and each object that changed is an event: one changed since the
    backup is updated back, one deleted since is added back, one created since is deleted."""
    ns = kube.namespace()
    kube.create(ns, "changed")
    kube.create(ns, "deleted")
    inf = make_informer(namespace=ns)
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    assert inf.wait_for_sync(10)
    backup = envtest_server.snapshot()
    kube.update(ns, "changed", {"v": "after-the-backup"})
    kube.delete(ns, "deleted")
    kube.create(ns, "created")
    rec.wait(lambda ev: any(k == f"{ns}/created" for _, k, _, _ in ev))
    seen = len(rec.snapshot())
    envtest_server.stop()
    envtest_server.restore(backup, bump_revision=1_000_000)
    envtest_server.start()

    def cached() -> dict[str, Any]:
        return {o["metadata"]["name"]: o.get("data") for o in inf.store.list()}

    wait_for(lambda: cached() == {"changed": None, "deleted": None}, 15, "the cache relisted")
    after = Counter((t, k) for t, k, _, _ in rec.snapshot()[seen:])
    assert after == Counter(
        {
            ("update", f"{ns}/changed"): 1,
            ("add", f"{ns}/deleted"): 1,
            ("delete", f"{ns}/created"): 1,
        }
    )
