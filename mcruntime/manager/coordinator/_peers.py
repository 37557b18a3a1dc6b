"""The peer registry: replicas announce themselves with renewed Leases and read each other's."""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from mcruntime._streak import FailureStreaks
from mcruntime.errors import MCRuntimeError
from mcruntime.leaderelection import LeaseClient, LeaseHolder, LeaseObserver, LeaseRecord
from mcruntime.manager.coordinator._hrw import Peer
from mcruntime.manager.coordinator._names import lease_name

__all__ = ["LABEL_ROLE", "ANNOTATION_WEIGHT", "PeerRegistry"]

log = logging.getLogger("mcruntime.coordinator")

#: label telling mcruntime's Leases apart: "peer" or "fence"
LABEL_ROLE = "mcruntime.io/lease"
ANNOTATION_WEIGHT = "mcruntime.io/weight"
#: a Lease seen unchanged for this many lease durations is garbage: deleted by a live replica
GC_LEASE_DURATIONS = 2
#: how far (seconds) the wall clocks of two replicas may disagree: a peer Lease first seen
#: with a renewTime older than its own lease duration plus this is dead from the start
CLOCK_SKEW_ALLOWANCE = 60.0


def _stale(record: LeaseRecord, now: datetime) -> bool:
    """Whether ``record``'s renewTime is older than its lease duration plus
    `CLOCK_SKEW_ALLOWANCE` by the wall clock ``now`` (False when it has none)."""
    if not record.renew_time:
        return False
    try:
        renewed = datetime.fromisoformat(record.renew_time)
    except ValueError:
        return False
    if renewed.tzinfo is None:
        renewed = renewed.replace(tzinfo=UTC)
    age = (now - renewed).total_seconds()
    return age > record.lease_duration_seconds + CLOCK_SKEW_ALLOWANCE


def _weight(text: str | None) -> float:
    try:
        w = float(text) if text else 1.0
    except ValueError:
        return 1.0
    return w if w > 0 and math.isfinite(w) else 1.0


class PeerRegistry:
    """This replica's peer Lease (``<prefix><id>``) and the set of live peers.

    `heartbeat()` creates or renews our Lease (weight in an annotation);
    `refresh()` lists the peer Leases and keeps those held and not expired
    by the local clock (a peer that stops renewing drops out after the lease
    duration). A Lease this process sees for the first time with a renewTime
    older than its lease duration plus `CLOCK_SKEW_ALLOWANCE` by the wall clock
    (a replica killed long ago) is dead until its record changes: a newcomer does
    not wait a lease duration for it. `live()` always includes this replica. `leave()`
    releases and deletes our Lease so the others rebalance at once.
    Called from one thread; `live()` is thread-safe.
    """

    def __init__(
        self,
        leases: LeaseClient,
        me: Peer,
        *,
        prefix: str,
        lease_duration: float,
        clock: Callable[[], float],
    ) -> None:
        self.me = me
        self.prefix = prefix
        self.leases = leases
        self.observer = LeaseObserver(clock)
        self._holder = LeaseHolder(
            leases,
            lease_name(prefix, me.id),
            me.id,
            lease_duration=lease_duration,
            observer=self.observer,
            labels={LABEL_ROLE: "peer"},
            annotations={ANNOTATION_WEIGHT: f"{me.weight:g}"},
        )
        self._lock = threading.Lock()
        self._live: tuple[Peer, ...] = (me,)
        #: Leases found long expired at first sight, by name: their resourceVersion then
        self._dead: dict[str, str] = {}
        #: other peers' Leases seen unchanged for `GC_LEASE_DURATIONS`: (name, resourceVersion)
        self._garbage: list[tuple[str, str]] = []
        #: failed heartbeats in a row
        self._streaks = FailureStreaks(log, f"coordinator peer={me.id}")
        #: why the last heartbeat failed ("" when it worked)
        self.last_error = ""

    @property
    def lease_name(self) -> str:
        return self._holder.name

    def heartbeat(self, timeout: float) -> bool:
        """Create or renew our peer Lease; False (logged once per failure streak) if that failed."""
        ok = self._holder.try_acquire_or_renew(timeout)
        cluster, what = self.leases.rest.cluster_name, f"renewing peer Lease {self.lease_name}"
        if ok:
            self.last_error = ""
            self._streaks.recovered(cluster, what)
        else:
            reason = self._holder.last_error or f"held by {self._holder.holder!r}"
            self.last_error = reason
            self._streaks.failed(cluster, what, reason, retry="retrying at the next heartbeat")
        return ok

    def refresh(self, timeout: float) -> bool:
        """Re-read the peer Leases; True if the live set changed. Raises on API errors."""
        items = self.leases.list(labels={LABEL_ROLE: "peer"}, timeout=timeout)
        peers: dict[str, Peer] = {}
        names: set[str] = set()
        expired: set[str] = set()
        garbage: list[tuple[str, str]] = []
        now = datetime.now(UTC)
        for lease in items:
            meta = lease.get("metadata") or {}
            name = str(meta.get("name") or "")
            if not name.startswith(self.prefix):
                continue
            names.add(name)
            version = str(meta.get("resourceVersion") or "")
            first = self.observer.record(name) is None
            record = self.observer.observe(lease)
            if first and record.holder != self.me.id and _stale(record, now):
                self._dead[name] = version
                log.info(
                    "coordinator peer=%s: peer %s's Lease %s was last renewed at %s, long "
                    "expired: it counts as dead until it is renewed",
                    self.me.id,
                    record.holder or "(none)",
                    name,
                    record.renew_time,
                )
            elif self._dead.get(name) != version:
                self._dead.pop(name, None)  # renewed since: judged by the local clock
            if record.holder and self.observer.valid(name) and name not in self._dead:
                weight = _weight((meta.get("annotations") or {}).get(ANNOTATION_WEIGHT))
                peers[record.holder] = Peer(record.holder, weight)
            elif record.holder:
                expired.add(record.holder)
            if name != self.lease_name and self._unchanged(name, record):
                garbage.append((name, version))
        self._garbage = garbage
        self.observer.retain(names)
        self._dead = {n: v for n, v in self._dead.items() if n in names}
        peers[self.me.id] = self.me
        live = tuple(sorted(peers.values(), key=lambda p: p.id))
        with self._lock:
            before, self._live = self._live, live
        if live == before:
            return False
        # a peer that leaves deletes its Lease; one whose Lease is there but expired stopped
        # renewing it: killed, hung, or cut off from this cluster, so it is said louder
        died = sorted(({p.id for p in before} - {p.id for p in live}) & expired)
        if died:
            log.warning(
                "coordinator peer=%s: peer%s %s stopped renewing %s Lease without leaving "
                "(killed, hung or cut off from the Lease cluster); %s clusters move to the "
                "live peers %s",
                self.me.id,
                "s" if len(died) > 1 else "",
                ", ".join(died),
                "their" if len(died) > 1 else "its",
                "their" if len(died) > 1 else "its",
                [p.id for p in live],
            )
        log.info("coordinator peer=%s: live peers %s", self.me.id, [p.id for p in live])
        return True

    def _unchanged(self, name: str, record: LeaseRecord) -> bool:
        """Whether ``name`` was seen with its current ``record`` for `GC_LEASE_DURATIONS` of its
        lease durations by the local clock: expired for at least one lease duration more."""
        since = self.observer.since(name)
        duration = max(record.lease_duration_seconds, 1)
        return since is not None and self.observer.clock() - since >= GC_LEASE_DURATIONS * duration

    def garbage(self) -> list[tuple[str, str]]:
        """The other peers' Leases the last `refresh` found unchanged for `GC_LEASE_DURATIONS`
        lease durations (killed replicas'), as (name, resourceVersion) to delete."""
        return list(self._garbage)

    def live(self) -> tuple[Peer, ...]:
        """The live peers as last refreshed (sorted by id; this replica included)."""
        with self._lock:
            return self._live

    def leave(self, timeout: float) -> None:
        """Release and delete our peer Lease (best effort)."""
        if not self._holder.release(timeout):
            return
        lease = self._holder.lease
        version = str(((lease or {}).get("metadata") or {}).get("resourceVersion") or "")
        with contextlib.suppress(MCRuntimeError):
            self.leases.delete(self.lease_name, resource_version=version or None, timeout=timeout)
