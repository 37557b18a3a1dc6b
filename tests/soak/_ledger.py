"""What the writers wrote and what the reconcilers saw, per object; overlapping reconciles."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

#: the state of an object that does not exist (never created, deleted, or its namespace deleted)
DELETED = "deleted"
#: a write whose outcome is unknown (a fault cut it): resolved by reading back after healing
UNKNOWN = "unknown"

Key = tuple[str, str, str]
"""(cluster, namespace, name) of one ConfigMap."""


@dataclass
class Divergence:
    """One object whose last reconciled state is not its last written state."""

    cluster: str
    namespace: str
    name: str
    written: str
    reconciled: str
    #: the replica whose view it is (the one reconciling now)
    replica: str = ""
    #: what the other replicas saw last
    others: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"cluster={self.cluster} object={self.namespace}/{self.name} "
            f"written={self.written} reconciled={self.reconciled} (by {self.replica or 'none'}; "
            f"other replicas: {self.others or 'none'})"
        )


class Ledger:
    """Per object: the last state written (acknowledged by the API server) and, per replica, the last state reconciled.

    The subject's view of a cluster is the view of the replica that reconciles
    that cluster now (the last one that reconciled anything there: the leader,
    or with sharded replicas the cluster's owner). A replica that took over a
    cluster lists every object and reconciles each, so its view is whole; a
    replica that stopped no longer counts. A missing entry counts as
    `DELETED`: an object created and deleted again before the controller
    looked is correctly never seen, and the records of a cluster that left the
    provider are forgotten with it (a controller rebuilds its view from the
    initial list when the cluster comes back). Each replica's current
    `Cluster` per name (by its config) is kept here so that a reconcile still running
    against a cluster that has since left cannot record what its stale cache
    says.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.written: dict[Key, str] = {}
        #: the number of each object's last write (values are numbered as they are written:
        #: `World.next_value`), and of its last deletion or write of unknown outcome
        self.seqs: dict[Key, int] = {}
        self.gone: dict[Key, int] = {}
        #: replica -> object -> last state reconciled (absent: deleted)
        self.views: dict[str, dict[Key, str]] = {}
        #: object -> (last state any replica reconciled, monotonic time it changed)
        self.latest: dict[Key, tuple[str, float]] = {}
        #: objects whose last write had an unknown outcome, resolved at the next quiet point
        self.unknown: set[Key] = set()
        #: objects resolved by a read-back since the last quiet point (a held write may land late)
        self.resolved: set[Key] = set()
        #: (replica, cluster) -> how often that replica let go of that cluster (see `disengaged`)
        self.generations: dict[tuple[str, str], int] = {}
        #: (replica, cluster) -> what identifies the Cluster that replica has engaged now (its
        #: config, which a sharded replica's clones share; None: none)
        self.current: dict[tuple[str, str], object | None] = {}
        #: reconciles of objects in namespaces nothing watches (must stay empty)
        self.unwatched: list[Key] = []
        self.writes = 0
        self.reconciles = 0
        #: the replica that reconciled last (the leader, while writes go on)
        self.last_reconciler: str | None = None
        #: how often another replica took over the reconciles
        self.leader_changes = 0
        #: cluster -> the replica that reconciled there last (its leader, or its shard's owner)
        self.owners: dict[str, str] = {}
        #: how often another replica took over a cluster's reconciles (summed over clusters)
        self.owner_changes = 0

    # -------------------------------------------------------------- writers

    def wrote(self, key: Key, state: str, seq: int = 0) -> None:
        """The write of ``state`` (`DELETED`: a deletion) numbered ``seq`` was acknowledged
        (0: not numbered)."""
        with self.lock:
            self.written[key] = state
            self.unknown.discard(key)
            self.writes += 1
            self._numbered(key, state, seq)

    def lost_track(self, key: Key, seq: int = 0) -> None:
        """The write to ``key`` numbered ``seq`` may or may not have happened."""
        with self.lock:
            self.unknown.add(key)
            self.written[key] = UNKNOWN
            self._numbered(key, UNKNOWN, seq)

    def _numbered(self, key: Key, state: str, seq: int) -> None:
        self.seqs[key] = seq
        if state != DELETED and state != UNKNOWN:
            return
        self.gone[key] = seq  # (a write of unknown outcome may have been a deletion)

    def numbers(self, keys: Iterable[Key]) -> dict[Key, int]:
        """The number of the last write to each of ``keys`` (0: never written)."""
        with self.lock:
            return {key: self.seqs.get(key, 0) for key in keys}

    def as_new(self, key: Key, since: int, state: str) -> bool:
        """Whether ``state`` (a copy's) is ``key``'s state after its write numbered ``since``, or
        a later one: a value numbered ``since`` or more, or gone when a deletion (or a write of
        unknown outcome) numbered ``since`` or more was made."""
        if state != DELETED:
            return int(state) >= since
        with self.lock:
            return self.gone.get(key, 0) >= since

    def resolve(self, key: Key, state: str) -> None:
        with self.lock:
            self.written[key] = state
            self.unknown.discard(key)
            self.resolved.add(key)

    def namespace_gone(self, cluster: str, namespace: str) -> None:
        """Every object of ``namespace`` in ``cluster`` is deleted with it."""
        with self.lock:
            for key in self.written:
                if key[0] == cluster and key[1] == namespace:
                    self.written[key] = DELETED
                    self.unknown.discard(key)

    # -------------------------------------------------------------- reconcilers

    def engaged(self, replica: str, cluster: str, obj: object | None) -> None:
        """Replica ``replica`` now has ``obj`` as cluster ``cluster`` (None: the cluster left)."""
        with self.lock:
            self.current[(replica, cluster)] = obj
            if obj is None:  # what it saw there is forgotten with the cluster
                view = self.views.get(replica, {})
                for key in [k for k in view if k[0] == cluster]:
                    del view[key]

    def disengaged(self, replica: str, cluster: str) -> None:
        """``replica``'s manager let go of ``cluster`` (it left, or with sharding moved to another
        replica): what it saw there is forgotten, and reconciles that began before do not count.
        Taking the cluster back, it lists it again and sees only objects that exist then (a
        deletion made meanwhile comes as no event: it is the other replica's to see)."""
        with self.lock:
            self.generations[(replica, cluster)] = self.generations.get((replica, cluster), 0) + 1
            view = self.views.get(replica, {})
            for key in [k for k in view if k[0] == cluster]:
                del view[key]

    def generation(self, replica: str, cluster: str) -> int:
        """Taken by a reconcile before it reads, handed back to `saw`."""
        with self.lock:
            return self.generations.get((replica, cluster), 0)

    def retired(self, replica: str) -> None:
        """``replica`` stopped for good: its clusters and its view are dropped."""
        with self.lock:
            for key in [k for k in self.current if k[0] == replica]:
                del self.current[key]
            self.views.pop(replica, None)

    def forget(self, cluster: str) -> None:
        """The cluster left every replica: what was reconciled in it is forgotten with it."""
        with self.lock:
            for view in self.views.values():
                for key in [k for k in view if k[0] == cluster]:
                    del view[key]
            for key in [k for k in self.latest if k[0] == cluster]:
                del self.latest[key]
            self.owners.pop(cluster, None)

    def saw(
        self, replica: str, cluster_obj: object, key: Key, state: str, generation: int = 0
    ) -> None:
        with self.lock:
            self.reconciles += 1
            if self.current.get((replica, key[0])) is not cluster_obj:
                return  # a reconcile of a cluster that has left this replica since
            if self.generations.get((replica, key[0]), 0) != generation:
                return  # began before the replica let go of the cluster
            if self.last_reconciler not in (None, replica):
                self.leader_changes += 1
            self.last_reconciler = replica
            if self.owners.setdefault(key[0], replica) != replica:
                self.owner_changes += 1
                self.owners[key[0]] = replica
            view = self.views.setdefault(replica, {})
            if state == DELETED:
                view.pop(key, None)
            else:
                view[key] = state
            if self.latest.get(key, (DELETED, 0.0))[0] != state:
                self.latest[key] = (state, time.monotonic())

    def reconciled_state(self, key: Key, replica: str | None = None) -> str:
        """What ``replica`` (default: the last one that reconciled ``key``'s cluster) last saw of ``key``."""
        with self.lock:
            r = replica or self.owners.get(key[0], "")
            return self.views.get(r, {}).get(key, DELETED)

    def seen_since(self, key: Key, state: str, since: float) -> float | None:
        """When a replica reconciled ``key`` in ``state`` (if that is the latest, and changed after ``since``)."""
        with self.lock:
            seen, at = self.latest.get(key, (DELETED, 0.0))
            if seen == state and at:
                return max(at, since)
            return None

    # -------------------------------------------------------------- checks

    def divergences(self, keys: Iterable[Key] | None = None) -> list[Divergence]:
        """Objects whose last written state is not what the replica reconciling their cluster saw last."""
        with self.lock:
            if keys is None:
                keys = self._objects()
            out = []
            for key in sorted(keys):
                replica = self.owners.get(key[0], "")
                written = self.written.get(key, DELETED)
                seen = self.views.get(replica, {}).get(key, DELETED)
                if written != seen:
                    others = {r: v.get(key, DELETED) for r, v in self.views.items() if r != replica}
                    out.append(Divergence(*key, written, seen, replica, others))
            return out

    def objects(self) -> set[Key]:
        """Every object written, or seen by the replica reconciling its cluster."""
        with self.lock:
            return self._objects()

    def _objects(self) -> set[Key]:
        seen = (
            k
            for cluster, replica in self.owners.items()
            for k in self.views.get(replica, {})
            if k[0] == cluster
        )
        return {*self.written, *seen}


@dataclass
class Overlaps:
    """Enter/exit of reconciles per replica; counts any two that overlap on one object, or on one cluster across replicas."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: key -> replicas reconciling it now
    active: dict[Key, list[str]] = field(default_factory=dict)
    #: (replica, cluster) -> reconciles in flight
    per_cluster: dict[tuple[str, str], int] = field(default_factory=dict)
    found: list[str] = field(default_factory=list)

    def enter(self, replica: str, key: Key) -> None:
        with self.lock:
            holders = self.active.setdefault(key, [])
            if holders:
                self.found.append(f"{key} entered by {replica} while {holders} reconcile it")
            holders.append(replica)
            others = [
                r
                for (r, c), n in self.per_cluster.items()
                if c == key[0] and r != replica and n > 0
            ]
            if others:
                self.found.append(
                    f"cluster {key[0]} reconciled by {replica} while {others} reconcile it too"
                )
            self.per_cluster[(replica, key[0])] = self.per_cluster.get((replica, key[0]), 0) + 1

    def exit(self, replica: str, key: Key) -> None:
        with self.lock:
            holders = self.active.get(key, [])
            if replica in holders:
                holders.remove(replica)
            if not holders:
                self.active.pop(key, None)
            self.per_cluster[(replica, key[0])] -= 1

    def in_flight(self, cluster: str) -> int:
        with self.lock:
            return sum(n for (_, c), n in self.per_cluster.items() if c == cluster)
