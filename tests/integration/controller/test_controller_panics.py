"""What a reconciler raises beyond an ordinary error, and mcruntime's own faults around it:
one request never takes a worker (and with it every cluster's reconciles) away, and what
stops the manager says why."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request
from mcruntime.controller import Controller
from mcruntime.source import Channel
from tests.integration.controller._controller_helpers import Calls, run_in_thread

pytestmark = pytest.mark.timeout(30)


def channel_controller(
    mgr: Manager, reconcile: Callable[[Request], Any], **options: Any
) -> tuple[Controller, Channel]:
    """A controller fed by a channel (no API traffic), started with ``mgr``."""
    trigger = Channel()
    builder = mcruntime.controller_managed_by(mgr).named("panics").watches(trigger)
    if options:
        builder = builder.with_options(**options)
    ctrl = builder.complete(reconcile)
    return ctrl, trigger


def send(trigger: Channel, name: str) -> None:
    trigger.send({"metadata": {"name": name, "namespace": "default"}})


class BadStr(Exception):
    """A third-party exception whose ``__str__`` reads what its ``__init__`` never set."""

    def __str__(self) -> str:
        return self.detail  # type: ignore[attr-defined,no-any-return]


def test_an_exception_whose_str_fails_is_retried_like_any_other(
    make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    """Formatting it once raised in the retry path, and the worker took that for
    ``recover_panic=False``: the whole manager stopped under "recover_panic is off"."""
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        if req.name == "bad":
            raise BadStr()

    mgr = make_manager()
    _, trigger = channel_controller(mgr, reconcile, max_concurrent_reconciles=1)
    mgr.start()
    send(trigger, "bad")
    calls.wait_count(3, "bad")  # retried with backoff
    send(trigger, "good")
    calls.wait_count(1, "good")
    assert not mgr.wait(0), "the manager stopped"
    failures = [r.getMessage() for r in caplog.records if "request=default/bad" in r.getMessage()]
    assert "reconcile failed (retry 1): BadStr: <str() failed: AttributeError>" in failures[0]
    assert not [r for r in caplog.records if r.levelno >= logging.CRITICAL]


def test_an_internal_failure_is_said_as_such_and_the_worker_goes_on(
    make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    """What fails outside the reconciler is mcruntime's fault: not blamed on
    ``recover_panic`` (which is on), not a manager stop, and the request is retried."""
    calls = Calls()
    mgr = make_manager()
    ctrl, trigger = channel_controller(mgr, calls.record, max_concurrent_reconciles=1)
    done_and_take = ctrl.queue.done_and_take
    failed = threading.Event()

    def fails_once(item: Any) -> Any:
        if not failed.is_set():
            failed.set()
            raise RuntimeError("a bug in the queue")
        return done_and_take(item)

    ctrl.queue.done_and_take = fails_once  # type: ignore[method-assign]
    mgr.start()
    send(trigger, "a")
    calls.wait_count(2, "a")  # retried
    send(trigger, "b")
    calls.wait_count(1, "b")  # by the same worker
    assert not mgr.wait(0), "the manager stopped"
    [line] = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert line.levelno == logging.ERROR
    assert line.getMessage() == (
        "controller=panics cluster=local request=default/a: internal error of mcruntime while "
        "handling the reconcile (not raised by the reconciler; please report it), retried with "
        "backoff: RuntimeError: a bug in the queue"
    )
    assert not [r for r in caplog.records if "recover_panic" in r.getMessage()]


def _cancelled_inside_asyncio_run(req: Request) -> None:
    """A ``def`` reconciler running async code whose inner task gets cancelled: the
    ``CancelledError`` (a ``BaseException``) escapes ``asyncio.run``."""

    async def inner() -> None:
        task = asyncio.ensure_future(asyncio.sleep(10))
        task.cancel()
        await task

    asyncio.run(inner())


def _generator_exit(req: Request) -> None:
    raise GeneratorExit


@pytest.mark.parametrize(
    "raises",
    [_cancelled_inside_asyncio_run, _generator_exit],
    ids=["CancelledError", "GeneratorExit"],
)
def test_a_base_exception_other_than_an_exit_is_a_failure_of_its_request(
    make_manager: Callable[..., Manager],
    caplog: pytest.LogCaptureFixture,
    raises: Callable[[Request], None],
) -> None:
    """It once ended the worker for good (with one worker, every cluster's reconciles):
    now it is retried with backoff like any exception, and the worker serves the others."""
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        if req.name == "bad":
            raises(req)

    mgr = make_manager()
    ctrl, trigger = channel_controller(mgr, reconcile, max_concurrent_reconciles=1)
    mgr.start()
    send(trigger, "bad")
    calls.wait_count(3, "bad")
    send(trigger, "good")
    calls.wait_count(1, "good")
    assert [t.is_alive() for t in ctrl._workers] == [True]
    failed = [r for r in caplog.records if "request=default/bad: reconcile failed" in r.message]
    assert failed and failed[0].levelno == logging.ERROR


async def _async_exit(req: Request) -> None:
    await asyncio.sleep(0)
    sys.exit("the reconciler gave up")


async def _async_child_task_exit(req: Request) -> None:
    async def child() -> None:
        raise KeyboardInterrupt

    async with asyncio.TaskGroup() as tg:
        tg.create_task(child())


def _sync_exit(req: Request) -> None:
    sys.exit("the reconciler gave up")


def _sync_keyboard_interrupt(req: Request) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("reconcile", "raised"),
    [
        (_sync_exit, SystemExit),
        (_sync_keyboard_interrupt, KeyboardInterrupt),
        (_async_exit, SystemExit),
        (_async_child_task_exit, KeyboardInterrupt),
    ],
    ids=["def-SystemExit", "def-KeyboardInterrupt", "async-SystemExit", "async-child-task"],
)
def test_an_exit_raised_by_a_reconcile_stops_the_manager_and_run_raises_it(
    make_manager: Callable[..., Manager],
    caplog: pytest.LogCaptureFixture,
    reconcile: Callable[[Request], Any],
    raised: type[BaseException],
) -> None:
    """``sys.exit()`` or a raised ``KeyboardInterrupt`` in a reconcile means "stop" to a
    Python developer (a signal's ``KeyboardInterrupt`` reaches the main thread only, never a
    worker), a panic to a Go one: it ended its worker silently, or from an ``async def``
    reconciler closed the controller's event loop, after which ``stop()`` raised "Event loop
    is closed". Now a CRITICAL line names the request, the manager stops cleanly, and
    ``run()`` raises it, as with ``recover_panic=False``, whatever ``recover_panic`` says."""
    mgr = make_manager()
    _, trigger = channel_controller(mgr, reconcile)
    t, outcome = run_in_thread(mgr)
    send(trigger, "bye")
    t.join(10)
    assert not t.is_alive(), "the manager kept running"
    assert [type(e) for e in outcome] == [raised]
    critical = [r.getMessage() for r in caplog.records if r.levelno == logging.CRITICAL]
    assert critical and critical[0].startswith("controller=panics"), critical
    assert not [th for th in threading.enumerate() if th.name.startswith("mcruntime/controller")]
