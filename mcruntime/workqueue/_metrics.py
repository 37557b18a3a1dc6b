"""The callbacks a [`Queue`][mcruntime.workqueue.Queue] reports its activity through."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class QueueMetrics(Protocol):
    """Receives a queue's events; ``key`` is the item's fair key (the cluster name, "" if none).

    Contract: the queue calls these while holding its lock, so they must be fast,
    non-blocking and must not call back into the queue. Together they give
    client-go's ``workqueue_*`` metrics per cluster: ``adds_total`` (``add``),
    ``depth`` (sum of ``depth`` deltas), ``queue_duration_seconds`` (``get``),
    ``work_duration_seconds`` (``done``), ``retries_total`` (``retry``).
    ``unfinished_work_seconds`` and ``longest_running_processor_seconds`` are read
    at scrape time from [`Queue.in_flight_ages()`][mcruntime.workqueue.Queue.in_flight_ages].
    """

    def add(self, key: str) -> None:
        """An item was accepted (not merged into one already queued)."""
        ...

    def get(self, key: str, queued_seconds: float) -> None:
        """An item was handed to a worker after waiting ``queued_seconds`` since its add."""
        ...

    def done(self, key: str, work_seconds: float) -> None:
        """A worker finished an item it held for ``work_seconds``."""
        ...

    def retry(self, key: str) -> None:
        """An item was scheduled again through ``add_after`` / ``add_rate_limited``."""
        ...

    def depth(self, key: str, delta: int) -> None:
        """The number of items waiting for a worker changed by ``delta`` (+1 / -n)."""
        ...


class NoopQueueMetrics:
    """Discards every event; the default."""

    def add(self, key: str) -> None:
        return None

    def get(self, key: str, queued_seconds: float) -> None:
        return None

    def done(self, key: str, work_seconds: float) -> None:
        return None

    def retry(self, key: str) -> None:
        return None

    def depth(self, key: str, delta: int) -> None:
        return None
