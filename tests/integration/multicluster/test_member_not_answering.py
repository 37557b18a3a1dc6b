"""A member the health check found not answering, met by another cluster's reconcile.

The hold keeps back a hung cluster's own requests; a hub's request that copies an
object to every member reaches the hung one anyway. Its call fails at once (it would
wait its whole deadline, 30 s), and the request waits, without backoff, until the
member answers again: it is retried then, not before and not a backoff's delay after.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import (
    AlreadyExists,
    ClusterNotAnswering,
    ClusterNotFound,
    DeadlineExceeded,
    Unreachable,
)
from mcruntime.providers import clusters
from mcruntime.reconcile import Request, Result
from tests._logs import logged
from tests.integration.manager._http import get
from tests.integration.multicluster._mc_helpers import (
    CM,
    NOTICED,
    RETRY,
    TIMEOUT,
    Recorder,
    configmap,
    configmap_controller,
    create_cms,
    fast_health,
    fleet_provider,
    running,
    thread_names,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)


class _HubAndMember:
    """Clusters "hub" and "member"; each of the hub's ConfigMaps is copied to the member by a
    reconcile of the hub's request (``def``, or ``async def`` with a task group). With
    ``caught``, the reconcile catches what the member raised and asks to run again in 30 s
    (as a copier that goes on with the other members and writes a summary does). With
    ``copy_timeout``, the copy's call has that deadline rather than the client's 30 s."""

    def __init__(
        self,
        make_envtest_server: Any,
        style: str = "def",
        caught: bool = False,
        copy_timeout: float | None = None,
        unnamed: bool = False,
    ) -> None:
        self.servers = {n: make_envtest_server(n) for n in ("hub", "member")}
        if unnamed:  # added without `name=`, as a test's set-up may: engaged under the name
            self.provider = clusters.Provider()
            for n, srv in self.servers.items():
                self.provider.add(n, Cluster.from_kubeconfig(srv.kubeconfig()))
        else:
            self.provider = fleet_provider(self.servers.values())
        self.mgr = mcruntime.Manager(
            provider=self.provider,
            options=fast_health(debug_bind_address="127.0.0.1:0"),
        )
        self.copy_timeout = copy_timeout
        self._lock = threading.Lock()
        #: (name, what the copy raised or None, how long it took, when it ended)
        self.copies: list[tuple[str, BaseException | None, float, float]] = []
        reconcile = self._reconcile_async if style == "async def" else self._reconcile
        self.caught = caught
        self.ctrl = configmap_controller(self.mgr, Recorder(reconcile))

    def _copy(self, req: Request) -> None:
        began = time.monotonic()
        error: BaseException | None = None
        try:
            try:
                member = self.mgr.get_cluster("member")
            except ClusterNotFound:
                return  # it left: nothing to copy to
            with contextlib.suppress(AlreadyExists):
                member.client.create(
                    configmap(req.name, req.namespace, copy="yes"), timeout=self.copy_timeout
                )
        except BaseException as exc:
            error = exc
            raise
        finally:
            now = time.monotonic()
            with self._lock:
                self.copies.append((req.name, error, now - began, now))

    def _reconcile(self, req: Request) -> Result | None:
        if req.cluster_name == "hub":
            try:
                self._copy(req)
            except Unreachable:
                if not self.caught:
                    raise
                return Result(requeue_after=30)
        return None

    async def _reconcile_async(self, req: Request) -> Result | None:
        if req.cluster_name != "hub":
            return None
        hub = self.mgr.get_cluster("hub").client
        if self.caught:  # the copy, and a read of the original; their errors kept
            copied, _ = await asyncio.gather(
                asyncio.to_thread(self._copy, req),
                asyncio.to_thread(hub.get, CM, req.name, req.namespace),
                return_exceptions=True,
            )
            return Result(requeue_after=30) if isinstance(copied, Unreachable) else None
        async with asyncio.TaskGroup() as group:  # the copy, and a read of the original
            group.create_task(asyncio.to_thread(self._copy, req))
            group.create_task(asyncio.to_thread(hub.get, CM, req.name, req.namespace))
        return None

    def attempts(self, name: str) -> list[tuple[BaseException | None, float, float]]:
        with self._lock:
            return [(e, took, t) for n, e, took, t in self.copies if n == name]

    def freeze_member(self) -> None:
        """Freeze the member and wait until the manager found it not answering."""
        self.servers["member"].freeze()
        wait_for(
            lambda: getattr(self.mgr.health.state("member"), "stuck", ""),
            timeout=NOTICED,
            what="the member noticed not answering",
        )

    @contextlib.contextmanager
    def frozen_member(self) -> Iterator[None]:
        """The member frozen and found not answering (`freeze_member`), thawed at the end."""
        try:
            self.freeze_member()
            yield
        finally:
            self.servers["member"].thaw()

    def copied_after_answer(self, name: str) -> float:
        """Wait for the copy of ``name`` made once the member answers again (the member
        thawed); how long after the manager heard from it."""
        state = self.mgr.health.state("member")
        assert state is not None
        answered: list[float] = []

        def copied() -> bool:
            if state.healthy and not answered:
                answered.append(time.monotonic())
            return any(e is None for e, _, _ in self.attempts(name))

        wait_for(copied, timeout=NOTICED + 5, what=f"the copy of {name} once the member answers")
        done = min(t for e, _, t in self.attempts(name) if e is None)
        assert answered, "copied before the manager heard from the member"
        return done - answered[0]

    def probed_again(self, times: int) -> None:
        """Wait until the member was probed ``times`` more times (and found still silent)."""
        state = self.mgr.health.state("member")
        assert state is not None
        first = state.last_probe
        wait_for(
            lambda: state.last_probe >= first + times * RETRY and not state.healthy,
            timeout=times * (RETRY + TIMEOUT) + 5,
            what=f"{times} more probes of the member",
        )


def test_a_call_to_a_member_found_not_answering_fails_at_once_and_names_why(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime")
    fleet = _HubAndMember(make_envtest_server)
    fleet.mgr.start()
    try:
        wait_for(lambda: set(fleet.mgr.engaged_clusters()) == {"hub", "member"}, what="engaged")
        fleet.freeze_member()
        create_cms(fleet.servers["hub"], ["h1"])
        wait_for(lambda: fleet.attempts("h1"), timeout=10, what="the copy of h1 tried")
        error, took, _ = fleet.attempts("h1")[0]
        assert isinstance(error, ClusterNotAnswering), error
        assert took < 1.0, f"the call to the member found not answering took {took:.1f}s"
        assert str(error) == (
            "[cluster member] POST /api/v1/namespaces/default/configmaps: not sent (calls to "
            "it fail at once until it answers again): the cluster is not answering (its "
            f"health probe, GET /readyz, got no answer within {TIMEOUT:g}s)"
        )
    finally:
        began = time.monotonic()
        fleet.mgr.stop()
        stopped = time.monotonic() - began
        fleet.servers["member"].thaw()
    assert stopped < 5, f"the stop waited {stopped:.1f}s"
    assert not threads_for("member")
    # said once each: the member's health, and the hub's request that waits for it
    (health,) = logged(caplog, logging.WARNING, starting="cluster=member health: ")
    assert "; calls to it fail at once meanwhile; probing every 0.2s;" in health, health
    (failed,) = logged(caplog, logging.WARNING, starting="cluster=hub controller=configmaps: ")
    assert "(request default/h1); retried as soon as cluster member answers again" in (failed), (
        failed
    )


def test_a_read_of_a_kind_the_member_never_synced_fails_at_once_while_it_does_not_answer(
    make_envtest_server: Any,
) -> None:
    # its informer's list cannot be answered: the read would wait for the cache's sync
    # timeout or the reconcile's deadline
    fleet = _HubAndMember(make_envtest_server)
    with running(fleet.mgr):
        with fleet.frozen_member():
            cache = fleet.mgr.get_cluster("member").client
            began = time.monotonic()
            with pytest.raises(ClusterNotAnswering) as raised:
                cache.list("v1/Secret", "default")
            took = time.monotonic() - began
        assert took < 1.0, f"the read took {took:.1f}s"
        assert str(raised.value) == (
            "[cluster member] informer for v1/Secret not synced, and reads of it fail at once "
            "until the cluster answers again: the cluster is not answering (its health probe, "
            f"GET /readyz, got no answer within {TIMEOUT:g}s)"
        )
        wait_for(
            lambda: cache.list("v1/Secret", "default") is not None,
            ignore=ClusterNotAnswering,
            what="the read once the member answers",
        )


@pytest.mark.parametrize(
    ("style", "unnamed"),
    [("def", False), ("async def", False), ("def", True)],
    ids=["def", "async def", "a Cluster added without its name"],
)
def test_a_request_that_failed_on_a_member_not_answering_is_retried_once_it_answers_not_before(
    make_envtest_server: Any, style: str, unnamed: bool
) -> None:
    fleet = _HubAndMember(make_envtest_server, style, unnamed=unnamed)
    with running(fleet.mgr):
        with fleet.frozen_member():
            create_cms(fleet.servers["hub"], ["h1"])
            wait_for(lambda: fleet.attempts("h1"), timeout=10, what="the copy of h1 tried")
            fleet.probed_again(4)
            # retried with backoff, it would have failed again at 5, 10, 20, 40 ... ms
            tries = fleet.attempts("h1")
            assert len(tries) == 1, f"retried {len(tries) - 1} times while the member was silent"
            assert isinstance(tries[0][0], ClusterNotAnswering)
            assert str(tries[0][0]).startswith("[cluster member] POST "), tries[0][0]
            assert not fleet.mgr.cluster_answering("member")
            assert fleet.mgr.cluster_answering("hub") and not fleet.mgr.cluster_answering("x")
            # where it is: not in the queue, waiting for the member, said by the gauge
            assert [r.key for r in fleet.ctrl.waiting_requests()["member"]] == ["default/h1"]
            waiting = {"controller": "configmaps", "cluster": "member"}
            assert fleet.mgr.metrics.sample("mcruntime_controller_waiting_requests", waiting) == 1
            assert fleet.mgr.debug_address is not None
            page = get(fleet.mgr.debug_address, "/debug/reconciles")[1]
            assert (
                "  waiting for cluster member to answer: 1 (retried at its first answer): "
                "hub/default/h1\n"
            ) in page, page
        late = fleet.copied_after_answer("h1")
        assert late < 1.0, f"copied {late:.2f}s after the member answered again"
        # written: read from the API (the member's cache sees it when its watch delivers it)
        member = fleet.mgr.get_cluster("member").api_reader
        assert member.get(CM, "h1", "default")["data"] == {"copy": "yes"}
        assert fleet.ctrl.waiting_requests() == {}
        assert fleet.mgr.cluster_answering("member")
        assert fleet.mgr.metrics.sample("mcruntime_controller_waiting_requests", waiting) is None


@pytest.mark.parametrize("style", ["def", "async def"])
def test_a_reconcile_that_caught_what_a_member_not_answering_raised_runs_again_once_it_answers(
    make_envtest_server: Any, style: str
) -> None:
    # it went on (a copier writes the other members and its summary) and asked to run again
    # in 30 s: it runs again at the member's first answer, not 30 s later
    fleet = _HubAndMember(make_envtest_server, style, caught=True)
    with running(fleet.mgr):
        with fleet.frozen_member():
            create_cms(fleet.servers["hub"], ["h1"])
            wait_for(lambda: fleet.attempts("h1"), timeout=10, what="the copy of h1 tried")
            wait_for(
                lambda: [r.key for r in fleet.ctrl.waiting_requests().get("member", [])],
                equals=["default/h1"],
                what="the request waiting for the member",
            )
            fleet.probed_again(2)
            tries = fleet.attempts("h1")
            assert len(tries) == 1, f"run {len(tries) - 1} more times while the member was silent"
            assert isinstance(tries[0][0], ClusterNotAnswering)
        late = fleet.copied_after_answer("h1")
        assert late < 1.0, f"copied {late:.2f}s after the member answered again"
        assert fleet.ctrl.waiting_requests() == {}


def test_a_reconcile_that_caught_what_a_stopped_member_raised_runs_again_once_it_answers(
    make_envtest_server: Any,
) -> None:
    # its calls are refused, not cut or held: each fails at once anyway; the request waits
    # for the member's first answer all the same, not for its 30 s
    fleet = _HubAndMember(make_envtest_server, caught=True)
    member = fleet.servers["member"]
    with running(fleet.mgr):
        member.stop()
        try:
            wait_for(
                lambda: not fleet.mgr.cluster_answering("member"),
                timeout=NOTICED,
                what="the member noticed not answering",
            )
            create_cms(fleet.servers["hub"], ["h1"])
            wait_for(
                lambda: [r.key for r in fleet.ctrl.waiting_requests().get("member", [])],
                equals=["default/h1"],
                what="the request waiting for the member",
            )
            ((error, _, _),) = fleet.attempts("h1")
            assert type(error) is Unreachable, error
        finally:
            member.start()
        late = fleet.copied_after_answer("h1")
        assert late < 1.0, f"copied {late:.2f}s after the member answered again"


def test_a_reconcile_that_caught_a_member_s_failure_before_it_was_found_silent_runs_again_at_its_answer(
    make_envtest_server: Any,
) -> None:
    # the copy ran into its own 0.1 s deadline before the health check found the member
    # silent (its probe waits 0.5 s): nothing held the member back when the reconcile
    # ended, so the request runs again with backoff, and, once the member is held back,
    # waits for its answer rather than for its 30 s
    fleet = _HubAndMember(make_envtest_server, caught=True, copy_timeout=0.1)
    with running(fleet.mgr):
        member = fleet.servers["member"]
        member.freeze()
        try:
            create_cms(fleet.servers["hub"], ["h1"])
            wait_for(lambda: fleet.attempts("h1"), timeout=10, what="the copy of h1 tried")
            first = fleet.attempts("h1")[0][0]
            assert type(first) is DeadlineExceeded, f"not its own deadline: {first!r}"
            wait_for(
                lambda: [r.key for r in fleet.ctrl.waiting_requests().get("member", [])],
                equals=["default/h1"],
                timeout=NOTICED,
                what="the request waiting for the member",
            )
            tries = len(fleet.attempts("h1"))
            fleet.probed_again(2)
            assert len(fleet.attempts("h1")) == tries, "run again while the member was silent"
        finally:
            member.thaw()
        late = fleet.copied_after_answer("h1")
        assert late < 1.0, f"copied {late:.2f}s after the member answered again"
        assert fleet.ctrl.waiting_requests() == {}


def test_a_roll_up_that_asked_if_a_member_answers_runs_again_at_its_answer(
    make_envtest_server: Any,
) -> None:
    # the member's cache keeps the last state it saw and does not fail: the roll-up asks the
    # manager (cluster_answering) and reports the member unknown; having asked, it runs
    # again at the member's first answer, though nothing of the member changed
    servers = {n: make_envtest_server(n) for n in ("hub", "member")}
    mgr = mcruntime.Manager(provider=fleet_provider(servers.values()), options=fast_health())
    states: dict[str, list[tuple[float, str]]] = {}

    def roll_up(req: Request) -> None:
        if req.cluster_name != "hub":
            return
        state = "unknown"
        if mgr.cluster_answering("member"):
            names = {o["metadata"]["name"] for o in mgr.get_cluster("member").client.list(CM)}
            state = "present" if req.name in names else "missing"
        states.setdefault(req.name, []).append((time.monotonic(), state))

    configmap_controller(mgr, Recorder(roll_up))
    with running(mgr):
        member = mgr.get_cluster("member")
        member.client.list(CM)  # (its informer synced before the freeze)
        servers["member"].freeze()
        try:
            wait_for(lambda: not mgr.cluster_answering("member"), timeout=NOTICED, what="noticed")
            create_cms(servers["hub"], ["h1"])
            wait_for(lambda: states.get("h1"), timeout=10, what="the roll-up of h1")
            assert [s for _, s in states["h1"]] == ["unknown"]
        finally:
            servers["member"].thaw()
        health = mgr.health.state("member")
        assert health is not None
        wait_for(lambda: health.healthy, timeout=NOTICED, what="the member answering again")
        answered = time.monotonic()
        wait_for(lambda: states["h1"][-1][1], equals="missing", timeout=5, what="h1 rolled up")
        late = states["h1"][-1][0] - answered
        assert late < 1.0, f"rolled up {late:.2f}s after the member answered"


def test_a_member_frozen_again_and_again_is_caught_up_each_time_and_leaves_nothing_behind(
    make_envtest_server: Any,
) -> None:
    # refusing, accepting and waiting requests, cycle after cycle: each thaw catches the
    # member up, nothing keeps waiting, and the threads are those of the first cycle
    fleet = _HubAndMember(make_envtest_server)
    threads: list[set[str]] = []
    with running(fleet.mgr):
        for cycle in range(4):
            name = f"h{cycle}"
            with fleet.frozen_member():
                create_cms(fleet.servers["hub"], [name])
                wait_for(
                    lambda n=name: fleet.attempts(n), timeout=10, what=f"the copy of {name} tried"
                )
                wait_for(
                    lambda: [r.key for r in fleet.ctrl.waiting_requests().get("member", [])],
                    equals=[f"default/{name}"],
                    what="the request waiting for the member",
                )
            wait_for(
                lambda n=name: any(e is None for e, _, _ in fleet.attempts(n)),
                timeout=NOTICED + 5,
                what=f"the copy of {name} once the member answers",
            )
            assert fleet.ctrl.waiting_requests() == {}
            assert fleet.mgr.get_cluster("member").rest.refusing == ""
            threads.append(thread_names())
    assert threads[-1] <= threads[0], threads[-1] - threads[0]


def test_a_request_waiting_on_a_member_that_leaves_is_retried(make_envtest_server: Any) -> None:
    fleet = _HubAndMember(make_envtest_server)
    with running(fleet.mgr), fleet.frozen_member():
        create_cms(fleet.servers["hub"], ["h1"])
        wait_for(lambda: fleet.attempts("h1"), timeout=10, what="the copy of h1 tried")
        fleet.provider.remove("member")
        wait_for(
            lambda: len(fleet.attempts("h1")) == 2,
            timeout=10,
            what="the request retried once the member left",
        )
        assert fleet.attempts("h1")[1][0] is None  # no member to copy to: done
        wait_for(lambda: not threads_for("member"), timeout=5, what="no thread of member")


def test_a_task_group_failing_on_a_member_not_answering_is_one_warning_naming_it(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # its members' errors raised together (a task group) read as the one error raised alone:
    # a warning per streak that names the member and says when the request is retried,
    # not an error with a traceback at every run
    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")
    fleet = _HubAndMember(make_envtest_server, "async def")
    with running(fleet.mgr):
        with fleet.frozen_member():
            create_cms(fleet.servers["hub"], ["h1"])
            wait_for(
                lambda: fleet.ctrl.waiting_requests().get("member"),
                timeout=10,
                what="the request waiting for the member",
            )
        wait_for(
            lambda: any(e is None for e, _, _ in fleet.attempts("h1")),
            timeout=NOTICED + 5,
            what="the copy made once the member answers",
        )
    lines = [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.name == "mcruntime.controller" and "default/h1" in r.getMessage()
    ]
    assert [level for level, _ in lines if level in ("WARNING", "ERROR")] == ["WARNING"], lines
    warning = next(text for level, text in lines if level == "WARNING")
    assert "[cluster member] POST /api/v1/namespaces/default/configmaps: not sent" in warning
    assert "retried as soon as cluster member answers again" in warning
