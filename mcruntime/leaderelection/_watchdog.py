"""``Watchdog``: acts on a deadline whatever the network does.

A Lease holder must stop its work before ``last renewal + renew_deadline``,
even while its renewal is still blocked on a hung API server. Checking the
deadline after the blocking call returns is not enough; a watchdog is (as in
client-go). One thread serves every deadline of its owner (the leader
elector, or the sharded coordinator's fences), so a thousand fences cost one
thread, not a thousand.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Hashable

from mcruntime._threads import start_thread, thread_name

__all__ = ["Watchdog"]

log = logging.getLogger("mcruntime.leaderelection")


class Watchdog:
    """Calls ``on_expired`` of a key once its deadline passes without being moved or disarmed.

    `arm(key, deadline, fn)` sets (or moves) the deadline of ``key``, on the
    ``clock`` of the owner; `disarm(key)` cancels it. Expired callbacks run on
    the watchdog's thread (``mcruntime/watchdog/<name>``), one at a time, and
    must return promptly. The thread starts with the first `arm` and ends in
    `stop`. Thread-safe.
    """

    def __init__(self, name: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.clock = clock
        self._cond = threading.Condition()
        self._armed: dict[Hashable, tuple[float, int, Callable[[], None]]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0
        self._thread: threading.Thread | None = None
        self._stopped = False

    def __repr__(self) -> str:
        return f"Watchdog({self.name!r}, armed={len(self._armed)})"

    def arm(self, key: Hashable, deadline: float, on_expired: Callable[[], None]) -> None:
        """Call ``on_expired`` at ``deadline`` (``clock`` time) unless re-armed or disarmed first."""
        with self._cond:
            if self._stopped:
                return
            self._seq += 1
            self._armed[key] = (deadline, self._seq, on_expired)
            heapq.heappush(self._heap, (deadline, self._seq, key))
            if self._thread is None:
                self._thread = start_thread(self._run, thread_name("watchdog", None, self.name))
            self._cond.notify()

    def disarm(self, key: Hashable) -> None:
        """Forget the deadline of ``key`` (nothing happens if it had none)."""
        with self._cond:
            self._armed.pop(key, None)

    def armed(self, key: Hashable) -> bool:
        """True while ``key`` has a deadline that has not fired."""
        with self._cond:
            return key in self._armed

    def stop(self, timeout: float = 5.0) -> None:
        """Fire nothing more and join the thread; idempotent."""
        with self._cond:
            self._stopped = True
            self._armed.clear()
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                fire: Callable[[], None] | None = None
                while fire is None:
                    if self._stopped:
                        return
                    heap = self._heap
                    while heap:
                        deadline, seq, key = heap[0]
                        current = self._armed.get(key)
                        if current is None or current[1] != seq:
                            heapq.heappop(heap)  # moved or disarmed
                            continue
                        break
                    if not heap:
                        self._cond.wait()
                        continue
                    deadline, seq, key = heap[0]
                    left = deadline - self.clock()
                    if left > 0:
                        self._cond.wait(left)
                        continue
                    heapq.heappop(heap)
                    fire = self._armed.pop(key)[2]
            try:
                fire()
            except Exception:
                log.exception("watchdog %s: deadline callback failed", self.name)
