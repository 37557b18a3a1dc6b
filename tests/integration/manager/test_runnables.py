"""Runnables added to a manager: objects with start(stop), or functions taking the stop event;
and the provider, which the manager runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet, wait_for
from mcruntime.manager import Manager
from mcruntime.multicluster import Clusters
from mcruntime.providers import clusters

pytestmark = pytest.mark.timeout(30)


def _run(mgr: Manager) -> tuple[threading.Thread, list[BaseException]]:
    """``mgr.run()`` on a thread of the test; what it raised."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            mgr.run()
        except BaseException as exc:
            raised.append(exc)

    runner = threading.Thread(target=run, name="test/run")
    runner.start()
    return runner, raised


def test_a_function_taking_the_stop_event_runs_as_a_runnable(envtest_server: APIServer) -> None:
    # Go: mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { ... }))
    mgr = Manager(envtest_server.kubeconfig())
    started, ended = threading.Event(), threading.Event()

    def sweep(stop: threading.Event) -> None:
        started.set()
        stop.wait()
        ended.set()

    mgr.add(sweep)
    with mgr:
        assert started.wait(10)
        assert "mcruntime/runnable/sweep" in {t.name for t in mcruntime_threads()}
    assert ended.is_set()


def test_the_manager_s_own_threads_name_no_cluster() -> None:
    """``%(threadName)s`` in a log line: a thread working for no one cluster (a runnable, the
    provider, the health checker, a stop) does not read as the local cluster's, which this
    manager does not even have."""
    provider = clusters.Provider()
    mgr = Manager(provider=provider)
    started = threading.Event()

    def sweep(stop: threading.Event) -> None:
        started.set()
        stop.wait()

    mgr.add(sweep)
    with mgr:
        assert started.wait(10)
        names = {t.name for t in mcruntime_threads()}
        assert {"mcruntime/runnable/sweep", "mcruntime/provider/Provider"} <= names, names
        assert not [n for n in names if "local" in n.split("/")], names


def test_what_is_neither_a_runnable_nor_a_function_is_refused_when_added(
    envtest_server: APIServer,
) -> None:
    mgr = Manager(envtest_server.kubeconfig())
    with pytest.raises(TypeError, match="a runnable has a start\\(stop\\) method or is a function"):
        mgr.add("sweep")  # type: ignore[arg-type]


def test_an_async_function_is_refused_when_added_not_left_a_coroutine_never_awaited(
    envtest_server: APIServer,
) -> None:
    # a runnable runs in a thread of its own: an async def would only make a coroutine that
    # nothing awaits, and the runnable would seem to run while doing nothing
    mgr = Manager(envtest_server.kubeconfig())

    async def sweep(stop: threading.Event) -> None:
        stop.wait()

    class Sweeper:
        async def start(self, stop: threading.Event) -> None:
            stop.wait()

    for runnable in (sweep, Sweeper()):
        with pytest.raises(
            TypeError, match="is a coroutine function .async def.: .*a runnable runs in a thread"
        ):
            mgr.add(runnable)  # type: ignore[arg-type]


def test_a_provider_that_fails_stops_the_manager_and_run_raises_its_error(
    envtest_server: APIServer,
) -> None:
    crash = threading.Event()

    class Failing(Clusters):
        def run(self, stop: threading.Event) -> None:
            crash.wait(30)
            raise KeyError("a Secret without the key 'kubeconfig'")  # a provider's bug

    provider = Failing()
    provider.add("c", Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="c"))
    mgr = Manager(provider=provider)
    runner, raised = _run(mgr)
    try:
        wait_for(lambda: mgr.engaged_clusters() == ["c"], 15, "the cluster engaged")
        crash.set()
        # its clusters are gone and none will be discovered: not a live, ready manager with
        # nothing to do, but a process that exits with the error (and is restarted)
        runner.join(15)
        assert not runner.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], KeyError), raised
        assert mgr.fatal_error is raised[0]
    finally:
        crash.set()
        mgr.stop(5)
        runner.join(5)


def test_run_after_start_raises_the_error_of_a_provider_that_failed_in_between() -> None:
    # the examples' pattern: start(), set-up work, run(); the provider failed meanwhile (a
    # kubeconfig path that is not there): run() raises its error, not "cannot be started again"
    class Failing(Clusters):
        def run(self, stop: threading.Event) -> None:
            raise FileNotFoundError("/etc/fleet/eu.yaml")

    mgr = Manager(provider=Failing())
    mgr.start()
    assert mgr.wait(15), "the provider's failure did not stop the manager"
    with pytest.raises(FileNotFoundError, match="/etc/fleet/eu.yaml"):
        mgr.run()
    assert isinstance(mgr.fatal_error, FileNotFoundError)


def test_a_runnable_that_fails_stops_the_manager_and_run_raises_its_error(
    envtest_server: APIServer,
) -> None:
    # Go: a Runnable whose Start returns an error makes mgr.Start return it
    mgr = Manager(envtest_server.kubeconfig())
    crash, done = threading.Event(), threading.Event()

    def sweep(stop: threading.Event) -> None:
        crash.wait(30)
        raise RuntimeError("the sweep's database is gone")

    def quiet(stop: threading.Event) -> None:  # returns early: nothing more to do, no error
        done.set()

    mgr.add(sweep)
    mgr.add(quiet)
    runner, raised = _run(mgr)
    try:
        assert done.wait(10)
        assert runner.is_alive()  # a runnable that returned stops nothing
        crash.set()
        runner.join(15)
        assert not runner.is_alive()
        assert len(raised) == 1 and str(raised[0]) == "the sweep's database is gone", raised
    finally:
        crash.set()
        mgr.stop(5)
        runner.join(5)


def test_a_runnable_that_fails_once_stopped_stops_nothing_more(
    envtest_server: APIServer,
) -> None:
    mgr = Manager(envtest_server.kubeconfig())

    def sweep(stop: threading.Event) -> None:
        stop.wait()
        raise RuntimeError("cut short by the stop")

    mgr.add(sweep)
    mgr.start()
    mgr.stop(5)
    assert mgr.fatal_error is None


def test_a_child_of_the_multi_provider_that_fails_stops_the_manager_too(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    from mcruntime.providers import multi

    fleet = make_envtest_fleet(2, prefix="m")
    crash = threading.Event()

    class Failing(Clusters):
        def run(self, stop: threading.Event) -> None:
            crash.wait(30)
            raise KeyError("a Secret without the key 'kubeconfig'")

    failing, healthy = Failing(), Clusters()
    failing.add("a", Cluster.from_kubeconfig(fleet["m-0"].kubeconfig(), name="a"))
    healthy.add("b", Cluster.from_kubeconfig(fleet["m-1"].kubeconfig(), name="b"))
    mgr = Manager(provider=multi.Provider({"eu": failing, "us": healthy}))
    runner, raised = _run(mgr)
    try:
        wait_for(lambda: sorted(mgr.engaged_clusters()) == ["eu#a", "us#b"], 15, "both engaged")
        crash.set()
        # half the fleet gone for good is not a live, ready manager either
        runner.join(15)
        assert not runner.is_alive()
        assert len(raised) == 1 and isinstance(raised[0], KeyError), raised
        assert "(the provider under prefix 'eu' of the multi provider)" in raised[0].__notes__
        assert not [t.name for t in mcruntime_threads() if "multi-" in t.name]
    finally:
        crash.set()
        mgr.stop(5)
        runner.join(5)
