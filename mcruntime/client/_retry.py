"""``retry_on_conflict``: run a read-modify-write again when it met a ``Conflict``, as client-go's
``retry.RetryOnConflict`` does, within the deadline of its context."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Callable
from typing import TypeVar

from mcruntime.client._rest import call_cut, remaining
from mcruntime.errors import Conflict

__all__ = ["retry_on_conflict"]

T = TypeVar("T")


def retry_on_conflict(
    fn: Callable[[], T],
    *,
    steps: int = 5,
    duration: float = 0.01,
    factor: float = 1.0,
    jitter: float = 0.1,
) -> T:
    """Call ``fn()`` and return what it returns; call it again when it raised
    [`Conflict`][mcruntime.errors.Conflict], at most ``steps`` times in all.

    client-go's ``retry.RetryOnConflict``: ``fn`` reads the object, changes it and writes it
    (an update carrying the resourceVersion read), so each attempt starts from a fresh read.
    Between attempts it waits ``duration`` seconds, then that times ``factor`` after each
    further attempt, each wait lengthened by up to ``jitter`` of itself (a fraction). The
    defaults are client-go's ``retry.DefaultRetry`` (5 attempts 10 ms apart);
    ``steps=4, factor=5.0`` is its ``retry.DefaultBackoff``. When the attempts run out the last
    ``Conflict`` is raised, as client-go returns the last error; any other exception of ``fn``
    is raised at once.

    The deadline of the context (``with deadline(...)``, a reconcile's) bounds every attempt
    and every wait: a wait that would end past it is not begun, the last ``Conflict`` is
    raised instead. A wait ends at once when the calls of its context are cut (the coroutine
    awaiting an ``AsyncClient.run_sync`` of it cancelled, a `cancelled_by` block's event
    set); a cluster that left makes the next attempt's call raise
    [`ClusterLeft`][mcruntime.errors.ClusterLeft].

    Inside a reconcile, raising the ``Conflict`` (the reconcile is retried with backoff on a
    fresh read) is the usual answer; this is for a write that should not wait for that.
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"retry_on_conflict(steps={steps!r}): at least one attempt is needed")
    for name, value in (("duration", duration), ("factor", factor), ("jitter", jitter)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
            raise ValueError(f"retry_on_conflict({name}={value!r}): a finite number >= 0")
    delay = float(duration)
    for _ in range(steps - 1):
        try:
            return fn()
        except Conflict:
            wait = delay + random.random() * jitter * delay
            left = remaining()
            if left is not None and wait >= left:
                raise  # the next attempt could not be made in time
            cut = call_cut.get()
            if cut is None:
                threading.Event().wait(wait)
            elif cut.cut or cut.event.wait(wait):
                raise
            if factor:  # (0: the same wait each time, as client-go's Factor 0)
                delay *= factor
    return fn()  # the last attempt: its Conflict is raised
