"""Requests that failed on a cluster the health check found not answering (or whose
reconcile caught the failure and went on): each waits, out of the queue, until one of the
clusters it failed on answers again.

A request retried with backoff while a member of the fleet is frozen fails at every
retry, and its backoff grows: once the member answers, it is retried only when its
delay ends (seconds, up to minutes). Held here, it is retried as soon as the member
answers, and not before. Not thread-safe: the controller's lock guards it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T", bound=Hashable)


class Waiting(Generic[T]):
    """Requests, each with the clusters it waits on and its priority."""

    def __init__(self) -> None:
        self._on: dict[T, tuple[frozenset[str], int | None]] = {}
        self._by_cluster: dict[str, set[T]] = {}

    def __len__(self) -> int:
        return len(self._on)

    def clusters(self, item: T) -> frozenset[str]:
        """The clusters ``item`` waits on (empty when it does not wait)."""
        entry = self._on.get(item)
        return frozenset() if entry is None else entry[0]

    def by_cluster(self) -> dict[str, list[T]]:
        """The items waiting on each cluster (an item waiting on two is under both)."""
        return {name: list(items) for name, items in self._by_cluster.items()}

    def counts(self) -> dict[str, int]:
        """How many items wait on each cluster."""
        return {name: len(items) for name, items in self._by_cluster.items()}

    def park(self, item: T, clusters: frozenset[str], priority: int | None) -> None:
        """``item`` waits until one of ``clusters`` answers (replacing what it waited on)."""
        self.unpark(item)
        self._on[item] = (clusters, priority)
        for name in clusters:
            self._by_cluster.setdefault(name, set()).add(item)

    def unpark(self, item: T) -> bool:
        """``item`` waits no longer (it runs again anyway); whether it waited."""
        entry = self._on.pop(item, None)
        if entry is None:
            return False
        for name in entry[0]:
            items = self._by_cluster.get(name)
            if items is not None:
                items.discard(item)
                if not items:
                    del self._by_cluster[name]
        return True

    def release(self, cluster: str) -> list[tuple[T, int | None]]:
        """The items that waited on ``cluster`` (which answers again, or left), each with its
        priority; they wait no longer."""
        out: list[tuple[T, int | None]] = []
        for item in list(self._by_cluster.get(cluster, ())):
            out.append((item, self._on[item][1]))
            self.unpark(item)
        return out

    def drop(self, predicate: Callable[[T], bool]) -> int:
        """Forget the items ``predicate`` is true of; how many."""
        gone = [item for item in self._on if predicate(item)]
        for item in gone:
            self.unpark(item)
        return len(gone)
