"""Runnables added to a manager: objects with start(stop), or functions taking the stop event."""

from __future__ import annotations

import threading

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import APIServer
from mcruntime.manager import Manager

pytestmark = pytest.mark.timeout(30)


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
        assert "mcruntime/runnable/local/sweep" in {t.name for t in mcruntime_threads()}
    assert ended.is_set()


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
        with pytest.raises(TypeError, match="is a coroutine function: a runnable runs in a thread"):
            mgr.add(runnable)  # type: ignore[arg-type]
