"""The engagement of one cluster with the manager, and its state machine.

    engage ──▶ SYNCING ──caches synced (or nothing to sync)──▶ ENGAGED
                  │            (or no kind served yet)             │
                  │  ▲ not synced: retried with backoff            │
                  │  └──────┘                                      │
                  ├── cluster.start() raised ──▶ FAILED            │
                  │                                 │              │
                  └──────────── lifetime ends ──────┴──────────────┴──▶ ENDED

`ENDED` is final, and so is `FAILED` for its `Cluster` object (a stopped Cluster
cannot start again; engage a `Cluster.clone()`), until its lifetime ends.
docs/architecture.md draws the same diagram.
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcruntime.multicluster import Lifetime

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster

__all__ = ["Engagement", "EngagementState", "EngageSlot", "EngageSlots"]


class EngagementState(enum.StrEnum):
    """Where a cluster's engagement is; compares equal to its value (``"engaged"`` ...)."""

    #: caches of the interested controllers are syncing; `get_cluster` raises ClusterNotFound
    SYNCING = "syncing"
    #: reachable (a controller's caches synced, none had to, or its discovery answered that
    #: it serves none of the kinds yet): `get_cluster` returns the cluster, the synced
    #: controllers' sources run on it
    ENGAGED = "engaged"
    #: the cluster could not start (it was stopped before)
    FAILED = "failed"
    #: the lifetime ended: everything started for the cluster is stopped
    ENDED = "ended"


#: the transitions the manager makes; any other is a bug
TRANSITIONS: dict[EngagementState, frozenset[EngagementState]] = {
    EngagementState.SYNCING: frozenset(
        {EngagementState.ENGAGED, EngagementState.FAILED, EngagementState.ENDED}
    ),
    EngagementState.ENGAGED: frozenset({EngagementState.ENDED}),
    EngagementState.FAILED: frozenset({EngagementState.ENDED}),
    EngagementState.ENDED: frozenset(),
}


@dataclass(eq=False)
class Engagement:
    """One cluster's engagement: its cluster, lifetime, state and last error (``lock`` guards them)."""

    name: str
    cluster: Cluster
    lifetime: Lifetime = field(default_factory=Lifetime)
    state: EngagementState = EngagementState.SYNCING
    error: str | None = None
    since: float = field(default_factory=time.monotonic)
    thread: threading.Thread | None = None
    cancel_link: Callable[[], None] = lambda: None
    #: the lifetime the provider engaged it with: held by work that still needs the cluster
    #: after it left (`Lifetime.hold`), so a provider deleting the cluster can wait for it
    provider_lifetime: threading.Event | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: set to end a retry wait early (the cluster answers again, or the engagement ends)
    wake: threading.Event = field(default_factory=threading.Event)
    #: called (it is idempotent) once the first attempt to engage is over, whatever its end
    first_attempt_over: Callable[[], None] = lambda: None
    #: a thread makes attempts to engage the controllers that want the cluster (``lock``
    #: guards it): one that ends looks under ``lock`` for controllers added meanwhile, and a
    #: controller added once it ended starts another
    attempting: bool = True

    def move_to(self, state: EngagementState) -> EngagementState:
        """Enter ``state`` (the caller holds ``lock``); returns the state it left.

        Ending an ended engagement changes nothing; any transition not in
        `TRANSITIONS` raises RuntimeError.
        """
        was = self.state
        if state == was == EngagementState.ENDED:
            return was
        if state not in TRANSITIONS[was]:
            raise RuntimeError(f"engagement of {self.name!r}: no transition {was} -> {state}")
        self.state = state
        return was


class EngageSlots:
    """At most ``n`` engagements start and sync at once; the others wait for a slot."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"max_concurrent_engagements must be at least 1, not {n}")
        self._free = n
        self._cond = threading.Condition()

    def acquire(self, cancelled: Callable[[], bool]) -> EngageSlot | None:
        """Take a slot; None once ``cancelled()`` holds (checked again on each `wake`)."""
        with self._cond:
            while not cancelled():
                if self._free:
                    self._free -= 1
                    return EngageSlot(self)
                self._cond.wait()
            return None

    def _release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify()

    def wake(self) -> None:
        """Make waiters check whether they were cancelled (an engagement's lifetime ended)."""
        with self._cond:
            self._cond.notify_all()


class EngageSlot:
    """One taken slot of `EngageSlots`."""

    __slots__ = ("_slots",)

    def __init__(self, slots: EngageSlots) -> None:
        self._slots: EngageSlots | None = slots

    def release(self) -> None:
        """Give the slot back; idempotent."""
        slots, self._slots = self._slots, None
        if slots is not None:
            slots._release()
