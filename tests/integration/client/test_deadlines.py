"""Deadlines and retries of the client: every call ends by its deadline, a leaving cluster cuts it.

The faults are the ones production shows: a server that accepts connections
and never answers (envtest's ``freeze()``), one that refuses, and one that
throttles or drops a connection (a small HTTP server of the test's own).
"""

from __future__ import annotations

import email.utils
import itertools
import logging
import math
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime.client import DEFAULT_TIMEOUT, _rest, cancelled_by, deadline, retry_counts
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, wait_for
from mcruntime.errors import (
    ClusterLeft,
    ClusterNotAnswering,
    DeadlineExceeded,
    ServerError,
    TooManyRequests,
    Unreachable,
)
from tests._blocked import ended_at_once
from tests._httpserver import Handler, serving
from tests.integration.client._calls import cut_at_once

pytestmark = pytest.mark.timeout(60)

CM = "v1/ConfigMap"


def _cm(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


@pytest.fixture
def server(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    return make_envtest_server("hung")


@pytest.fixture
def cluster(server: APIServer) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(server.kubeconfig(), name="hung")
    c.start()
    c.api_reader.list(CM, "default")  # discovery done, a pooled connection open
    yield c
    c.stop()


def _elapsed(fn: Callable[[], Any]) -> tuple[float, BaseException | None]:
    began = time.monotonic()
    try:
        fn()
    except BaseException as exc:
        return time.monotonic() - began, exc
    return time.monotonic() - began, None


def _calling(
    name: str, fn: Callable[[], Any]
) -> tuple[threading.Thread, list[BaseException | None]]:
    """``fn`` called on a started thread ``name``; the list gets what it raised (or None)."""
    raised: list[BaseException | None] = []
    t = threading.Thread(target=lambda: raised.append(_elapsed(fn)[1]), name=name)
    t.start()
    return t, raised


def _stop_ends_it_at_once(cluster: Cluster, t: threading.Thread) -> None:
    """``t`` is blocked on the hung server; stopping ``cluster`` ends it within a second."""
    t.join(0.3)
    assert t.is_alive(), "not blocked on the hung server"
    began = time.monotonic()
    cluster.stop()
    t.join(5)
    assert not t.is_alive()
    assert time.monotonic() - began < 1.0


def test_the_default_deadline_is_for_controllers_not_minutes() -> None:
    assert 5 <= DEFAULT_TIMEOUT <= 60


def test_every_client_call_on_a_hung_server_ends_at_its_deadline(
    server: APIServer, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    client = cluster.client
    created = client.create(_cm("x"))
    server.freeze()
    calls: dict[str, Callable[[], Any]] = {
        "get": lambda: cluster.api_reader.get(CM, "x", "default", timeout=0.4),
        "list": lambda: cluster.api_reader.list(CM, "default", timeout=0.4),
        "create": lambda: client.create(_cm("y"), timeout=0.4),
        "update": lambda: client.update(created, timeout=0.4),
        "update_status": lambda: client.update_status(created, timeout=0.4),
        "patch": lambda: client.patch(CM, "x", {"data": {"a": "b"}}, "default", timeout=0.4),
        "patch_status": lambda: client.patch_status(CM, "x", {}, "default", timeout=0.4),
        "delete": lambda: client.delete(CM, "x", "default", timeout=0.4),
        "subresource get (a pod's log)": lambda: client.subresource("log").get(
            "v1/Pod", "x", "default", query={"container": "c"}, timeout=0.4
        ),
    }
    with caplog.at_level(logging.DEBUG):
        for name, call in calls.items():
            took, exc = _elapsed(call)
            assert isinstance(exc, DeadlineExceeded), (name, exc)
            assert isinstance(exc, Unreachable)  # callers that catch Unreachable catch it too
            assert 0.35 <= took < 1.5, (name, took)
            # the budget is measured a moment after the deadline is set: 0.4s, or 0.399s
            # when a GIL switch (the in-process server's thread) falls in between
            assert "[cluster hung]" in str(exc), str(exc)
            assert re.search(r"within 0\.(4|39\d)s", str(exc)), str(exc)
    # mcruntime owns its retries: urllib3 never retries behind its back
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]


def test_a_deadline_block_bounds_all_calls_inside_it(server: APIServer, cluster: Cluster) -> None:
    server.freeze()
    began = time.monotonic()
    with deadline(0.5), pytest.raises(DeadlineExceeded):
        cluster.client.create(_cm("a"))
        cluster.client.create(_cm("b"))
    assert time.monotonic() - began < 1.5
    with deadline(0.3):
        assert 0 < (deadline_left := _left()) <= 0.3, deadline_left
        with deadline(5):  # an inner block never extends the outer deadline
            assert _left() <= 0.3


def test_an_event_cuts_the_calls_of_its_block_in_flight_and_after_and_its_watcher_ends(
    server: APIServer, cluster: Cluster
) -> None:
    # a user's own stop event (a CLI's Ctrl-C, a job's cancel) ends a call on a hung server
    # at once, not at its 30 s deadline; the cut is no failure of the cluster
    stop = threading.Event()
    raised: list[BaseException] = []

    def calls() -> None:
        with cancelled_by(stop, "the job was cancelled"):
            for name in ("a", "b"):
                try:
                    cluster.client.create(_cm(name))
                except DeadlineExceeded as exc:
                    raised.append(exc)
        raise raised[-1]

    server.freeze()
    ended_at_once(calls, stop.set, "test-cancelled-by")
    assert [str(e) for e in raised] == [
        "[cluster hung] POST /api/v1/namespaces/default/configmaps: cut: the job was cancelled"
    ] * 2, raised
    # the caller's doing, no failure of the cluster; the first was sent (the server may have
    # carried it out), the second never
    assert [(e.by_caller, e.sent) for e in raised] == [(True, True), (True, False)]
    assert not [th for th in threading.enumerate() if th.name == "mcruntime/cancelled-by"]
    server.thaw()
    # set already: nothing is sent, and no thread is started
    with cancelled_by(stop), pytest.raises(DeadlineExceeded, match="cut: its stop event was set"):
        cluster.api_reader.get(CM, "a", "default")
    with cancelled_by(threading.Event()):  # never set: the calls go on, the watcher ends
        cluster.client.create(_cm("c"))
    wait_for(
        lambda: not [th for th in threading.enumerate() if th.name == "mcruntime/cancelled-by"],
        1,
        "the watcher of the block to end",
    )


def _left() -> float:
    from mcruntime.client import remaining

    left = remaining()
    assert left is not None
    return left


def test_a_call_past_its_deadline_fails_before_sending(server: APIServer, cluster: Cluster) -> None:
    # not "no answer from <server>": nothing was sent, and the error says whose deadline it was
    with deadline(0.0), pytest.raises(DeadlineExceeded) as err:
        cluster.api_reader.get(CM, "nothing", "default")
    assert "GET /api/v1/namespaces/default/configmaps/nothing: not sent: the deadline had " in (
        str(err.value)
    )
    assert "its enclosing deadline() (a reconcile's reconcile_timeout, say) ended" in str(err.value)
    assert "no answer" not in str(err.value)
    with pytest.raises(DeadlineExceeded, match="not sent: the deadline had passed, its timeout"):
        cluster.client.rest.request("GET", "/api/v1/namespaces", timeout=0)
    with deadline(0.0), pytest.raises(DeadlineExceeded, match="WATCH .*: not sent"):
        cluster.client.rest.watch("/api/v1/namespaces")


def test_a_calls_own_timeout_of_zero_is_blamed_for_not_sending_it(
    server: APIServer, cluster: Cluster
) -> None:
    # timeout=0 ended the call: it, not "its enclosing deadline() (a reconcile's ...)"
    for call in (
        lambda: cluster.uncached_client.get(CM, "nothing", "default", timeout=0),
        lambda: cluster.api_reader.list(CM, "default", timeout=0),
    ):
        with pytest.raises(
            DeadlineExceeded, match="not sent: the deadline had passed, its timeout"
        ):
            call()
    with deadline(0.0), pytest.raises(DeadlineExceeded, match="its enclosing deadline"):
        cluster.uncached_client.get(CM, "nothing", "default", timeout=5)


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf")])
def test_a_timeout_that_is_no_number_of_seconds_is_refused_naming_it(
    server: APIServer, cluster: Cluster, timeout: float
) -> None:
    # inf was an OverflowError deep in the call, nan "connection closed mid-answer"
    for call in (
        lambda: cluster.uncached_client.get(CM, "nothing", "default", timeout=timeout),
        lambda: cluster.uncached_client.create(_cm("never"), timeout=timeout),
        lambda: cluster.api_reader.list(CM, "default", timeout=timeout),
    ):
        with pytest.raises(ValueError, match=re.escape(f"timeout={timeout!r}: a call's timeout")):
            call()
    if timeout != timeout or timeout == float("inf"):
        with pytest.raises(ValueError, match=re.escape(f"timeout={timeout!r}")):
            cluster.client.rest.request("GET", "/api/v1/namespaces", timeout=timeout)
    with pytest.raises(ValueError, match="deadline"), deadline(float("nan")):
        pass
    with deadline(float("inf")):  # no bound, as deadline(None)
        assert cluster.api_reader.list("v1/Namespace")


def test_stopping_a_cluster_cuts_its_in_flight_calls_at_once(
    server: APIServer, cluster: Cluster
) -> None:
    server.freeze()
    outcome: list[BaseException] = []
    started = threading.Event()

    def call() -> None:
        started.set()
        try:
            cluster.client.create(_cm("stuck"), timeout=30)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=call, name="test-stuck-call")
    t.start()
    assert started.wait(5)
    _stop_ends_it_at_once(cluster, t)
    assert len(outcome) == 1 and isinstance(outcome[0], ClusterLeft), outcome
    assert "hung" in str(outcome[0]) and "left" in str(outcome[0])
    with pytest.raises(ClusterLeft):
        cluster.client.get(CM, "stuck", "default")


class _Watching:
    """A watch of the default namespace's ConfigMaps, read by a thread of the test."""

    def __init__(self, cluster: Cluster) -> None:
        self.events: list[dict[str, Any]] = []
        self.stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps", timeout=60)
        self.reader = threading.Thread(
            target=lambda: self.stream.run(self.events.append), name="test-watch"
        )
        self.reader.start()

    def sees(self, name: str) -> None:
        """Wait until the watch saw the ConfigMap ``name``."""
        wait_for(
            lambda: any(e["object"]["metadata"]["name"] == name for e in self.events),
            timeout=5,
            what="the watch to see the new ConfigMap",
        )

    def close(self) -> None:
        self.stream.close()
        self.reader.join(5)


def test_cutting_the_calls_in_flight_ends_them_at_once_with_the_reason_and_spares_watches(
    server: APIServer, cluster: Cluster
) -> None:
    # what the manager does when a cluster stops answering its health probes: the calls
    # blocked on it end now, not at their deadlines; a read is not retried on a new
    # connection (it would block again); the open watch and the client go on
    watching = _Watching(cluster)
    server.freeze()
    raised: dict[str, BaseException | None] = {}

    def calling(what: str, fn: Callable[[], Any]) -> threading.Thread:
        t = threading.Thread(target=lambda: raised.update({what: _elapsed(fn)[1]}), name=what)
        t.start()
        return t

    try:
        calls = [
            calling("test-read", lambda: cluster.api_reader.get(CM, "x", "default", timeout=30)),
            calling("test-write", lambda: cluster.client.create(_cm("cut"), timeout=30)),
        ]
        for t in calls:
            t.join(0.3)
            assert t.is_alive(), "not blocked on the frozen server"
        cut_at = time.monotonic()
        cluster.rest.cut_calls("the cluster is not answering (a test)")
        for t in calls:
            t.join(5)
            assert not t.is_alive()
        assert time.monotonic() - cut_at < 1.0
    finally:
        server.thaw()
    for what, exc in raised.items():
        assert isinstance(exc, ClusterNotAnswering) and isinstance(exc, DeadlineExceeded), exc
        assert exc.cluster_name == "hung"
        assert re.match(
            r"\[cluster hung\] (GET|POST) /api/v1/namespaces/default/configmaps\S*: cut after "
            r"[\d.]+s of its 30s deadline: the cluster is not answering \(a test\)$",
            str(exc),
        ), (what, str(exc))
    # the client stays usable, and the watch was not cut: it sees what is written now
    cluster.client.create(_cm("after"))
    watching.sees("after")
    assert watching.reader.is_alive()
    watching.close()


def test_refused_calls_fail_at_once_unsent_until_accepted_and_probes_and_watches_go_on(
    server: APIServer, cluster: Cluster
) -> None:
    # what the manager does while a cluster does not answer its health probes: a call made
    # meanwhile (another cluster's reconcile copying to it) fails at once, not at its deadline
    watching = _Watching(cluster)
    with pytest.raises(ValueError, match="needs the reason"):
        cluster.rest.refuse_calls("")
    cluster.rest.refuse_calls("the cluster is not answering (a test)")
    assert cluster.rest.refusing == "the cluster is not answering (a test)"
    server.freeze()
    try:
        for call in (
            lambda: cluster.client.create(_cm("refused"), timeout=30),
            lambda: cluster.api_reader.get(CM, "x", "default", timeout=30),
            lambda: cluster.rest.watch("/api/v1/namespaces/default/secrets", timeout=30),
        ):
            took, exc = _elapsed(call)
            assert took < 0.5, f"a refused call took {took:.2f}s"
            assert isinstance(exc, ClusterNotAnswering) and exc.cluster_name == "hung", exc
            assert re.match(
                r"\[cluster hung\] (GET|POST|WATCH) /api/v1/namespaces/default/\S+: not sent "
                r"\(calls to it fail at once until it answers again\): the cluster is not "
                r"answering \(a test\)$",
                str(exc),
            ), str(exc)
        # a health probe is sent (and, the server frozen, meets its own deadline)
        took, exc = _elapsed(
            lambda: cluster.rest.request("GET", "/readyz", timeout=0.3, probe=True)
        )
        assert isinstance(exc, DeadlineExceeded) and not isinstance(exc, ClusterNotAnswering), exc
    finally:
        server.thaw()
    assert cluster.rest.request("GET", "/readyz", probe=True) == "ok"
    cluster.rest.accept_calls()
    assert cluster.rest.refusing == ""
    # sent again; the watch opened before stayed open and sees it
    cluster.client.create(_cm("accepted"))
    watching.sees("accepted")
    watching.close()
    # a closed client says the cluster left, refused or not
    cluster.rest.refuse_calls("the cluster is not answering (a test)")
    cluster.stop()
    with pytest.raises(ClusterLeft):
        cluster.rest.request("GET", "/api")


def _a_waiting_call_is_cut_at_once(server: APIServer, url: str, how: str, waits: str) -> None:
    config = server.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = url
    cut_at_once(config, how, waits)


@pytest.mark.parametrize("how", ["cut_calls", "close"])
def test_a_call_waiting_for_its_tls_handshake_is_cut_at_once(server: APIServer, how: str) -> None:
    # a server that takes the TCP connection and never answers the TLS handshake (a hung
    # process, a load balancer with no live backend)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel takes connections; nothing reads them
        url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        _a_waiting_call_is_cut_at_once(server, url, how, "TLS handshake")


@pytest.mark.parametrize("scheme", ["https", "http"])
@pytest.mark.parametrize("how", ["cut_calls", "close"])
def test_a_call_waiting_for_its_tcp_connect_is_cut_at_once(
    server: APIServer, how: str, scheme: str
) -> None:
    # a server whose kernel no longer completes connections (its accept queue is full: a
    # process that stopped accepting; a black-holed address is alike)
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        taken: list[socket.socket] = []
        try:
            while True:  # fill its accept queue: then the kernel drops new SYNs
                probe = socket.socket()
                probe.settimeout(0.3)
                try:
                    probe.connect(("127.0.0.1", port))
                except TimeoutError:
                    probe.close()
                    break
                taken.append(probe)
                assert len(taken) < 64, "the kernel never stopped completing connections"
            _a_waiting_call_is_cut_at_once(server, f"{scheme}://127.0.0.1:{port}", how, "connect")
        finally:
            for s in taken:
                s.close()


def test_opening_a_watch_on_a_hung_server_is_bounded(server: APIServer, cluster: Cluster) -> None:
    server.freeze()
    took, exc = _elapsed(
        lambda: cluster.rest.watch("/api/v1/namespaces/default/configmaps", open_timeout=0.4)
    )
    assert isinstance(exc, DeadlineExceeded), exc
    assert took < 1.5


def test_a_watch_on_the_shared_reader_ends_at_its_silence_bound_when_the_server_hangs(
    server: APIServer, cluster: Cluster
) -> None:
    stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps", timeout=0.5)
    server.freeze()  # the open stream goes silent: connections stay, nothing is sent
    try:
        took, exc = _elapsed(lambda: stream.run(lambda event: None))
    finally:
        server.thaw()
    assert isinstance(exc, Unreachable) and "read timed out" in str(exc), exc
    assert took < 3.0


def test_a_watch_on_the_shared_reader_ends_at_once_when_its_cluster_leaves(
    server: APIServer, cluster: Cluster
) -> None:
    stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps", timeout=60)
    server.freeze()
    outcome: list[BaseException | None] = []
    t = threading.Thread(
        target=lambda: outcome.append(_elapsed(lambda: stream.run(lambda event: None))[1]),
        name="test-shared-watch",
    )
    try:
        t.start()
        _stop_ends_it_at_once(cluster, t)
    finally:
        server.thaw()
    assert outcome == [None], outcome  # ended on purpose: quietly


def test_a_refused_connection_fails_fast_without_retries(
    server: APIServer, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    server.stop()
    with caplog.at_level(logging.DEBUG):
        took, exc = _elapsed(lambda: cluster.api_reader.get(CM, "x", "default", timeout=10))
    assert isinstance(exc, Unreachable) and not isinstance(exc, DeadlineExceeded), exc
    assert "connection refused" in str(exc)
    assert took < 1.0
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]


class _Flaky(Handler):
    """Answers by a script: each request pops the next action (``429``, ``429-refused``,
    ``drop``, ``ok``)."""

    script: list[str] = []
    seen: list[str] = []
    #: set: a ``hang`` request is let go (unanswered)
    released = threading.Event()

    def do_GET(self) -> None:  # noqa: N802
        self._act()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._act()

    def _act(self) -> None:
        action = self.script.pop(0) if self.script else "ok"
        self.seen.append(f"{self.command} {action}")
        if action == "drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if action == "hang":
            self.released.wait(30)
            self.close_connection = True
            return
        if action in ("429", "429-refused", "429-later", "429-bad-detail"):
            body = b'{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429}'
            if action == "429-bad-detail":  # a gateway's Status: its delay is no number
                body = body[:-1] + b',"details":{"retryAfterSeconds":"soon"}}'
            # throttled: come back later; "429-refused" says no such thing
            after = {"429": "0", "429-later": "2", "429-bad-detail": "0"}.get(action)
            self.answer(429, body, headers={"Retry-After": after} if after else None)
        elif action.startswith("503-until-"):  # a load balancer's, by an HTTP date
            when = time.time() + float(action.removeprefix("503-until-"))
            until = email.utils.formatdate(math.ceil(when), usegmt=True)
            self.answer(503, b"<html>down</html>", "text/html", {"Retry-After": until})
        else:
            self.answer(200, b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}')


@pytest.fixture
def flaky() -> Iterator[tuple[Cluster, type[_Flaky]]]:
    handler = type("Handler", (_Flaky,), {"script": [], "seen": [], "released": threading.Event()})
    try:
        with serving(handler, "flaky") as c:
            yield c, handler
    finally:
        handler.released.set()


def test_a_call_cut_while_it_waits_to_retry_ends_at_once_and_is_not_sent_again(
    flaky: tuple[Cluster, type[_Flaky]],
) -> None:
    # a cut that falls in the wait before a retry (a 429's Retry-After: 2): the call ends then
    # with ClusterNotAnswering, not after the wait by sending again to the cluster found not
    # answering (where it would have waited for its deadline)
    cluster, handler = flaky
    handler.script[:] = ["429-later", "hang"]
    t, raised = _calling("test-retrying", lambda: cluster.rest.request("GET", "/api", timeout=20))
    wait_for(lambda: handler.seen == ["GET 429-later"], 5, "the throttled answer")
    cut_at = time.monotonic()
    cluster.rest.cut_calls("the cluster is not answering (a test)")
    t.join(5)
    assert not t.is_alive()
    assert time.monotonic() - cut_at < 1.0
    assert len(raised) == 1 and isinstance(raised[0], ClusterNotAnswering), raised
    assert handler.seen == ["GET 429-later"]


def test_throttled_calls_are_retried_within_the_deadline_and_counted(
    flaky: tuple[Cluster, type[_Flaky]],
) -> None:
    cluster, handler = flaky
    before = retry_counts().get(("flaky", "throttled"), 0)
    handler.script[:] = ["429", "429"]
    obj = cluster.rest.request("POST", "/api/v1/namespaces/default/configmaps", body=_cm("x"))
    assert obj["metadata"]["name"] == "x"
    assert handler.seen == ["POST 429", "POST 429", "POST ok"]
    assert retry_counts()[("flaky", "throttled")] == before + 2
    # a server that keeps throttling: the call ends by its deadline with the server's answer
    handler.script[:] = ["429"] * 100
    took, exc = _elapsed(lambda: cluster.rest.request("GET", "/api", timeout=0.5))
    assert isinstance(exc, TooManyRequests), exc
    assert took < 1.5
    # its Retry-After: 0 asked for no delay: the error says none (client-go omits it too)
    assert exc.retry_after is None


def test_a_throttled_watch_is_opened_again_once_the_server_said_within_its_open_deadline(
    flaky: tuple[Cluster, type[_Flaky]],
) -> None:
    """API Priority and Fairness answers a watch 429 with a Retry-After, as a request: the
    watch is opened again once the server said (counted as a throttled retry), as a request
    is and as client-go's Request.Watch is. It was raised at once, and the informer opened it
    again after its own backoff (0.2 s, 0.4 s, ...), before the server wanted it."""
    cluster, handler = flaky
    before = retry_counts().get(("flaky", "throttled"), 0)
    handler.script[:] = ["429-later"]  # Retry-After: 2
    began = time.monotonic()
    stream = cluster.rest.watch("/api/v1/configmaps", open_timeout=10)
    took = time.monotonic() - began
    stream.close()
    assert handler.seen == ["GET 429-later", "GET ok"]
    assert 1.9 <= took < 4.0, took
    assert retry_counts()[("flaky", "throttled")] == before + 1
    # a Retry-After past the open deadline: the server's answer at once, saying how long to wait
    handler.seen.clear()
    handler.script[:] = ["429-later"] * 5
    took, exc = _elapsed(lambda: cluster.rest.watch("/api/v1/configmaps", open_timeout=1))
    assert isinstance(exc, TooManyRequests), exc
    assert handler.seen == ["GET 429-later"]
    assert took < 1.0, took


def test_a_429_without_retry_after_is_a_refusal_raised_at_once(
    flaky: tuple[Cluster, type[_Flaky]],
) -> None:
    # as client-go: only a server that says when to come back is asked again (an eviction
    # refused by a disruption budget answers 429 without Retry-After)
    cluster, handler = flaky
    handler.script[:] = ["429-refused", "429-refused"]
    took, exc = _elapsed(
        lambda: cluster.rest.request("POST", "/api/v1/namespaces/default/pods/p/eviction", body={})
    )
    assert isinstance(exc, TooManyRequests), exc
    assert handler.seen == ["POST 429-refused"]
    assert took < 1.0


def test_a_429_whose_status_names_no_number_of_seconds_is_throttling_not_a_broken_connection(
    flaky: tuple[Cluster, type[_Flaky]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Status whose ``details.retryAfterSeconds`` is not a number (``"soon"``) is ignored,
    as client-go ignores a delay that does not parse (rest/request.go ``retryAfterSeconds``):
    the call is retried after the ``Retry-After`` header's delay and ends, if the server keeps
    throttling, with `TooManyRequests`. It was `Unreachable: connection closed mid-answer`."""
    cluster, handler = flaky
    handler.script[:] = ["429-bad-detail"]
    assert cluster.rest.request("GET", "/api/v1/namespaces/default/configmaps/x")
    assert handler.seen == ["GET 429-bad-detail", "GET ok"]
    handler.script[:] = ["429-bad-detail"] * 100
    took, exc = _elapsed(lambda: cluster.rest.request("GET", "/api", timeout=0.5))
    assert isinstance(exc, TooManyRequests), exc
    assert took < 1.5

    # whatever fails once the answer was read is no failure of the connection: a bug in
    # reading it is raised as itself, not disguised as the network's fault
    def broken(header: str | None, from_status: float | None) -> float:
        raise ValueError("a bug reading the answer")

    monkeypatch.setattr(_rest, "_retry_after", broken)
    handler.script[:] = ["429"]
    with pytest.raises(ValueError, match="a bug reading the answer"):
        cluster.rest.request("GET", "/api")


def test_a_retry_after_by_http_date_is_waited_for_within_the_deadline(
    flaky: tuple[Cluster, type[_Flaky]],
) -> None:
    """RFC 9110's other form of ``Retry-After`` (a proxy's or load balancer's 503): the call
    waits until then, or fails at once when then is past its deadline. A date was read as no
    delay at all: the call was sent again four times within a second."""
    cluster, handler = flaky
    handler.script[:] = ["503-until-1"]  # (a date has whole seconds: 1 to 2 s from now)
    took, exc = _elapsed(lambda: cluster.rest.request("GET", "/api", timeout=10))
    assert exc is None, exc
    assert handler.seen == ["GET 503-until-1", "GET ok"]
    assert 0.9 <= took < 3.0, took
    handler.seen.clear()
    handler.script[:] = ["503-until-3600"] * 5
    took, exc = _elapsed(lambda: cluster.rest.request("GET", "/api", timeout=5))
    assert isinstance(exc, ServerError), exc
    assert "503 Service Unavailable" in str(exc)
    assert handler.seen == ["GET 503-until-3600"]
    assert took < 1.0, took


def test_a_read_on_a_dropped_connection_is_retried_but_a_write_is_not(
    flaky: tuple[Cluster, type[_Flaky]],
) -> None:
    cluster, handler = flaky
    handler.script[:] = ["drop"]
    assert cluster.rest.request("GET", "/api/v1/namespaces/default/configmaps/x")
    assert handler.seen == ["GET drop", "GET ok"]
    handler.seen.clear()
    handler.script[:] = ["drop"]
    with pytest.raises(Unreachable):
        cluster.rest.request("POST", "/api/v1/namespaces/default/configmaps", body=_cm("x"))
    assert handler.seen == ["POST drop"]


def test_a_watch_cut_mid_stream_reports_the_real_cause(server: APIServer, cluster: Cluster) -> None:
    stream = cluster.rest.watch("/api/v1/namespaces/default/configmaps")
    outcome: list[BaseException] = []
    first = threading.Event()

    def consume() -> None:
        try:
            for _ in stream:
                first.set()
        except BaseException as exc:
            outcome.append(exc)
        finally:
            first.set()

    cluster.client.create(_cm("seen"))
    t = threading.Thread(target=consume, name="test-watch-consumer")
    t.start()
    assert first.wait(5)
    server.stop()  # the connection is cut while the chunked answer is open
    t.join(5)
    server.start()
    assert len(outcome) == 1 and isinstance(outcome[0], Unreachable), outcome
    message = str(outcome[0])
    assert "ValueError" not in message and "mid-answer" in message, message


class _HalfEventThenDribble(Handler):
    """A watch that sends one event, then half of the next and a space every 0.1 s after it,
    for 6 s: bytes, each within the silence bound, that never end the line."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def chunk(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        paced = threading.Event()  # never set: the pace of the dribble
        try:
            chunk(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n')
            chunk(b'{"type":"ADDED","object":{"metadata":')
            for _ in range(60):
                paced.wait(0.1)
                chunk(b" ")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            return  # the client gave up


@pytest.mark.parametrize("shared", [True, False])
def test_a_watch_that_dribbles_an_event_it_never_ends_is_silent_at_its_bound(
    shared: bool,
) -> None:
    """Half an event and then a byte now and then: each read came well within the silence
    bound, so the stream never counted as silent and its reader waited on it for as long as
    the bytes came (an informer's for good, on a path that kept doing so). The bound now
    runs from when the unfinished line began."""
    events: list[dict[str, Any]] = []
    with serving(_HalfEventThenDribble, "dribbling") as c:
        stream = c.rest.watch("/api/v1/namespaces/default/configmaps", timeout=1)
        began = time.monotonic()
        with pytest.raises(Unreachable) as info:
            if shared:
                stream.run(events.append)
            else:
                events.extend(stream)
        took = time.monotonic() - began
    assert [e["object"]["metadata"]["name"] for e in events] == ["a"]
    assert 0.9 < took < 4.5, took  # (the dribble goes on for 6 s)
    assert str(info.value).endswith(": read timed out"), info.value


@pytest.mark.parametrize("slow", ["headers", "body"])
def test_an_answer_that_comes_in_too_slowly_ends_at_the_deadline(slow: str) -> None:
    # an overloaded API server or a congested link: a byte now and then keeps each read
    # within the socket's timeout, and used to keep the call going long past its deadline
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 40\r\n"
    body = b"{" + b" " * 38 + b"}"
    # the rest of the headers a byte at a time, or all of them and then the body so
    fast, drip = (head, b"X-Padding: " + b"p" * 40 + b"\r\n\r\n" + body)
    if slow == "body":
        fast, drip = head + b"\r\n", body

    class Dripping(Handler):
        def do_GET(self) -> None:
            try:
                self.wfile.write(fast)
                self.wfile.flush()
                for byte in drip:  # 0.2 s apart: 8 s or more in all
                    time.sleep(0.2)
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
            except OSError:
                return  # the client gave up

    with serving(Dripping, "dripping") as c:
        elapsed, exc = _elapsed(lambda: c.rest.request("GET", "/api", timeout=1))
        assert isinstance(exc, DeadlineExceeded), exc
        assert elapsed < 1.5
        assert str(exc).endswith(
            "within 1s (an answer was coming in, too slowly to end in time)"
        ), str(exc)


class _DrippingWatch(Handler):
    """Lists at once; answers a watch with a status line, then its headers a byte at a time
    (an overloaded API server or a congested link: each byte well within a read's timeout)."""

    watches: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        if "watch=true" not in self.path:
            self.answer(
                200, b'{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[]}'
            )
            return
        self.watches.append(self.path)
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            self.wfile.flush()
            for byte in b"Content-Type: application/json\r\nX-Padding: " + b"p" * 200:
                time.sleep(0.05)  # 10 s or more in all
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
        except OSError:
            return  # the client gave up


def _informer_until(
    handler: type[Handler], name: str, caplog: pytest.LogCaptureFixture, until: Callable[[], bool]
) -> Any:
    """An informer of ConfigMaps of cluster ``name`` served by ``handler``, synced and run
    (its log at INFO captured) until ``until()``, then stopped; returned."""
    from mcruntime.cache import Informer
    from tests.integration.cache._cache_helpers import CONFIGMAPS

    with serving(handler, name) as c:
        inf = Informer(c.rest, CONFIGMAPS, cluster_name=name)
        try:
            with caplog.at_level(logging.INFO, logger="mcruntime.cache"):
                inf.start()
                assert inf.wait_for_sync(5)
                wait_for(until, timeout=10)
        finally:
            inf.stop()
    return inf


def test_a_watch_whose_headers_trickle_in_ends_at_its_open_deadline() -> None:
    # a watch's stream has no end, but its opening has: the status line and the headers
    handler = type("Handler", (_DrippingWatch,), {"watches": []})
    with serving(handler, "dripping") as c:
        elapsed, exc = _elapsed(
            lambda: c.rest.watch("/api/v1/namespaces/default/configmaps", open_timeout=1)
        )
        assert isinstance(exc, DeadlineExceeded), exc
        assert elapsed < 1.5
        assert str(exc).endswith(
            "within 1s (the watch's answer was coming in, too slowly to begin in time)"
        ), str(exc)
        assert "[cluster dripping] WATCH /api/v1/namespaces/default/configmaps: " in str(exc)


def test_an_informer_whose_watch_headers_trickle_in_retries_and_logs_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tests._logs import logged

    monkeypatch.setattr(_rest, "WATCH_OPEN_TIMEOUT", 0.5)
    handler = type("Handler", (_DrippingWatch,), {"watches": []})
    # each watch ends by its open deadline and is opened again after backoff
    inf = _informer_until(handler, "dripping", caplog, lambda: len(handler.watches) >= 3)
    assert isinstance(inf.last_error, DeadlineExceeded), inf.last_error
    (warning,) = logged(caplog, logging.WARNING, logger="mcruntime.cache")
    assert warning.startswith(
        "cluster=dripping informer kind=v1/ConfigMap: listing and watching failed: "
        "[cluster dripping] WATCH /api/v1/configmaps: no answer from 127.0.0.1:"
    ), warning
    assert "too slowly to begin in time" in warning, warning


class _ThrottledWatch(Handler):
    """Lists at once; answers each watch as kube-apiserver's API Priority and Fairness filter
    does under overload: 429, ``Retry-After: 1``, a text/plain body."""

    watches: list[float] = []

    def do_GET(self) -> None:  # noqa: N802
        if "watch=true" not in self.path:
            self.answer(
                200, b'{"kind":"ConfigMapList","metadata":{"resourceVersion":"7"},"items":[]}'
            )
            return
        self.watches.append(time.monotonic())
        self.answer(
            429,
            b"Too many requests, please try again later.\n",
            "text/plain; charset=utf-8",
            {"Retry-After": "1"},
        )


def test_an_informer_throttled_past_its_retries_waits_as_long_as_the_server_asked(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A watch still throttled when its retries run out (one attempt here) is opened again
    after the server's Retry-After, not after the informer's shorter backoff (0.2 s, 0.4 s,
    0.8 s: three more requests to an overloaded server within its one second); one warning
    for the streak, naming the throttling. The error says how long (``retry_after``, from the
    header of an answer without a Status, as client-go's error says it)."""
    from tests._logs import logged

    monkeypatch.setattr(_rest, "MAX_ATTEMPTS", 1)
    handler = type("Handler", (_ThrottledWatch,), {"watches": []})
    inf = _informer_until(handler, "throttled", caplog, lambda: len(handler.watches) >= 4)
    gaps = [b - a for a, b in itertools.pairwise(handler.watches[:4])]
    assert all(g >= 0.9 for g in gaps), gaps
    assert isinstance(inf.last_error, TooManyRequests), inf.last_error
    assert inf.last_error.retry_after == 1
    (warning,) = logged(caplog, logging.WARNING, logger="mcruntime.cache")
    assert warning.startswith(
        "cluster=throttled informer kind=v1/ConfigMap: listing and watching failed: "
        "[cluster throttled] Too many requests, please try again later."
    ), warning


def test_retries_are_counted_per_client_not_per_cluster_name(
    flaky: tuple[Cluster, type[_Flaky]],
) -> None:
    # two managers in one process (tests, a program with two) each have a local cluster "" and
    # may have clusters of one name: the retries of one were shown on the other's
    # mcruntime_client_retries_total, and closing one's client reset the other's counter
    cluster, handler = flaky
    other = cluster.clone()  # another client of the same name
    try:
        handler.script[:] = ["429", "429"]
        cluster.rest.request("POST", "/api/v1/namespaces/default/configmaps", body=_cm("x"))
        assert cluster.rest.retry_counts() == {"throttled": 2}
        assert other.rest.retry_counts() == {}
        assert retry_counts()[("flaky", "throttled")] >= 2  # the process's, all clients'
    finally:
        other.stop()
    assert cluster.rest.retry_counts() == {"throttled": 2}  # the other's close reset nothing
