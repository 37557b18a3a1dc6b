"""One function called for many clusters at once, from a (sync) reconcile.

A hub reconcile that writes to every member one after the other waits, at the
first member that hangs, until the manager's health check finds it silent (15 s
with the default health timings) or its call's deadline ends: every member after
it gets its copy that much later. Threads of the reconciler's own do not wait for
each other, but they run outside the reconcile's context: its controller no
longer learns which members failed its calls (it runs the request again at their
first answer), and a `mcruntime.client.deadline` around them does not apply.
`for_each_cluster` runs each call on a thread of its own in a copy of the caller's
context, and returns once every call has ended.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Final, TypeVar

from mcruntime._threads import start_thread, thread_name

__all__ = ["DEFAULT_FAN_OUT", "for_each_cluster"]

_T = TypeVar("_T")

#: how many clusters [`for_each_cluster`][mcruntime.reconcile.for_each_cluster] calls at once
#: unless told (as many threads as an async client's calls of one cluster may use)
DEFAULT_FAN_OUT: Final = 32


def for_each_cluster(
    names: Iterable[str],
    fn: Callable[[str], _T],
    *,
    max_concurrency: int = DEFAULT_FAN_OUT,
) -> dict[str, _T | Exception]:
    """Call ``fn(name)`` for every cluster of ``names`` at the same time; return each
    one's result, or the `Exception` it raised, by name (in the order of ``names``).

    For a sync reconciler that writes to (or reads from) every member: a member whose
    calls hang holds back no other member's, and every member is tried before the
    reconciler looks at the outcomes (a hung member's calls end when the manager's
    health check finds it silent, or at their deadline). Each call runs on a thread
    (``mcruntime/fan-out/<cluster>``, at most ``max_concurrency`` at once, a name given
    twice called once) in a copy of the caller's context, as a call made in the
    reconcile itself: a [`deadline`][mcruntime.client.deadline] around
    `for_each_cluster` bounds each call, and the controller learns which clusters its
    calls failed to reach, so the request runs again at their first answer. A thread
    the reconciler starts itself has none of that. Returns once every call has ended;
    no thread outlives it. A `BaseException` that is not an `Exception` (a
    `KeyboardInterrupt`, `SystemExit`) stops the calls not begun yet and is raised once
    the others have ended. An ``async def`` reconciler uses ``asyncio.gather(...,
    return_exceptions=True)`` instead (see Fairness).

    ```python
    outcomes = for_each_cluster(mgr.engaged_clusters(), lambda name: copy_into(name, obj))
    failed = {name: exc for name, exc in outcomes.items() if isinstance(exc, Exception)}
    ```
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be at least 1, not {max_concurrency!r}")
    todo = list(dict.fromkeys(names))
    results: dict[str, _T | Exception] = {}
    fatal: list[BaseException] = []
    lock = threading.Lock()
    pending: Iterator[str] = iter(todo)

    def call(name: str) -> None:
        try:
            value: _T | Exception = fn(name)
        except Exception as exc:  # the caller's to judge, with every other cluster's outcome
            value = exc
        except BaseException as exc:
            with lock:
                fatal.append(exc)
            return
        with lock:
            results[name] = value

    def work() -> None:
        while True:
            with lock:
                name = None if fatal else next(pending, None)
            if name is None:
                return
            threading.current_thread().name = thread_name("fan-out", name)
            call(name)

    if len(todo) == 1:
        call(todo[0])  # nothing to wait for: the caller's own thread
    else:
        threads = [  # each named for the cluster it takes first, then for each it takes
            start_thread(contextvars.copy_context().run, thread_name("fan-out", first), work)
            for first in todo[:max_concurrency]
        ]
        for t in threads:
            t.join()
    if fatal:
        raise fatal[0]
    return {name: results[name] for name in todo if name in results}
