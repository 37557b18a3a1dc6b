"""``wait_for``: poll a condition with a deadline, for tests of controllers.

A controller acts asynchronously, so a test waits until what it expects has
happened; ``wait_for`` does that with a deadline and a failure that says what was
awaited (never a bare sleep).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["DEFAULT_WAIT_TIMEOUT", "WaitTimeout", "wait_for"]

T = TypeVar("T")

#: seconds ``wait_for`` waits by default: generous, as machines running tests are often busy
DEFAULT_WAIT_TIMEOUT = 15.0


class WaitTimeout(AssertionError):
    """The awaited condition did not hold within the timeout (a test failure, not an error)."""


def _describe(predicate: Callable[[], object]) -> str:
    name = getattr(predicate, "__qualname__", None) or repr(predicate)
    code = getattr(predicate, "__code__", None)
    if name.endswith("<lambda>") and code is not None:
        return f"the lambda at {code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}"
    return str(name)


def wait_for(
    predicate: Callable[[], T],
    timeout: float = DEFAULT_WAIT_TIMEOUT,
    what: str = "",
    *,
    interval: float = 0.02,
    stop: threading.Event | None = None,
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that value.

    It is called at once, then every ``interval`` seconds; after ``timeout``
    seconds it raises [`WaitTimeout`][mcruntime.envtest.WaitTimeout] (an
    ``AssertionError``) naming ``what`` was awaited (or the predicate), the timeout
    and the last value seen. A set ``stop`` event ends the wait early with the same
    error. An exception raised by ``predicate`` propagates at once.

        obj = wait_for(lambda: cache.get(kind, "web", "default"), what="web in the cache")
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0 or (stop is not None and stop.is_set()):
            awaited = what or _describe(predicate)
            raise WaitTimeout(f"timed out after {timeout}s waiting for {awaited} (last: {value!r})")
        if stop is not None:
            stop.wait(min(interval, left))
        else:
            time.sleep(min(interval, left))
