"""Aggregation and spam filtering of Events, after client-go's ``EventCorrelator``.

Three steps, each keyed by parts of the event (never by its name), in client-go's order:

1. **Aggregation**: more than ``max_events`` events within ``interval``
   seconds that differ only in their message (same object, type and reason)
   become one event whose message says ``(combined from similar events)``; at
   most ``max_events`` messages are kept per object and reason.
2. **Deduplication**: an event identical to one already written (same object,
   type, reason, message) is not written again: the existing Event object gets
   ``count + 1`` and a new ``lastTimestamp`` (a PATCH).
3. **Spam filter**: a token bucket per source and involved object (and type):
   ``burst`` events at once, then one per ``1 / qps`` seconds; an event with
   no token is not written. It was counted in step 2 all the same, so the next
   write of its Event carries every repeat in its ``count`` (a Warning every
   second for an hour shows about ``x3300``, written 36 times).

Caches are bounded LRUs. Pure bookkeeping: no I/O, thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["CorrelatorOptions", "Correlation", "EventCorrelator"]

#: client-go's defaults
DEFAULT_SPAM_BURST = 25
DEFAULT_SPAM_QPS = 1.0 / 300.0
DEFAULT_AGGREGATE_MAX_EVENTS = 10
DEFAULT_AGGREGATE_INTERVAL = 600.0
DEFAULT_LRU_SIZE = 4096

#: the start of a combined event's message
_COMBINED = "(combined from similar events): "

_K = TypeVar("_K")
_V = TypeVar("_V")


class _LRU(Generic[_K, _V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)


@dataclass
class CorrelatorOptions:
    """Tuning of the [`EventCorrelator`][mcruntime.recorder.EventCorrelator] (client-go's defaults)."""

    spam_burst: int = DEFAULT_SPAM_BURST
    """Events per object written at once before the rate limit applies."""
    spam_qps: float = DEFAULT_SPAM_QPS
    """Refill rate of each object's token bucket (events per second)."""
    max_events: int = DEFAULT_AGGREGATE_MAX_EVENTS
    """Distinct messages per object, type and reason within ``interval`` before they are combined."""
    interval: float = DEFAULT_AGGREGATE_INTERVAL
    """Aggregation window, seconds."""
    lru_size: int = DEFAULT_LRU_SIZE
    """Entries in each of the correlator's caches."""


@dataclass
class Correlation:
    """What to write for one event: ``event`` to create, or ``patch`` for the Event named in it."""

    event: dict[str, Any]
    patch: dict[str, Any] | None = None
    skip: bool = False


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class _Aggregate:
    messages: set[str] = field(default_factory=set)
    since: float = 0.0


@dataclass
class _Seen:
    count: int
    first_timestamp: str
    name: str
    #: an Event was written for it (else its occurrences were all rate-limited so far)
    written: bool = False


def _ref_key(event: dict[str, Any]) -> tuple[str, ...]:
    src, ref = event.get("source") or {}, event.get("involvedObject") or {}
    return (
        src.get("component", ""),
        src.get("host", ""),
        ref.get("kind", ""),
        ref.get("namespace", ""),
        ref.get("name", ""),
        ref.get("uid", ""),
        ref.get("apiVersion", ""),
    )


class EventCorrelator:
    """Decides for each event whether to create it, patch an earlier one, or drop it."""

    def __init__(
        self, options: CorrelatorOptions | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.options = options or CorrelatorOptions()
        self._clock = clock
        self._lock = threading.Lock()
        size = self.options.lru_size
        self._buckets: _LRU[tuple[str, ...], _Bucket] = _LRU(size)
        self._aggregates: _LRU[tuple[str, ...], _Aggregate] = _LRU(size)
        self._seen: _LRU[tuple[str, ...], _Seen] = _LRU(size)

    def _allow(self, key: tuple[str, ...], now: float) -> bool:
        o = self.options
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(float(o.spam_burst), now)
            self._buckets.put(key, bucket)
        bucket.tokens = min(float(o.spam_burst), bucket.tokens + (now - bucket.at) * o.spam_qps)
        bucket.at = now
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def correlate(self, event: dict[str, Any]) -> Correlation:
        """The write for ``event`` (``skip`` when the rate limit drops it).

        As client-go's ``EventCorrelate``: the event is aggregated and counted first, then
        rate-limited, so a repeat the rate limit keeps from being written still counts
        in the ``count`` of the next write of its Event.
        """
        now = self._clock()
        base = (*_ref_key(event), event.get("type", ""))
        with self._lock:
            agg_key = (*base, event.get("reason", ""))
            agg = self._aggregates.get(agg_key)
            if agg is None or now - agg.since > self.options.interval:
                agg = _Aggregate(since=now)
                self._aggregates.put(agg_key, agg)
            message = event.get("message", "")
            agg.messages.add(message)
            if len(agg.messages) > self.options.max_events:
                # kept no larger (client-go pops one too): the next new message is combined
                agg.messages.discard(next(m for m in agg.messages if m != message))
                event = {**event, "message": f"{_COMBINED}{message}"}
                key = (*agg_key, "")  # every combined event is one Event object
            else:
                key = (*agg_key, message)
            seen = self._seen.get(key)
            if seen is None:
                result = Correlation(event)
                seen = _Seen(
                    1, event.get("firstTimestamp") or "", (event.get("metadata") or {})["name"]
                )
            elif not seen.written:  # its occurrences so far were rate-limited: created with them
                seen = _Seen(seen.count + 1, seen.first_timestamp, event["metadata"]["name"])
                event = {**event, "count": seen.count, "firstTimestamp": seen.first_timestamp}
                result = Correlation(event)
            else:
                seen = _Seen(seen.count + 1, seen.first_timestamp, seen.name, written=True)
                event = {
                    **event,
                    "metadata": {**event["metadata"], "name": seen.name},
                    "count": seen.count,
                    "firstTimestamp": seen.first_timestamp,
                }
                patch = {
                    "count": seen.count,
                    "lastTimestamp": event.get("lastTimestamp"),
                    "message": event.get("message", ""),
                }
                result = Correlation(event, patch=patch)
            self._seen.put(key, seen)  # counted, written or not
            result.skip = not self._allow(base, now)
            return result

    def observe(self, event: dict[str, Any]) -> None:
        """Remember ``event`` as written (created or patched), so its repeats patch it."""
        base = (*_ref_key(event), event.get("type", ""), event.get("reason", ""))
        message = event.get("message", "")
        key = (*base, "" if message.startswith(_COMBINED) else message)
        seen = _Seen(
            int(event.get("count") or 1),
            event.get("firstTimestamp") or "",
            (event.get("metadata") or {}).get("name", ""),
            written=True,
        )
        with self._lock:
            self._seen.put(key, seen)

    def forget(self, event: dict[str, Any]) -> None:
        """Forget the Event written for ``event`` (it is gone: the next repeat creates a new one)."""
        base = (*_ref_key(event), event.get("type", ""), event.get("reason", ""))
        message = event.get("message", "")
        key = (*base, "" if message.startswith(_COMBINED) else message)
        with self._lock:
            self._seen.items.pop(key, None)
