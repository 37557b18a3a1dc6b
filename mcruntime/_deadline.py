"""The deadline of the client calls made in a context: ``mcruntime.client.deadline``.

A context variable (threads and ``async def`` code alike), in the bottom layer so that
the test helpers (`mcruntime.envtest.wait_for`) can bound the calls of the getter they poll
without importing the client. The client reads it on every call.
"""

from __future__ import annotations

import contextlib
import time
from contextvars import ContextVar, Token

__all__ = ["INF", "NO_DEADLINE", "Deadline", "OwnEnd", "current", "deadline"]

#: absolute time.monotonic() deadline of the calls made in this context (None: none)
current: ContextVar[float | None] = ContextVar("mcruntime_client_deadline", default=None)


class OwnEnd(float):
    """The end of a deadline set by a call's own ``timeout=`` (`call_timeout`): a call not sent
    because it passed blames its timeout, not an enclosing `deadline`."""

    __slots__ = ()


class Deadline(contextlib.ContextDecorator, contextlib.AbstractContextManager[None]):
    """The block of one [`deadline()`][mcruntime.client.deadline]: a ``with`` block enters it
    once; as a decorator, each call gets a fresh one (as a generator context manager's does)."""

    def __init__(self, seconds: float | None, own: bool = False) -> None:
        self._seconds = seconds
        self._own = own
        self._token: Token[float | None] | None = None

    def _recreate_cm(self) -> Deadline:
        return self if self._seconds is None else Deadline(self._seconds, self._own)

    def __enter__(self) -> None:
        if self._seconds is None:
            return
        end = time.monotonic() + self._seconds  # "from now" is when the block is entered
        if self._own:
            end = OwnEnd(end)
        outer = current.get()
        self._token = current.set(end if outer is None else min(outer, end))

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            current.reset(self._token)


#: ``deadline(None)``: no bound and no state, so one block serves every such call
NO_DEADLINE = Deadline(None)


def deadline(seconds: float | None) -> contextlib.AbstractContextManager[None]:
    """Bound every client call made inside the block to end within ``seconds`` from now.

    Nested blocks keep the earlier deadline. A call whose deadline has passed
    fails at once with [`DeadlineExceeded`][mcruntime.errors.DeadlineExceeded];
    ``None`` (or infinity) adds no bound; 0 or less has passed already; NaN raises
    ValueError. Works for threads and for `async def` code alike
    (a context variable), and as a decorator. Every client call enters one, so
    it is a plain class, not a generator: ``deadline(None)`` costs a function call.
    """
    if seconds is None:
        return NO_DEADLINE
    if seconds != seconds:
        raise ValueError("deadline(nan): a deadline is a number of seconds (None: no bound)")
    return NO_DEADLINE if seconds == INF else Deadline(seconds)


INF = float("inf")
