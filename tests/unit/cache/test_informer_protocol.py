"""Informer protocol edge cases that a server cannot be made to produce on demand.

A scripted stand-in for mcruntime's own RESTClient interface (request/watch)
plays exact list pages, watch events and errors; the real server is exercised
in tests/integration/cache.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime.cache import Informer
from mcruntime.client import GroupVersionKind, RESTMapping
from mcruntime.errors import Gone

pytestmark = pytest.mark.timeout(20)

CM = RESTMapping(GroupVersionKind("", "v1", "ConfigMap"), "configmaps", True)


def cm(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def page(items: list[dict[str, Any]], rv: str, cont: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"items": items, "metadata": meta}


class Stream:
    def __init__(self, events: list[dict[str, Any]], then_block: bool) -> None:
        self.events = events
        self.then_block = then_block
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for e in self.events:
            if self.closed.is_set():
                return
            yield e
        if self.then_block:
            self.closed.wait()

    def run(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        for e in self:
            on_event(e)

    def close(self) -> None:
        self.closed.set()


class ScriptedREST:
    """Answers list requests and watches from queues; an empty watch queue means a quiet watch."""

    def __init__(self) -> None:
        self.lists: deque[Any] = deque()
        self.watches: deque[Any] = deque()
        self.list_queries: list[dict[str, Any]] = []
        self.watch_queries: list[dict[str, Any]] = []
        self.idle = threading.Event()

    def request(self, method: str, path: str, *, query: Any = None, **_: Any) -> Any:
        self.list_queries.append(dict(query or {}))
        item = self.lists.popleft()
        if isinstance(item, Exception):
            raise item
        return item

    def watch(self, path: str, *, query: Any = None, timeout: Any = None, **_: Any) -> Stream:
        self.watch_queries.append(dict(query or {}))
        if not self.watches:
            self.idle.set()
            return Stream([], then_block=True)
        item = self.watches.popleft()
        if isinstance(item, Exception):
            raise item
        return Stream(item, then_block=False)


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any]] = []

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.events.append(("add", obj["metadata"]["name"], is_initial_list))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.events.append(("update", new["metadata"]["name"], old["metadata"]["resourceVersion"]))

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.events.append(("delete", obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))


def run(rest: ScriptedREST, log: Log | None = None) -> Informer:
    inf = Informer(rest, CM, cluster_name="t")  # type: ignore[arg-type]
    if log is not None:
        inf.add_event_handler(log)
    inf.start()
    assert rest.idle.wait(10), "informer did not reach a quiet watch"
    return inf


def test_expired_list_continuation_falls_back_to_one_full_list() -> None:
    rest = ScriptedREST()
    rest.lists.extend(
        [
            page([cm("a", "1")], "5", cont="t1"),
            Gone("continue expired"),
            page([cm("a", "1"), cm("b", "6")], "7"),
        ]
    )
    inf = run(rest)
    try:
        assert sorted(inf.store.keys()) == ["ns/a", "ns/b"]
        assert rest.list_queries[1]["continue"] == "t1"
        assert "limit" not in rest.list_queries[2] and "continue" not in rest.list_queries[2]
        assert rest.watch_queries[0]["resourceVersion"] == "7"
    finally:
        inf.stop()


def test_expired_error_event_relists_and_delivers_only_the_difference() -> None:
    rest = ScriptedREST()
    rest.lists.extend(
        [
            page([cm("a", "1"), cm("b", "1"), cm("c", "1")], "1"),
            page([cm("a", "2"), cm("c", "1"), cm("d", "3")], "3"),
        ]
    )
    rest.watches.append(
        [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]
    )
    log = Log()
    inf = run(rest, log)
    try:
        assert log.events[:3] == [("add", "a", True), ("add", "b", True), ("add", "c", True)]
        assert sorted(log.events[3:]) == [
            ("add", "d", False),
            ("delete", "b", "1"),
            ("update", "a", "1"),
        ]
        assert rest.watch_queries[-1]["resourceVersion"] == "3"
        assert inf.last_sync_resource_version == "3"
    finally:
        inf.stop()


def test_rewatch_resumes_from_the_last_bookmark_without_relisting() -> None:
    rest = ScriptedREST()
    rest.lists.append(page([cm("a", "1")], "1"))
    rest.watches.append(
        [
            {"type": "MODIFIED", "object": cm("a", "4")},
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
        ]
    )
    log = Log()
    inf = run(rest, log)
    try:
        assert log.events == [("add", "a", True), ("update", "a", "1")]
        assert [q["resourceVersion"] for q in rest.watch_queries] == ["1", "9"]
        assert all(q["allowWatchBookmarks"] for q in rest.watch_queries)
        assert len(rest.list_queries) == 1
    finally:
        inf.stop()


def test_http_gone_on_watch_relists_but_other_errors_rewatch_from_last_version() -> None:
    rest = ScriptedREST()
    rest.lists.extend([page([cm("a", "1")], "1"), page([cm("a", "1")], "8")])
    rest.watches.extend([ConnectionError("boom"), Gone("too old")])
    log = Log()
    inf = run(rest, log)
    try:
        assert [q["resourceVersion"] for q in rest.watch_queries] == ["1", "1", "8"]
        assert len(rest.list_queries) == 2
        assert log.events == [("add", "a", True)]
        assert inf.last_error is None
    finally:
        inf.stop()


def test_handler_removed_by_another_handler_mid_event_gets_nothing_more() -> None:
    rest = ScriptedREST()
    rest.lists.append(page([cm("a", "1"), cm("b", "1")], "1"))
    later = Log()
    regs: list[Any] = []

    class Remover:
        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
            regs[0].remove()

        def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None: ...

        def on_delete(self, obj: dict[str, Any]) -> None: ...

    inf = Informer(rest, CM, cluster_name="t")  # type: ignore[arg-type]
    inf.add_event_handler(Remover())
    regs.append(inf.add_event_handler(later))
    inf.start()
    try:
        assert rest.idle.wait(10)
        assert later.events == []
        assert regs[0].removed
    finally:
        inf.stop()


def test_repeated_expiry_right_after_relisting_backs_off() -> None:
    rest = ScriptedREST()
    expired = [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}]
    rest.lists.extend(page([cm("a", "1")], str(i)) for i in range(4))
    rest.watches.extend([expired, expired, expired])
    inf = Informer(rest, CM, cluster_name="t")  # type: ignore[arg-type]
    started = time.monotonic()
    inf.start()
    try:
        assert rest.idle.wait(10)
        # relists 2 and 3 each wait a backoff step (0.2s, then 0.4s, +/-10%) instead of spinning
        assert time.monotonic() - started >= 0.5
        assert len(rest.list_queries) == 4
    finally:
        inf.stop()


def test_a_metadata_only_informer_cuts_whole_objects_from_a_server_without_the_transform() -> None:
    # a server that ignores as=PartialObjectMetadata answers with whole objects (plain JSON is
    # listed last in the Accept header): the informer still keeps metadata alone
    rest = ScriptedREST()
    whole = {**cm("a", "1"), "kind": "ConfigMap", "apiVersion": "v1", "data": {"k": "secret"}}
    partial = {**cm("b", "2"), "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1"}
    rest.lists.append(page([whole, partial], "2"))
    inf = Informer(rest, CM, cluster_name="t", metadata_only=True)  # type: ignore[arg-type]
    inf.start()
    try:
        assert rest.idle.wait(10), "informer did not reach a quiet watch"
        for key in ("ns/a", "ns/b"):
            obj = inf.store.get(key)
            assert obj is not None and set(obj) == {"apiVersion", "kind", "metadata"}
            assert (obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap")
    finally:
        inf.stop()


def test_a_handler_without_every_method_is_refused_when_added() -> None:
    # Go's toolscache.ResourceEventHandlerFuncs{AddFunc: ...} may leave the others out;
    # here each missing one would fail, and be logged, on every event of its type
    class OnlyAdds:
        def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None: ...

    inf = Informer(ScriptedREST(), CM, cluster_name="t")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="lacks on_update, on_delete .define each of on_add"):
        inf.add_event_handler(OnlyAdds())  # type: ignore[arg-type]
    assert inf.add_event_handler(Log()) is not None
