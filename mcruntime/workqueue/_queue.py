"""The work queue under every controller: deduplicating, delaying, rate limited, prioritised, fair across clusters."""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any

from mcruntime.errors import MCRuntimeError
from mcruntime.workqueue._metrics import NoopQueueMetrics, QueueMetrics
from mcruntime.workqueue._ratelimit import (
    ItemExponentialFailureRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)


class ShutDown(MCRuntimeError):
    """The queue is shut down: ``get`` has nothing more to hand out."""


#: what [`Queue.done_and_take()`][mcruntime.workqueue.Queue.done_and_take] returns when no item is ready at once
NOTHING: Any = object()

#: the priority controllers give the requests of an initial list (or a replay) and of a
#: resync: below the default 0, with room for an application's own priorities between
#: (controller-runtime's ``handler.LowPriority``)
LOW_PRIORITY = -100

#: the longest a getter waits on the queue's condition before it looks at the delayed items
#: again: ``Condition.wait`` refuses a timeout past ``threading.TIMEOUT_MAX`` (an
#: ``OverflowError`` a delay of centuries would raise in every getter), and a bound makes a
#: far deadline harmless (client-go's delaying queue bounds its waits so too: ``maxWait``
#: in ``util/workqueue/delaying_queue.go``)
_LONGEST_WAIT = 60.0

#: stale heap entries (delays superseded or dropped) tolerated beyond as many as there are
#: pending delays before the heap is rebuilt: each holds its item until its deadline
_STALE_HEAP_SLACK = 64


class _Entry:
    """An item that is queued, held by a worker, or both (held and added again).

    ``priority`` is the priority it is queued with (while ``dirty``); ``held_priority``
    the one it had when a worker took it.
    """

    __slots__ = ("item", "key", "dirty", "added", "started", "priority", "held_priority")

    def __init__(self, item: Any, key: str, added: float, priority: int) -> None:
        self.item = item
        self.key = key
        self.dirty = True
        self.added = added
        self.started: float | None = None
        self.priority = priority
        self.held_priority = 0


class _Level:
    """The ready items of one priority: a FIFO per fair key, and the keys' turns.

    A key is in ``turns`` exactly when its FIFO here is non-empty and the key is not
    parked (at ``limit_per_key``).
    """

    __slots__ = ("priority", "ready", "turns")

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self.ready: dict[str, deque[_Entry]] = {}
        self.turns: deque[str] = deque()


class Queue:
    """A work queue with client-go semantics, fair across the keys of ``fair_key``.

    - An item added while queued is merged; added while a worker holds it, it is
      marked dirty and queued once more when that worker calls [`done()`][mcruntime.workqueue.Queue.done]. No two
      workers ever hold the same item.
    - [`add_after()`][mcruntime.workqueue.Queue.add_after] delays an item (the earliest deadline wins);
      [`add_rate_limited()`][mcruntime.workqueue.Queue.add_rate_limited] delays it by ``rate_limiter.when(item)``.
      An item is queued once, as in controller-runtime's priority queue: added
      without a delay while it waits for one, it is ready now and the delay is
      dropped (the delete event of an object reconciled with ``requeue_after``
      leaves nothing of it queued); delayed while it is ready, it stays ready.
    - With ``fair_key`` (e.g. ``lambda req: req.cluster_name``) ready items wait
      in one FIFO per key and `get` serves the keys round-robin, so a noisy
      cluster delays a quiet one by at most one turn.
    - Every add takes a ``priority`` (default 0): a ready item of a higher
      priority is handed out before any of a lower one, fairly across keys
      within a priority. An item added again keeps the highest of its
      priorities; raised, it goes to the back of its new priority's FIFO. This
      is controller-runtime's priority queue: controllers add the requests of
      an initial list and of a resync at [`LOW_PRIORITY`][mcruntime.workqueue.LOW_PRIORITY], so a change
      made now is not kept waiting behind a cluster's whole list. With
      ``priorities=False`` every add has priority 0.
    - With `limit_per_key` set, a key whose items workers hold that many times
      is skipped until one of them is done, so one hung cluster cannot take
      every worker while other clusters wait.

    Without a ``rate_limiter``, each item is retried at its own backoff, 5 ms doubling to
    1000 s ([`ItemExponentialFailureRateLimiter`][mcruntime.workqueue.ItemExponentialFailureRateLimiter]),
    as by controller-runtime's priority queue and a controller's default; with
    ``priorities=False``, client-go's classic default
    ([`default_controller_rate_limiter()`][mcruntime.workqueue.default_controller_rate_limiter]),
    that backoff combined with one bucket of 10 retries a second (burst 100) shared by
    every item: a few hundred items failing then hold back every other item's retries,
    a first one included, by tens of seconds.

    Delays need no thread of their own: a waiting [`get()`][mcruntime.workqueue.Queue.get] sleeps until the
    earliest deadline and promotes what is due. ``fair_key`` and the metrics
    callbacks run under the queue's lock and must be fast and must not call back
    into the queue. ``clock`` measures delays and metrics (tests pass a fake one);
    ``get``'s own timeout is always real time.
    """

    def __init__(
        self,
        name: str = "",
        *,
        rate_limiter: RateLimiter | None = None,
        fair_key: Callable[[Any], str] | None = None,
        metrics: QueueMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        priorities: bool = True,
    ) -> None:
        self.name = name
        self.priorities = priorities
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else _default_rate_limiter(priorities)
        )
        self._fair_key = fair_key
        self._metrics = (
            None if metrics is None or isinstance(metrics, NoopQueueMetrics) else metrics
        )
        self._clock = clock
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        # every item that is queued or held by a worker; one hash lookup per add/done
        self._entries: dict[Any, _Entry] = {}
        self._pending = 0  # entries with dirty set
        self._held = 0  # entries with started set
        # ready entries by priority; _order lists the levels, highest priority first
        self._levels: dict[int, _Level] = {0: _Level(0)}
        self._order: list[_Level] = [self._levels[0]]
        # items held by workers per key; keys at limit_per_key are parked (out of _turns)
        self._limit: int | None = None
        self._held_by_key: dict[str, int] = {}
        self._parked: set[str] = set()
        # keys held back by `pause` (parked too, whatever they hold)
        self._paused: set[str] = set()
        # delayed items -> (deadline, seq, priority); the heap may hold stale entries, told
        # apart by seq
        self._delayed: dict[Any, tuple[float, int, int]] = {}
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = 0
        self._timer_at: float | None = None
        self._waiting = 0
        # threads in `wait_key_done`: `_done_locked` notifies `_idle` as a held item is done
        # only while there are some
        self._key_waiters = 0
        # adds made while no worker waits, taken in by the next locked call (see `add`)
        self._inbox: deque[tuple[Any, float, int]] = deque()
        self._shutting_down = False
        self._drain = False

    # -- per-key limit -------------------------------------------------------------

    @property
    def limit_per_key(self) -> int | None:
        """Most items of one fair key that workers may hold at once (None: no limit)."""
        return self._limit

    @limit_per_key.setter
    def limit_per_key(self, limit: int | None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"limit_per_key must be at least 1, got {limit}")
        with self._lock:
            self._take_inbox()
            self._limit = limit
            self._repark()

    def _at_limit(self, key: str) -> bool:
        limit = self._limit
        return limit is not None and self._held_by_key.get(key, 0) >= limit

    def _repark(self) -> None:
        """Park exactly the paused keys and those at the limit; rebuild the turns (lock held)."""
        self._parked = set(self._paused) | {k for k in self._held_by_key if self._at_limit(k)}
        for level in self._order:
            level.turns = deque(
                key for key, fifo in level.ready.items() if fifo and key not in self._parked
            )
        self._cond.notify_all()

    # -- holding a key back ----------------------------------------------------------

    def pause(self, key: str) -> bool:
        """Hand out no item of fair key ``key`` until `resume`: they stay queued (adds merge
        as usual) while the other keys are served. For a cluster that does not answer:
        its requests would each hold a worker until their calls' deadlines. False when
        ``key`` was paused already."""
        with self._lock:
            self._take_inbox()
            if key in self._paused:
                return False
            self._paused.add(key)
            self._repark()
            return True

    def resume(self, key: str) -> bool:
        """Hand out the items of ``key`` again (see `pause`); False when it was not paused."""
        with self._lock:
            if key not in self._paused:
                return False
            self._paused.discard(key)
            self._repark()
            return True

    def paused(self) -> frozenset[str]:
        """The fair keys held back by `pause` now."""
        with self._lock:
            return frozenset(self._paused)

    # -- adding -----------------------------------------------------------------

    def add(self, item: Hashable, *, priority: int | None = None) -> None:
        """Queue ``item`` (merged if already queued; re-run once if a worker holds it).

        ``priority`` (None: 0) orders it before the ready items of lower priorities.
        """
        # Adds come from many threads at once: every cluster's informer delivering its list
        # while a fleet syncs, the thread that reads every watch, other producers. (Before one
        # thread read every watch, a thousand reflector threads waiting for the one lock
        # convoyed on it: a holder waits for the GIL while hundreds queue behind it, and the
        # workers starved.) So an add never waits for the lock unless a
        # worker waits for work: an item already queued (or due to re-run) needs no change,
        # and when the lock is busy the item is left, with the time of the add, in the inbox
        # that the next locked call (a worker's `done_and_take` or `get`) takes in. Safe
        # without the lock: the caller changed what the item's reconcile reads before adding,
        # so a worker that takes the item afterwards reads that change.
        if self._shutting_down:
            return
        p = priority if priority is not None and self.priorities else 0
        entry = self._entries.get(item)
        if entry is not None and entry.dirty and entry.priority >= p:
            return
        lock = self._lock
        if lock.acquire(blocking=False):
            try:
                self._take_inbox()
                if not self._shutting_down:
                    self._add_locked(item, None, p)
            finally:
                lock.release()
            return
        self._inbox.append((item, self._clock(), p))
        # A getter increments _waiting, then looks at the inbox once more before it sleeps:
        # either it sees this item, or this add sees it waiting and wakes it.
        if self._waiting:
            with lock:
                self._take_inbox()

    def add_after(self, item: Hashable, seconds: float, *, priority: int | None = None) -> None:
        """Queue ``item`` after ``seconds`` (now if <= 0); an earlier pending deadline wins,
        and the highest priority (None: 0) of the pending adds. An item ready already (or to
        re-run once its worker is done) stays so: the delay is merged into it.

        ``seconds`` may be as large as a float goes: ``math.inf`` waits for ever (until the
        item is added without a delay, or the queue shuts down). NaN is a `ValueError`."""
        if math.isnan(seconds):
            raise ValueError(
                f"queue {self.name!r}: add_after({item!r}, nan): the delay must be a number "
                "of seconds"
            )
        p = priority if priority is not None and self.priorities else 0
        with self._lock:
            self._take_inbox()
            if self._shutting_down:
                return
            if self._metrics is not None:
                self._metrics.retry(self._key(item))
            entry = self._entries.get(item)
            if seconds <= 0 or (entry is not None and entry.dirty):
                self._add_locked(item, None, p)
                return
            deadline = self._clock() + seconds
            current = self._delayed.get(item)
            if current is not None:
                if current[2] < p:
                    self._delayed[item] = (current[0], current[1], p)
                if current[0] <= deadline:
                    return
                p = max(p, current[2])
            self._seq += 1
            seq = self._seq
            self._delayed[item] = (deadline, seq, p)
            heapq.heappush(self._heap, (deadline, seq, item))
            if current is not None:
                self._compact_heap()  # (the superseded deadline is stale now)
            if (
                self._waiting
                and self._heap[0][1] == seq
                and (self._timer_at is None or deadline < self._timer_at)
            ):
                self._cond.notify()

    def add_rate_limited(self, item: Hashable, *, priority: int | None = None) -> None:
        """Queue ``item`` after the delay its rate limiter gives (a retry)."""
        self.add_after(item, self.rate_limiter.when(item), priority=priority)

    def forget(self, item: Hashable) -> None:
        """Clear ``item``'s retry history in the rate limiter (call after success)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        """How many times ``item`` was retried since it was last forgotten."""
        return self.rate_limiter.num_requeues(item)

    def held_priority(self, item: Hashable) -> int:
        """The priority ``item`` had when a worker took it (0 if no worker holds it).

        A worker that queues its item again (a retry) passes it on, as
        controller-runtime's controller does, so a retry keeps its place.
        """
        entry = self._entries.get(item)
        return entry.held_priority if entry is not None and entry.started is not None else 0

    # -- processing ---------------------------------------------------------------

    def get(self, timeout: float | None = None) -> Any:
        """Block until an item is ready and hand it to the caller, who must call [`done()`][mcruntime.workqueue.Queue.done].

        Raises [`ShutDown`][mcruntime.workqueue.ShutDown] once the queue is shut down (after a drain: once
        nothing is left), and ``TimeoutError`` after ``timeout`` seconds.
        """
        with self._lock:
            self._take_inbox()
            level = self._next_level()
            if level is None or self._heap or self._shutting_down:
                level = self._wait_ready(timeout)
            return self._take_locked(level)

    def done(self, item: Hashable) -> None:
        """Mark ``item`` finished; if it was added meanwhile, it is queued again now."""
        with self._lock:
            self._take_inbox()
            self._done_locked(item)

    def done_and_take(self, item: Hashable) -> Any:
        """[`done()`][mcruntime.workqueue.Queue.done] for ``item``, then the next ready item if one is ready now, else ``NOTHING``.

        For a worker loop: one lock round trip instead of two when the queue is
        busy; when nothing is ready it calls [`get()`][mcruntime.workqueue.Queue.get] as usual.
        """
        with self._lock:
            self._take_inbox()
            self._done_locked(item)
            if self._shutting_down:
                return NOTHING
            if self._heap:
                self._promote()
            level = self._next_level()
            if level is None:
                return NOTHING
            return self._take_locked(level)

    def _next_level(self) -> _Level | None:
        """The highest priority with an item ready for a worker, if any (lock held)."""
        for level in self._order:
            if level.turns:
                return level
        return None

    def _take_locked(self, level: _Level) -> Any:
        """Hand the next ready item of ``level`` (the highest with one ready; round-robin
        over fair keys within it) to a worker (lock held)."""
        turns = level.turns
        key = turns.popleft()
        fifo = level.ready[key]
        entry = fifo.popleft()
        held = self._held_by_key.get(key, 0) + 1
        self._held_by_key[key] = held
        if self._limit is not None and held >= self._limit:
            self._parked.add(key)
            if len(self._order) > 1:
                self._unturn(key, level)
        elif fifo:
            turns.append(key)
        if not fifo and level.priority != 0:
            self._forget(level, key)
        now = self._clock()
        entry.dirty = False
        entry.started = now
        entry.held_priority = entry.priority
        self._pending -= 1
        self._held += 1
        m = self._metrics
        if m is not None:
            m.get(key, now - entry.added)
            m.depth(key, -1)
        return entry.item

    def _done_locked(self, item: Any) -> None:
        entry = self._entries.pop(item, None)
        if entry is None or entry.started is None:
            if entry is not None:
                self._entries[item] = entry
            return
        self._held -= 1
        key = entry.key
        held = self._held_by_key[key] - 1
        if held:
            self._held_by_key[key] = held
        else:
            del self._held_by_key[key]
        if self._key_waiters:
            self._idle.notify_all()
        if (
            key in self._parked
            and (self._limit is None or held < self._limit)
            and key not in self._paused  # (held back until resumed)
        ):
            self._parked.discard(key)
            turned = False
            for level in self._order:
                if level.ready.get(key):
                    level.turns.append(key)
                    turned = True
            if turned and self._waiting:
                self._cond.notify()
        if self._metrics is not None:
            self._metrics.done(key, self._clock() - entry.started)
        entry.started = None
        if entry.dirty:
            self._entries[item] = entry
            self._push(entry)
            if self._waiting:
                self._cond.notify()
        if self._shutting_down and not self._held:
            self._idle.notify_all()

    def wait_key_done(self, key: str, timeout: float | None = None, *, keep: int = 0) -> bool:
        """Block until workers hold at most ``keep`` items of fair key ``key``; False if
        ``timeout`` seconds passed first.

        For a cluster that left: its queued items were dropped, and the ones workers held
        when it left end here (``keep``: the caller's own, when a worker waits).
        """
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._key_waiters += 1
            try:
                while self._held_by_key.get(key, 0) > keep:
                    if end is None:
                        self._idle.wait()
                        continue
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._idle.wait(remaining)
                return True
            finally:
                self._key_waiters -= 1

    # -- shutdown -----------------------------------------------------------------

    def shut_down(self) -> list[Any]:
        """Stop now: ``get`` raises [`ShutDown`][mcruntime.workqueue.ShutDown], queued and delayed items are discarded.

        Workers still holding items may call [`done()`][mcruntime.workqueue.Queue.done]; nothing is queued again.
        Returns the items discarded (none when it was shut down already), for the caller to
        say what it dropped.
        """
        with self._lock:
            if not self._shutting_down:
                self._take_inbox()  # adds made before the shutdown are discarded with it
            self._shutting_down = True
            self._inbox.clear()
            self._drain = False
            dropped = [*self._delayed]
            dropped += [
                e.item for e in self._entries.values() if e.dirty and e.item not in self._delayed
            ]
            self._discard(dropped)
            self._cond.notify_all()
            self._idle.notify_all()
        return dropped

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        """Stop accepting adds and block until every item held by a worker is done.

        Items already queued are still handed out by ``get`` (delayed ones are
        discarded). Returns False if ``timeout`` seconds passed first.
        """
        end = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            self._take_inbox()  # queued before the shutdown: still handed out
            if not self._shutting_down:
                self._shutting_down = True
                self._drain = True
            self._discard(list(self._delayed))
            self._cond.notify_all()
            while self._held:
                if end is None:
                    self._idle.wait()
                else:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        return False
                    self._idle.wait(remaining)
            return True

    @property
    def shutting_down(self) -> bool:
        """True once [`shut_down()`][mcruntime.workqueue.Queue.shut_down] or [`shut_down_with_drain()`][mcruntime.workqueue.Queue.shut_down_with_drain] was called."""
        return self._shutting_down

    # -- inspection and cluster removal ---------------------------------------------

    def __len__(self) -> int:
        """Items waiting for a worker: ready ones, ones to re-run after a worker, delayed ones."""
        with self._lock:
            self._take_inbox()
            return self._pending + len(self._delayed)

    @property
    def in_flight(self) -> int:
        """How many items workers hold now (handed out by ``get``, not yet ``done``)."""
        return self._held

    def in_flight_ages(self) -> dict[str, list[float]]:
        """Fair key -> seconds each item held by a worker has been processing (for metrics)."""
        with self._lock:
            now = self._clock()
            ages: dict[str, list[float]] = {}
            if self._held:
                for entry in self._entries.values():
                    if entry.started is not None:
                        ages.setdefault(entry.key, []).append(now - entry.started)
            return ages

    def in_flight_items(self) -> list[tuple[Any, float]]:
        """Each item a worker holds now, with the seconds it has been processing."""
        with self._lock:
            now = self._clock()
            if not self._held:
                return []
            return [
                (entry.item, now - entry.started)
                for entry in self._entries.values()
                if entry.started is not None
            ]

    def drop(self, predicate: Callable[[Any], bool]) -> int:
        """Remove matching items (ready, delayed, or to re-run) and forget their retry history.

        Matching items that workers hold finish normally; adds made for them before
        the drop are discarded, adds after it (a worker's own retry) queue as usual:
        the controller, which knows the cluster is gone, does not make them.
        Returns how many queued items were removed. Used when a cluster is disengaged.
        """
        with self._lock:
            self._take_inbox()  # adds made before the drop are dropped with it
            candidates = [*self._entries, *(i for i in self._delayed if i not in self._entries)]
            matched = [item for item in candidates if predicate(item)]
            queued = [item for item in matched if item in self._delayed or self._is_dirty(item)]
            if queued:
                self._discard(queued)
                if self._shutting_down:
                    self._cond.notify_all()
            self._prune()  # keys of gone clusters must not pile up
        for item in matched:
            self.rate_limiter.forget(item)
        return len(queued)

    # -- internals ----------------------------------------------------------------

    def _key(self, item: Any) -> str:
        return self._fair_key(item) if self._fair_key is not None else ""

    def _is_dirty(self, item: Any) -> bool:
        entry = self._entries.get(item)
        return entry is not None and entry.dirty

    def _add_locked(self, item: Any, added: float | None = None, priority: int = 0) -> None:
        """Mark ``item`` dirty and queue it unless a worker holds it (lock held; hot path).
        A delay it waited for is dropped (its highest priority kept): the item is queued
        once, so nothing of it is left to run again once its worker is done."""
        if self._delayed and item in self._delayed:
            priority = max(priority, self._delayed.pop(item)[2])
            self._compact_heap()
        entry = self._entries.get(item)
        if entry is not None:
            if entry.dirty:
                if priority > entry.priority:
                    self._raise(entry, priority)
                return
            entry.dirty = True  # held by a worker: re-run when it is done
            entry.priority = priority
        else:
            fair_key = self._fair_key
            entry = _Entry(item, fair_key(item) if fair_key is not None else "", 0.0, priority)
            self._entries[item] = entry
        self._pending += 1
        m = self._metrics
        if m is not None:
            entry.added = self._clock() if added is None else added
            m.add(entry.key)
            m.depth(entry.key, 1)
        if entry.started is None:
            key = entry.key  # _push, inlined on this hot path
            level = self._levels.get(priority) or self._level(priority)
            fifo = level.ready.get(key)
            if fifo is None:
                level.ready[key] = deque((entry,))
                if key not in self._parked:
                    level.turns.append(key)
            else:
                if not fifo and key not in self._parked:
                    level.turns.append(key)
                fifo.append(entry)
            if self._waiting:
                self._cond.notify()

    def _level(self, priority: int) -> _Level:
        """The level of ``priority``, made if new (lock held)."""
        level = self._levels.get(priority)
        if level is None:
            level = self._levels[priority] = _Level(priority)
            self._order.append(level)
            self._order.sort(key=lambda lv: -lv.priority)
        return level

    def _raise(self, entry: _Entry, priority: int) -> None:
        """Move a queued ``entry`` to ``priority``, at the back of its FIFO there (lock held)."""
        old = entry.priority
        entry.priority = priority
        if entry.started is not None:
            return  # held by a worker: queued at its new priority when the worker is done
        key = entry.key
        level = self._levels[old]
        fifo = level.ready[key]
        fifo.remove(entry)
        if not fifo:
            if key not in self._parked:
                level.turns.remove(key)
            if old != 0:
                self._forget(level, key)
        self._push(entry)

    def _unturn(self, key: str, taken_from: _Level) -> None:
        """Take a key that was just parked out of the other levels' turns (lock held)."""
        for level in self._order:
            if level is not taken_from and level.ready.get(key):
                level.turns.remove(key)

    def _forget(self, level: _Level, key: str) -> None:
        """Drop ``key``'s emptied FIFO from a level other than 0, and the level once it is
        empty (lock held): a fleet's initial lists and resyncs leave no FIFO per cluster."""
        del level.ready[key]
        if not level.ready:
            del self._levels[level.priority]
            self._order.remove(level)

    def _prune(self) -> None:
        """Forget empty FIFOs and empty levels other than priority 0 (lock held)."""
        for level in list(self._order):
            for key in [k for k, fifo in level.ready.items() if not fifo]:
                del level.ready[key]
            if not level.ready and level.priority != 0:
                del self._levels[level.priority]
                self._order.remove(level)

    def _take_inbox(self) -> None:
        """Queue the adds left in the inbox, in the order they were made (lock held)."""
        inbox = self._inbox
        if not inbox:
            return
        if self._shutting_down:
            inbox.clear()
            return
        popleft = inbox.popleft
        add = self._add_locked
        while inbox:
            item, added, priority = popleft()
            add(item, added, priority)

    def _push(self, entry: _Entry) -> None:
        key = entry.key
        level = self._levels.get(entry.priority) or self._level(entry.priority)
        fifo = level.ready.get(key)
        if fifo is None:
            level.ready[key] = deque((entry,))
            if key not in self._parked:
                level.turns.append(key)
            return
        if not fifo and key not in self._parked:
            level.turns.append(key)
        fifo.append(entry)

    def _wait_ready(self, timeout: float | None) -> _Level:
        """Once an item is ready, the level it is in (lock held); raise ShutDown or
        TimeoutError otherwise."""
        end: float | None = None
        was_timer = False
        try:
            while True:
                self._take_inbox()
                if self._shutting_down and not self._drain:
                    raise ShutDown(f"queue {self.name!r} is shut down")
                if self._heap:
                    self._promote()
                level = self._next_level()
                if level is not None:
                    return level
                if self._shutting_down and not self._pending:
                    raise ShutDown(f"queue {self.name!r} is shut down and drained")
                wait: float | None = None
                if timeout is not None:
                    now = time.monotonic()
                    if end is None:
                        end = now + timeout
                    wait = end - now
                    if wait <= 0:
                        raise TimeoutError(f"no item in queue {self.name!r} after {timeout}s")
                timer_for: float | None = None
                if self._heap:
                    first = self._heap[0][0]
                    if self._timer_at is None or first < self._timer_at:
                        self._timer_at = timer_for = first
                        until = max(0.0, first - self._clock())
                        wait = until if wait is None else min(wait, until)
                if wait is not None and wait > _LONGEST_WAIT:  # (woken, it looks again)
                    wait = _LONGEST_WAIT
                self._waiting += 1
                if self._inbox:  # an add that did not see this getter waiting: take it in
                    self._waiting -= 1
                    continue
                try:
                    self._cond.wait(wait)
                finally:
                    self._waiting -= 1
                    if timer_for is not None:
                        was_timer = True
                        if self._timer_at == timer_for:
                            self._timer_at = None
        finally:
            # Hand the job of waking for the next deadline to another waiting getter.
            if was_timer and self._heap and self._waiting and self._timer_at is None:
                self._cond.notify()

    def _promote(self) -> None:
        """Move delayed items whose deadline passed into the ready queue (lock held)."""
        heap = self._heap
        delayed = self._delayed
        now = self._clock()
        while heap:
            deadline, seq, item = heap[0]
            current = delayed.get(item)
            if current is None or current[1] != seq:
                heapq.heappop(heap)
                continue
            if deadline > now:
                break
            heapq.heappop(heap)
            del delayed[item]
            self._add_locked(item, None, current[2])  # wakes a waiting getter for each item

    def _compact_heap(self) -> None:
        """Rebuild the heap once most of its entries are stale (lock held): the deadlines
        of items added meanwhile, which would each hold its item until that deadline."""
        if len(self._heap) > _STALE_HEAP_SLACK and len(self._heap) > 2 * len(self._delayed):
            self._rebuild_heap()

    def _rebuild_heap(self) -> None:
        """The heap of the pending delays only (lock held)."""
        self._heap = [(d, s, item) for item, (d, s, _) in self._delayed.items()]
        heapq.heapify(self._heap)
        if self._timer_at is not None and (not self._heap or self._heap[0][0] != self._timer_at):
            self._timer_at = None

    def _discard(self, items: list[Any]) -> None:
        """Remove ``items`` from the ready FIFOs and the delayed heap, and clear their dirty mark."""
        gone = set(items)
        if not gone:
            return
        depth: dict[str, int] = {}
        for item in gone:
            self._delayed.pop(item, None)
            entry = self._entries.get(item)
            if entry is None or not entry.dirty:
                continue
            entry.dirty = False
            self._pending -= 1
            depth[entry.key] = depth.get(entry.key, 0) + 1
            if entry.started is None:
                del self._entries[item]
        for level in self._order:
            ready = level.ready
            for key in [k for k, fifo in ready.items() if not fifo or k in depth]:
                kept = deque(e for e in ready[key] if e.dirty)
                if kept:
                    ready[key] = kept
                else:
                    del ready[key]
            level.turns = deque(key for key in level.turns if key in ready)
        self._prune()
        self._rebuild_heap()
        m = self._metrics
        if m is not None:
            for key, n in depth.items():
                m.depth(key, -n)


def _default_rate_limiter(priorities: bool) -> RateLimiter:
    """A queue's rate limiter when it is given none, as controller-runtime's: with priorities
    (its priority queue), per-item backoff alone, 5 ms doubling to 1000 s; without (client-go's
    classic queue under a controller), combined with the overall bucket of 10 retries a
    second (burst 100). A bucket is shared by every item, and so by every cluster of a
    controller: one cluster's failing requests would hold back every other cluster's
    retries (tens of seconds behind a few hundred failures)."""
    if priorities:
        return ItemExponentialFailureRateLimiter()
    return default_controller_rate_limiter()
