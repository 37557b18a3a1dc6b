"""Keeping a fleet's long-lived objects out of CPython's full collections
([`ManagerOptions.freeze_gc`][mcruntime.manager.ManagerOptions.freeze_gc]).

A full (generation 2) collection scans every object the collector tracks and
holds the GIL while it runs, so every thread stops. An engaged cluster keeps
a few hundred such objects (its client, informers, caches, threads), so at
1,000 clusters one collection stops the process for 100-300 ms, and CPython
starts one whenever the objects aged since the last grew by a quarter: when
100 clusters join at once, the others' events wait that long.

`gc.freeze()` moves every tracked object to a permanent generation that
collections skip, and `gc.unfreeze()` gives them back. The manager freezes
when no engagement is in its first attempt (a burst of joins has settled,
after a collection of the young generations so their garbage is not frozen),
and unfreezes when a cluster leaves: its objects hold reference cycles that
only a full collection frees. The first freeze after an unfreeze runs that
full collection first: joins follow leaves closely (a cluster re-added, moved
between replicas), and freezing again before CPython collected would keep
every cluster that left. Cyclic garbage that was old when the manager froze
stays until a cluster leaves and the next joins settle (or the manager stops).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

__all__ = ["HeapFreezer"]


class HeapFreezer:
    """Freezes the heap when the last engagement's first attempt ends; thaws it on request.

    Process-wide, like the collector: two managers that freeze share one
    permanent generation (an unfreeze by either thaws both).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starting = 0
        #: unfrozen since the last freeze: the next one collects fully first
        self._thawed = False

    def starting(self) -> Callable[[], None]:
        """Count one engagement in its first attempt; the returned callable (idempotent)
        ends it, and the last to end freezes the heap."""
        with self._lock:
            self._starting += 1
        ended = False

        def end() -> None:
            nonlocal ended
            with self._lock:
                if ended:
                    return
                ended = True
                self._starting -= 1
                if self._starting:
                    return
                full, self._thawed = self._thawed, False
            gc.collect(2 if full else 1)
            gc.freeze()

        return end

    def thaw(self) -> None:
        """Give the frozen objects back to the collector (a cluster left, or the manager stops)."""
        with self._lock:
            self._thawed = True
        gc.unfreeze()
