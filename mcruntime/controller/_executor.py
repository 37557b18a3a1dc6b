"""The threads an ``async def`` controller's event loop runs blocking calls on
(``asyncio.to_thread``, ``loop.run_in_executor(None, ...)``, an `AsyncClient` made by hand).

A `concurrent.futures.ThreadPoolExecutor` (the loop's default) makes threads that are not
daemons and that the interpreter joins at exit: a blocking call a reconcile moved off the
loop then holds the process after the manager stopped, for as long as the call lasts (for
ever, for a call without a timeout), and ``loop.shutdown_default_executor()`` waits for it
too. These threads are daemons, named ``mcruntime/controller/<name>/io_<n>``, owned by the
controller, which shuts them down without waiting and names the ones still busy in its
"still running" warning.
"""

from __future__ import annotations

import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from mcruntime._threads import start_thread

T = TypeVar("T")

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class LoopThreads(ThreadPoolExecutor):
    """At most ``size`` daemon threads, made as calls need them, ended by `shutdown`.

    A ``ThreadPoolExecutor`` by type only (asyncio's ``set_default_executor`` takes no
    other): ``submit`` and ``shutdown`` are its own, no thread of the base class is made.
    """

    def __init__(self, size: int, name_prefix: str) -> None:
        super().__init__(size, thread_name_prefix=name_prefix)
        self._size = size
        self._prefix = name_prefix
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._guard = threading.Lock()
        self._made: list[threading.Thread] = []
        #: threads waiting for work (released as one goes idle, taken by a submit)
        self._free = threading.Semaphore(0)
        #: the threads running a call now, and the function each runs
        self._busy: dict[threading.Thread, Callable[..., Any]] = {}
        self._closed = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._guard:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._work.put((future, fn, args, kwargs))
            if not self._free.acquire(timeout=0) and len(self._made) < self._size:
                name = f"{self._prefix}_{len(self._made)}"
                self._made.append(start_thread(self._serve, name))
        return future

    def _serve(self) -> None:
        me = threading.current_thread()
        while True:
            work = self._work.get()
            if work is None:
                return
            future, fn, args, kwargs = work
            if future.set_running_or_notify_cancel():
                with self._guard:
                    self._busy[me] = fn
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 - the awaiting coroutine's
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                finally:
                    with self._guard:
                        self._busy.pop(me, None)
            del work, future, fn, args, kwargs  # (not kept while idle)
            with self._guard:
                if self._closed:
                    return
            self._free.release()

    def busy(self) -> dict[threading.Thread, str]:
        """The threads running a call now, each with the name of the function it runs
        (``time.sleep`` for ``asyncio.to_thread(time.sleep, 20)``)."""
        with self._guard:
            busy = dict(self._busy)
        return {t: _function_name(busy[t]) for t in sorted(busy, key=lambda t: t.name)}

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No call is taken from now on; idle threads end, busy ones once their call
        returns. ``cancel_futures`` cancels the calls not started; ``wait`` joins the threads
        (the controller never does: a call that blocks must not hold its stop)."""
        with self._guard:
            self._closed = True
            threads = list(self._made)
            if cancel_futures:
                while True:
                    try:
                        work = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if work is not None:
                        work[0].cancel()
            for _ in threads:
                self._work.put(None)
        if wait:
            for t in threads:
                if t is not threading.current_thread():
                    t.join()


def _function_name(fn: Any) -> str:
    """The function a call runs, through the ``functools.partial`` and ``Context.run``
    that ``asyncio.to_thread`` wraps it in; a name only (no argument reaches the log)."""
    for _ in range(10):
        if not isinstance(fn, functools.partial):
            break
        run = fn.func
        if getattr(run, "__self__", None).__class__ is contextvars.Context and fn.args:
            fn = fn.args[0]
        else:
            fn = run
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}.{name}" if module else name
