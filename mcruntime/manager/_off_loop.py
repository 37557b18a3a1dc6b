"""The manager's blocking steps (start, stop, the wait for its end) awaited from an asyncio
application's event loop, which keeps serving meanwhile.

``Manager.start()`` waits for the fleet's first clusters and ``stop()`` for the reconciles in
flight: called on the application's loop, they hold it (no request served, no probe answered),
and a reconcile handing work to that loop (``run_coroutine_threadsafe``) can never finish, so the
stop waits its whole graceful timeout. Each step runs here in a thread of its own, named
``mcruntime/manager/<step>``, that ends with it; the coroutine awaits its outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

from mcruntime._threads import start_thread, thread_name

T = TypeVar("T")


async def off_the_loop(fn: Callable[[], T], step: str, *, finish: bool = False) -> T:
    """Run ``fn`` in a thread named for ``step`` (with this context) and await its outcome.

    The thread is not stopped by a cancel of the awaiting coroutine: ``fn`` is one of the
    manager's own steps, bounded by its options. With ``finish``, a cancelled coroutine still
    waits for ``fn`` to end (a stop: the application must not exit while it stops), then is
    cancelled; without, it is cancelled at once and ``fn`` goes on.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    ctx = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if done.done():
            return
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)

    def run() -> None:
        try:
            outcome: tuple[bool, Any] = (True, ctx.run(fn))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # (the loop closed: nobody awaits it)
            loop.call_soon_threadsafe(settle, *outcome)
        del outcome

    thread = start_thread(run, thread_name("manager", None, step))
    try:
        await asyncio.wait([done])  # (not cancelled with the awaiting coroutine)
    except asyncio.CancelledError:
        # what ``fn`` raises reaches nobody now: not "exception was never retrieved"
        done.add_done_callback(_retrieved)
        if finish:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([done])  # (a second cancel: no longer waited for)
        raise
    # its outcome was its last act: the thread is ending, not to be counted as left running
    thread.join()
    return done.result()


def _retrieved(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()
