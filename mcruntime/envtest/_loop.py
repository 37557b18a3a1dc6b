"""The one asyncio event loop thread shared by every APIServer of the process.

It starts with the first running server and stops with the last, so a test
that counts threads sees it go away once all servers are stopped.

A child forked while the loop runs (``os.fork``, multiprocessing's ``fork`` start
method) inherits this module's state but not the loop's thread: the child forgets the
parent's loop, and its first server starts a loop of its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from mcruntime._forked import in_a_forked_child
from mcruntime._threads import start_thread, thread_name

__all__ = ["acquire", "release", "run", "loop_or_none", "in_loop_thread"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_users = 0


def _forget_parent_loop() -> None:
    """In a forked child: the parent's loop has no thread here, and the lock may have been
    held by a thread that does not exist here either; start afresh."""
    global _lock, _loop, _thread, _users
    _lock = threading.Lock()
    _loop, _thread, _users = None, None, 0


in_a_forked_child(_forget_parent_loop)


def _run_loop(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def acquire() -> asyncio.AbstractEventLoop:
    """Register one more user of the loop, starting the loop thread if needed."""
    global _loop, _thread, _users
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            _thread = start_thread(_run_loop, thread_name("envtest", "loop"), loop, ready)
            ready.wait()
            _loop = loop
        _users += 1
        return _loop


def release() -> None:
    """Drop one user; the last one stops the loop and joins its thread."""
    global _loop, _thread, _users
    with _lock:
        if _users <= 0:  # a user from before a fork: the loop it used is not this one
            return
        _users -= 1
        if _users > 0 or _loop is None:
            return
        loop, thread = _loop, _thread
        _loop, _thread, _users = None, None, 0
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join()


def loop_or_none() -> asyncio.AbstractEventLoop | None:
    return _loop


def in_loop_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def run(coro: Coroutine[Any, Any, T], timeout: float | None = 30.0) -> T:
    """Run ``coro`` on the shared loop from another thread and return its result."""
    loop = _loop
    if loop is None:
        coro.close()
        raise RuntimeError("the envtest event loop is not running")
    if in_loop_thread():
        coro.close()
        raise RuntimeError("blocking envtest call made from the envtest loop thread")
    what = getattr(coro, "__qualname__", type(coro).__name__)
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except TimeoutError:
        if future.done():  # the coroutine's own TimeoutError
            raise
        future.cancel()
        thread = _thread
        why = (
            "its thread is busy"
            if thread is not None and thread.is_alive()
            else "its thread is not running"
        )
        raise TimeoutError(
            f"envtest: {what} did not finish on the envtest event loop within {timeout:g}s ({why})"
        ) from None
