"""``mcruntime.envtest.wait_for``: the one polling wait of the tests (and of users' tests), and
``wait_for_condition``, which waits for an object's status condition."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from mcruntime import Cluster
from mcruntime.client import Resource
from mcruntime.crd import install_crds
from mcruntime.envtest import (
    APIServer,
    WaitTimeout,
    wait_for,
    wait_for_condition,
    wait_for_event,
)
from mcruntime.recorder import RecorderProvider


def test_returns_the_first_truthy_value():
    values = iter([None, 0, [], {"ready": True}])
    assert wait_for(lambda: next(values), timeout=5, interval=0.001) == {"ready": True}


def test_times_out_naming_what_was_awaited_the_timeout_and_the_last_value():
    began = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        wait_for(lambda: [], timeout=0.1, interval=0.01, what="the lease to be taken")
    assert 0.1 <= time.monotonic() - began < 5
    assert isinstance(caught.value, AssertionError)
    assert str(caught.value) == "timed out after 0.1s waiting for the lease to be taken (last: [])"


def test_a_timeout_on_a_running_event_loop_says_the_wait_held_it():
    # an async test waiting with wait_for holds its own loop: what awaits that loop (a
    # reconcile handing work to it) cannot go on, and the timeout looked like the
    # controller's fault
    async def test() -> str:
        with pytest.raises(WaitTimeout) as caught:
            wait_for(lambda: [], timeout=0.05, interval=0.01, what="the reconcile")
        return str(caught.value)

    said = asyncio.run(test())
    assert said == (
        "timed out after 0.05s waiting for the reconcile (last: []); the wait held the running "
        "asyncio event loop it was called on all along, so nothing awaiting that loop (a "
        "reconcile handing work to it) could go on: in an async test, wait in a thread, "
        "await asyncio.to_thread(wait_for, ...)"
    )


def test_without_a_description_the_predicate_is_named():
    def cache_synced() -> bool:
        return False

    with pytest.raises(WaitTimeout, match="waiting for .*cache_synced"):
        wait_for(cache_synced, timeout=0.05)
    with pytest.raises(WaitTimeout, match=r"waiting for the lambda at test_wait\.py:\d+"):
        wait_for(lambda: False, timeout=0.05)


def test_a_set_stop_event_ends_the_wait_early():
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    began = time.monotonic()
    with pytest.raises(WaitTimeout):
        wait_for(lambda: False, timeout=30, stop=stop, what="never")
    assert time.monotonic() - began < 10


def test_an_exception_of_the_predicate_propagates_at_once():
    def broken() -> bool:
        raise KeyError("gone")

    with pytest.raises(KeyError):
        wait_for(broken, timeout=30)


def test_exceptions_to_ignore_count_as_not_yet_and_a_timeout_names_the_last():
    from mcruntime.errors import NotFound

    calls = iter([NotFound('configmaps "web" not found'), None, {"name": "web"}])

    def read() -> Any:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    assert wait_for(read, timeout=5, interval=0.001, ignore=NotFound) == {"name": "web"}

    def missing() -> Any:
        raise NotFound('configmaps "web" not found')

    with pytest.raises(WaitTimeout) as caught:
        wait_for(missing, timeout=0.05, interval=0.01, what="web", ignore=(NotFound, KeyError))
    assert str(caught.value) == (
        'timed out after 0.05s waiting for web (last: NotFound: configmaps "web" not found)'
    )
    with pytest.raises(ValueError):  # not ignored: at once
        wait_for(lambda: int("x"), timeout=30, ignore=NotFound)
    with pytest.raises(TypeError, match="exception classes"):
        wait_for(lambda: True, ignore="NotFound")  # type: ignore[arg-type]


def _core(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    """A core/v1 object ``name`` of ``kind`` in ``default``, with ``fields``."""
    meta = {"name": name, "namespace": "default"}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, **fields}


@pytest.fixture
def api(envtest_server: APIServer) -> Iterator[Cluster]:
    cluster = Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="waits")
    yield cluster
    cluster.stop()


@pytest.mark.timeout(30)
def test_equals_waits_for_the_value_and_a_timeout_shows_the_one_compared(api: Cluster) -> None:
    client = api.uncached_client
    client.create(_core("ConfigMap", "cm", data={"x": "1", "long": "y" * 500}))

    def x() -> str:
        return str(client.get("v1/ConfigMap", "cm", "default")["data"]["x"])

    with pytest.raises(WaitTimeout) as caught:
        wait_for(x, timeout=0.1, interval=0.01, what="x of cm", equals="2")
    assert str(caught.value) == "timed out after 0.1s waiting for x of cm to equal '2' (last: '1')"
    threading.Timer(
        0.1, lambda: client.patch("v1/ConfigMap", "cm", {"data": {"x": "2"}}, "default")
    ).start()
    assert wait_for(x, timeout=10, equals="2") == "2"
    # a long value is shortened; without what=, the getter is named
    with pytest.raises(WaitTimeout) as caught:
        wait_for(lambda: client.get("v1/ConfigMap", "cm", "default")["data"], 0.05, equals={})
    message = str(caught.value)
    assert re.fullmatch(
        r"timed out after 0\.05s waiting for the lambda at test_wait\.py:\d+ to equal \{\} "
        r"\(last: \{'x': '2', 'long': 'y+\.\.\.\)",
        message,
    ), message
    assert len(message) < 300


def test_equals_takes_falsy_values_and_none() -> None:
    assert wait_for(lambda: 0, timeout=1, equals=0) == 0
    assert wait_for(lambda: None, timeout=1, equals=None) is None
    values = iter([[1], [1], []])
    assert wait_for(lambda: next(values), timeout=5, interval=0.001, equals=[]) == []
    # an ignored exception is "not yet", even when waiting for None
    from mcruntime.errors import NotFound

    def missing() -> None:
        raise NotFound("gone")

    with pytest.raises(WaitTimeout, match=r"to equal None \(last: NotFound: gone\)$"):
        wait_for(missing, timeout=0.05, interval=0.01, ignore=NotFound, equals=None)


@pytest.mark.timeout(30)
def test_a_secret_compared_is_shown_without_its_values(api: Cluster) -> None:
    client = api.uncached_client
    client.create(_core("Secret", "creds", stringData={"password": "hunter2"}))
    # the server's answer holds the value (base64); the timeout shows the Secret without it
    assert client.get("v1/Secret", "creds", "default")["data"]["password"] == "aHVudGVyMg=="

    def creds() -> dict[str, Any]:  # without the long metadata, so that data is not cut off
        return {**client.get("v1/Secret", "creds", "default"), "metadata": {}}

    wanted = _core("Secret", "creds", stringData={"token": "s3cret"})
    with pytest.raises(WaitTimeout) as caught:
        wait_for(creds, timeout=0.05, what="the secret", equals=wanted)
    message = str(caught.value)
    assert "'data': {'password': '***'}" in message  # the keys are shown
    assert "'stringData': {'token': '***'}" in message
    for value in ("hunter2", "aHVudGVyMg", "s3cret"):  # the values, plain or base64, are not
        assert value not in message
    with pytest.raises(WaitTimeout) as caught:
        wait_for(lambda: [creds()], timeout=0.05, equals=[])  # in a list too
    assert "'data': {'password': '***'}" in str(caught.value)
    assert "aHVudGVyMg" not in str(caught.value)


@pytest.mark.timeout(30)
def test_a_part_of_a_secret_compared_is_shown_without_its_values(api: Cluster) -> None:
    # the copier test's natural getter returns the Secret's data (or one value), not the
    # Secret: its values were shown in clear (base64 is no mask)
    client = api.uncached_client
    client.create(_core("Secret", "creds", stringData={"password": "hunter2"}))

    with pytest.raises(WaitTimeout) as caught:
        wait_for(
            lambda: client.get("v1/Secret", "creds", "default")["data"],
            timeout=0.05,
            what="the copied secret data",
            equals={"password": "bmV3"},
        )
    assert str(caught.value) == (
        "timed out after 0.05s waiting for the copied secret data to equal "
        "{'password': '***'} (last: {'password': '***'})"
    )

    def password() -> str:  # through a helper of the test's
        return str(client.get("v1/Secret", "creds", "default")["data"]["password"])

    with pytest.raises(WaitTimeout) as caught:
        wait_for(lambda: password(), timeout=0.05, equals="bmV3")
    assert "to equal '***' (last: '***')" in str(caught.value)
    for value in ("hunter2", "aHVudGVyMg", "bmV3"):
        assert value not in str(caught.value)

    # a getter that reads no Secret shows what it compared, as before
    client.create(_core("ConfigMap", "settings", data={"mode": "lenient"}))
    with pytest.raises(WaitTimeout) as caught:
        wait_for(
            lambda: client.get("v1/ConfigMap", "settings", "default")["data"],
            timeout=0.05,
            equals={"mode": "strict"},
        )
    assert "to equal {'mode': 'strict'} (last: {'mode': 'lenient'})" in str(caught.value)


class Gadget(Resource):
    api_version: ClassVar[str] = "waits.example.com/v1"
    kind: ClassVar[str] = "Gadget"
    spec: dict[str, Any] = {}
    status: dict[str, Any] | None = None


@pytest.fixture
def gadgets(envtest_server: APIServer) -> Iterator[Cluster]:
    cluster = Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="waits")
    install_crds(cluster, [Gadget], timeout=10)
    yield cluster
    cluster.stop()


def _set_ready(cluster: Cluster, status: str, reason: str, message: str) -> None:
    condition = {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    cluster.uncached_client.subresource("status").patch(
        Gadget,
        "g",
        {"status": {"observedGeneration": 1, "conditions": [condition]}},
        "default",
    )


@pytest.mark.timeout(30)
def test_wait_for_condition_waits_for_the_object_and_its_condition(gadgets: Cluster) -> None:
    def later() -> None:
        gadgets.uncached_client.create(Gadget(metadata={"name": "g", "namespace": "default"}))
        _set_ready(gadgets, "True", "Built", "done")

    threading.Timer(0.2, later).start()
    got = wait_for_condition(gadgets.uncached_client, Gadget, "g", "default", timeout=10)
    assert isinstance(got, Gadget) and got.metadata.name == "g"
    raw = wait_for_condition(
        gadgets.uncached_client, "waits.example.com/v1/Gadget", "g", "default", timeout=1
    )
    assert raw["status"]["conditions"][0]["reason"] == "Built"


@pytest.mark.timeout(30)
def test_wait_for_condition_times_out_with_the_objects_last_state(gadgets: Cluster) -> None:
    with pytest.raises(WaitTimeout) as caught:
        wait_for_condition(gadgets.uncached_client, Gadget, "g", "default", timeout=0.2)
    assert str(caught.value) == (
        "timed out after 0.2s waiting for Gadget default/g in cluster waits to be Ready=True "
        "(last: not found)"  # the cluster named: in a fleet, which member's client was read
    )
    gadgets.uncached_client.create(Gadget(metadata={"name": "g", "namespace": "default"}))
    with pytest.raises(WaitTimeout, match=r"\(last: no conditions; generation 1\)$"):
        wait_for_condition(gadgets.uncached_client, Gadget, "g", "default", timeout=0.2)
    _set_ready(gadgets, "False", "NoPaint", "no black paint")
    with pytest.raises(WaitTimeout) as caught:
        wait_for_condition(gadgets.uncached_client, Gadget, "g", "default", timeout=0.2)
    assert str(caught.value).endswith(
        "to be Ready=True (last: Ready=False (NoPaint no black paint); "
        "generation 1, observedGeneration 1)"
    )


@pytest.mark.timeout(60)
def test_wait_for_condition_on_a_hung_server_ends_at_its_timeout(
    gadgets: Cluster, envtest_server: APIServer
) -> None:
    # each read is bounded by the time left, not by the client's default deadline (30 s)
    gadgets.uncached_client.create(Gadget(metadata={"name": "g", "namespace": "default"}))
    envtest_server.freeze()
    try:
        began = time.monotonic()
        with pytest.raises(WaitTimeout, match=r"to be Ready=True \(last: no answer") as caught:
            wait_for_condition(gadgets.uncached_client, Gadget, "g", "default", timeout=0.5)
        assert time.monotonic() - began < 3
        assert "within 30s" not in str(caught.value), str(caught.value)
    finally:
        envtest_server.thaw()


@pytest.mark.timeout(60)
def test_wait_for_on_a_frozen_member_ends_at_its_timeout(make_envtest_fleet: Any) -> None:
    # the getter's client call got the client's default deadline (30 s), past the wait's,
    # and its DeadlineExceeded was an error where the docs promise a WaitTimeout
    from mcruntime.errors import DeadlineExceeded, NotFound

    fleet = make_envtest_fleet(2)
    member = Cluster.from_kubeconfig(fleet["cluster-1"].kubeconfig(), name="cluster-1")
    try:
        fleet.freeze("cluster-1")
        began = time.monotonic()
        with pytest.raises(WaitTimeout) as caught:
            wait_for(
                lambda: member.uncached_client.get("v1/Secret", "copied", "default"),
                timeout=1,
                what="the copied Secret",
                ignore=NotFound,
            )
        took = time.monotonic() - began
        assert took < 3, took
        assert str(caught.value).startswith(
            "timed out after 1s waiting for the copied Secret (last: DeadlineExceeded: "
        ), str(caught.value)
        assert isinstance(caught.value.__cause__, DeadlineExceeded)
        # a deadline of the getter's own, shorter than the wait, is its error, as before
        with pytest.raises(DeadlineExceeded):
            wait_for(
                lambda: member.uncached_client.get("v1/Secret", "copied", "default", timeout=0.2),
                timeout=20,
            )
    finally:
        fleet.thaw("cluster-1")
        member.stop()


def _event(
    name: str, about: dict[str, Any], type: str, reason: str, message: str
) -> dict[str, Any]:
    """A core/v1 Event ``name`` about the object ``about``, as a recorder writes one."""
    meta = about["metadata"]
    ref = {"apiVersion": "v1", "kind": about["kind"], "name": meta["name"]}
    ref.update({k: meta[k] for k in ("namespace", "uid") if k in meta})
    event = _core("Event", name, involvedObject=ref, reason=reason, message=message)
    return {**event, "type": type, "source": {"component": "test"}, "count": 1}


@pytest.mark.timeout(30)
def test_wait_for_event_returns_the_event_a_recorder_posted(api: Cluster) -> None:
    client = api.uncached_client
    web = client.create(_core("ConfigMap", "web"))
    client.create(_core("ConfigMap", "other"))
    provider = RecorderProvider(lambda name: api)
    recorder = provider.get_event_recorder_for("widget-controller")
    try:
        recorder.event(web, "Warning", "SyncFailed", "cannot sync web: quota", cluster_name="c")
        recorder.event(web, "Normal", "Synced", "synced web", cluster_name="c")
        event = wait_for_event(client, reason="Synced", involved=web, timeout=10)
        assert event["message"] == "synced web" and event["type"] == "Normal"
        assert event["involvedObject"]["uid"] == web["metadata"]["uid"]
        assert event["source"]["component"] == "widget-controller"
        failed = wait_for_event(client, type="Warning", involved="ConfigMap/web", timeout=10)
        assert failed["reason"] == "SyncFailed"
        # an object of the same name with another uid (deleted and created again) is another
        again = {**web, "metadata": {**web["metadata"], "uid": "another"}}
        with pytest.raises(WaitTimeout, match="last: 2 other Events"):
            wait_for_event(client, reason="Synced", involved=again, timeout=0.1)
    finally:
        provider.stop()


@pytest.mark.timeout(30)
def test_wait_for_event_finds_an_events_k8s_io_event(api: Cluster) -> None:
    client = api.uncached_client
    client.create(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "p.1", "namespace": "default"},
            "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Scheduled",
            "note": "bound to node-1",
            "type": "Normal",
            "action": "Binding",
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "scheduler",
            "reportingInstance": "scheduler-1",
        }
    )
    event = wait_for_event(client, reason="Scheduled", involved="Pod/p", namespace="default")
    assert event["message"] == "bound to node-1"


@pytest.mark.timeout(30)
def test_wait_for_event_times_out_listing_the_events_that_were_there(api: Cluster) -> None:
    client = api.uncached_client
    web = client.create(_core("ConfigMap", "web"))
    other = client.create(_core("ConfigMap", "other"))
    client.create(_event("a.1", other, "Normal", "Created", "created"))
    client.create(_event("b.1", web, "Warning", "SyncFailed", "cannot sync web: " + "q" * 100))
    with pytest.raises(WaitTimeout) as caught:
        wait_for_event(client, reason="Synced", involved=web, timeout=0.2)
    assert str(caught.value) == (
        "timed out after 0.2s waiting for an Event Synced about ConfigMap default/web in cluster "
        "waits (last: 2 other Events: Warning SyncFailed about ConfigMap default/web: "
        f"'cannot sync web: {'q' * 60}...'; "  # about web first, its message shortened
        "Normal Created about ConfigMap default/other: 'created')"
    )
    for i in range(5):
        client.create(_event(f"c.{i}", other, "Normal", "Updated", f"update {i}"))
    with pytest.raises(WaitTimeout) as caught:
        wait_for_event(client, type="Warning", reason="Deleted", namespace="default", timeout=0.1)
    message = str(caught.value)
    assert message.startswith(
        "timed out after 0.1s waiting for an Event Warning Deleted in default in cluster waits "
        "(last: 7 other Events:"
    )
    assert message.count(" about ConfigMap ") == 5 and message.endswith("; and 2 more)")
    with pytest.raises(WaitTimeout) as caught:
        wait_for_event(client, reason="Synced", namespace="kube-public", timeout=0.05)
    assert str(caught.value).endswith(
        "an Event Synced in kube-public in cluster waits (last: no Events in kube-public)"
    )


@pytest.mark.timeout(30)
def test_wait_for_event_can_wait_for_what_the_event_says(api: Cluster) -> None:
    client = api.uncached_client
    web = client.create(_core("ConfigMap", "web"))
    client.create(_event("a.1", web, "Warning", "SyncFailed", "cannot sync web: quota"))
    client.create(_event("a.2", web, "Warning", "SyncFailed", "cannot sync web: forbidden"))
    event = wait_for_event(client, reason="SyncFailed", involved=web, message="forbidden")
    assert event["metadata"]["name"] == "a.2"
    event = wait_for_event(client, involved=web, message=re.compile(r"web: q[a-z]+$"))
    assert event["metadata"]["name"] == "a.1"
    with pytest.raises(WaitTimeout) as caught:
        wait_for_event(client, involved=web, message="timeout", timeout=0.1)
    assert str(caught.value).startswith(
        "timed out after 0.1s waiting for an Event about ConfigMap default/web saying "
        "'timeout' in cluster waits (last: 2 other Events: Warning SyncFailed about ConfigMap default/web: "
    )
    with pytest.raises(
        WaitTimeout, match=r"an Event in default saying /\^nope/ in cluster waits \(last"
    ):
        wait_for_event(client, message=re.compile("^nope"), namespace="default", timeout=0.1)


def test_wait_for_event_refuses_what_could_never_match() -> None:
    with pytest.raises(ValueError, match="'Normal' or 'Warning', not 'warning'"):
        wait_for_event(None, type="warning", timeout=0)
    with pytest.raises(ValueError, match="takes an object or 'Kind/name', not 'web'"):
        wait_for_event(None, involved="web", timeout=0)
    with pytest.raises(ValueError, match="needs an object with a name"):
        wait_for_event(None, involved={"kind": "ConfigMap", "metadata": {}}, timeout=0)


@pytest.mark.timeout(60)
def test_a_timeout_points_at_the_tests_line_not_at_the_helpers(pytester: pytest.Pytester) -> None:
    # pytest printed wait_for's and _poll's source (about 25 lines) before the message
    pytester.makepyfile(
        test_waits="""
        from mcruntime.envtest import wait_for, wait_for_condition, wait_for_event

        class Empty:  # a client of a cluster with nothing in it
            cluster_name = "empty"

            def get(self, kind, name, namespace=None, timeout=None):
                return {"metadata": {"name": name}}

            def list(self, kind, namespace=None, timeout=None):
                return []

        def test_waits():
            wait_for(lambda: False, timeout=0.01, what="the copy")

        def test_waits_for_a_condition():
            wait_for_condition(Empty(), "v1/Pod", "p", "default", timeout=0.01)

        def test_waits_for_an_event():
            wait_for_event(Empty(), reason="Synced", timeout=0.01)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q", "--tb=long")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "WaitTimeout: timed out after 0.01s waiting for the copy (last: False)" in out
    assert "_wait.py" not in out, out
    assert "def _poll(" not in out and "def wait_for(" not in out, out
