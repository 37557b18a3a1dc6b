"""A stop that leaves work running past ``graceful_shutdown_timeout`` is an error of the
manager's end, as controller-runtime's ``Start`` returns ``failed waiting for all runnables
to end within grace period of 30s: context deadline exceeded`` (pkg/manager/internal.go,
``engageStopProcedure``) and a kubebuilder ``main`` then exits 1. Before, ``run()`` returned,
the end of a ``with mgr:`` block passed, and ``cli.run(mgr)`` answered 0: the orchestrator saw
a clean exit of a process that had abandoned a reconcile half-way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator

import pytest

import mcruntime
from mcruntime.envtest import APIServer
from mcruntime.errors import GracePeriodExceeded
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request
from tests.integration.controller._controller_helpers import run_in_thread
from tests.integration.multicluster._mc_helpers import create_cms

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test: what hung past the stop ends then."""
    event = threading.Event()
    yield event
    event.set()


def _hung_reconcile(
    server: APIServer, release: threading.Event, grace: float, name: str = "stuck"
) -> tuple[Manager, threading.Event]:
    """A manager whose ConfigMap controller ``web`` hangs on ``default/<name>`` (created)
    until ``release``; and the event set once that reconcile began."""
    mgr = Manager(server.kubeconfig(), options=ManagerOptions(graceful_shutdown_timeout=grace))
    began = threading.Event()

    def reconcile(req: Request) -> None:
        if req.name == name:
            began.set()
            release.wait(20)  # (not a call to the cluster: nothing cuts it)

    mcruntime.controller_managed_by(mgr).named("web").for_("v1/ConfigMap").complete(reconcile)
    create_cms(server, [name])
    return mgr, began


def test_the_end_of_a_with_block_raises_naming_the_reconcile_still_running(
    envtest_server: APIServer, release: threading.Event
) -> None:
    mgr, began = _hung_reconcile(envtest_server, release, grace=0.5)
    message = (
        r"^failed waiting for everything to end within the grace period of 0\.5s "
        r"\(graceful_shutdown_timeout\), still running: reconcile default/stuck of controller "
        r"web in cluster local, for \d+\.\ds$"
    )
    with pytest.raises(GracePeriodExceeded, match=message) as err, mgr:
        assert began.wait(15)
    assert err.value.timeout == 0.5
    assert mgr.grace_period_exceeded is err.value
    assert mgr.wait(0), "the manager is stopped all the same"


def test_run_raises_it_and_stop_itself_does_not(
    envtest_server: APIServer, release: threading.Event
) -> None:
    mgr, began = _hung_reconcile(envtest_server, release, grace=0.5)
    runner, raised = run_in_thread(mgr)
    assert began.wait(15)
    mgr.stop()  # (a program's own stop, in a finally: no raise there)
    runner.join(10)
    assert not runner.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], GracePeriodExceeded), raised
    assert "reconcile default/stuck of controller web" in str(raised[0])


def test_a_runnable_that_ignores_its_stop_is_named(release: threading.Event) -> None:
    mgr = Manager(provider=Provider(), options=ManagerOptions(graceful_shutdown_timeout=0.3))
    began = threading.Event()

    def sweeper(stop: threading.Event) -> None:
        began.set()
        release.wait(20)  # never looks at stop

    mgr.add(sweeper)
    with pytest.raises(GracePeriodExceeded) as err, mgr:
        assert began.wait(10)
    assert err.value.still_running == ("thread mcruntime/runnable/sweeper",)


def test_an_error_of_the_block_goes_on_with_a_note_of_the_overrun(
    envtest_server: APIServer, release: threading.Event
) -> None:
    mgr, began = _hung_reconcile(envtest_server, release, grace=0.3)
    with pytest.raises(AssertionError) as err, mgr:
        assert began.wait(15)
        raise AssertionError("the test's own failure")
    notes = getattr(err.value, "__notes__", [])
    assert len(notes) == 1 and "failed waiting for everything to end" in notes[0], notes


def test_a_stop_that_ends_in_time_or_that_was_asked_not_to_wait_is_no_error(
    envtest_server: APIServer,
) -> None:
    ends = threading.Event()
    mgr, began = _hung_reconcile(envtest_server, ends, grace=5)
    with mgr:
        assert began.wait(15)
        ends.set()  # the reconcile returns within the grace period
    assert mgr.grace_period_exceeded is None

    # graceful_shutdown_timeout 0: no wait asked, none missed (Go's 0 returns no error)
    hangs = threading.Event()
    mgr, began = _hung_reconcile(envtest_server, hangs, grace=0, name="stuck-too")
    try:
        with mgr:
            assert began.wait(15)
        assert mgr.grace_period_exceeded is None
    finally:
        hangs.set()


def test_arun_and_async_with_raise_it_too(
    make_envtest_server: Callable[..., APIServer], release: threading.Event
) -> None:
    """An asyncio application's ``await mgr.arun()`` (stopped by ``astop()``) and its
    ``async with mgr:`` end as ``run()`` and ``with mgr:`` do."""
    run_mgr, run_began = _hung_reconcile(make_envtest_server("arun"), release, grace=0.3)
    with_mgr, with_began = _hung_reconcile(make_envtest_server("async-with"), release, grace=0.3)

    async def app() -> None:
        running = asyncio.create_task(run_mgr.arun())
        assert await asyncio.to_thread(run_began.wait, 15)
        await run_mgr.astop()
        with pytest.raises(GracePeriodExceeded, match="reconcile default/stuck of controller"):
            await asyncio.wait_for(running, 15)
        with pytest.raises(GracePeriodExceeded, match="reconcile default/stuck of controller"):
            async with with_mgr:
                assert await asyncio.to_thread(with_began.wait, 15)

    asyncio.run(app())


def test_a_runnable_that_stops_its_manager_while_it_starts_is_no_overrun() -> None:
    """`mgr.add(lambda stop: mgr.stop())`: the stop runs while start() is still starting the
    provider's thread, which the stop's join missed and then found alive (its stop event
    set, not yet woken): "still running" and exit status 1 for a stop that took no time
    (about 3 runs in 100 before)."""
    for _ in range(100):
        mgr = Manager(provider=Provider())
        mgr.add(lambda stop, mgr=mgr: mgr.stop())
        mgr.run()  # raises GracePeriodExceeded for an overrun
        assert mgr.grace_period_exceeded is None
