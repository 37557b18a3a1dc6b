"""Faults injected at random (seeded), one or several at a time, each healed after a random duration."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mcruntime.envtest import WaitTimeout, wait_for
from mcruntime.errors import AlreadyExists, NotFound
from tests.soak._copier import SOURCES, copies_held, hub_key
from tests.soak._ledger import DELETED, Key
from tests.soak._world import (
    LEASE_DURATION,
    PROBE,
    RENEW_DEADLINE,
    WATCHED,
    Replica,
    World,
    configmap,
)

log = logging.getLogger("soak")

#: how long a healed cluster may take to converge before it counts as not recovered
RECOVERY_DEADLINE = 120.0


@dataclass
class Fault:
    """One fault of one kind on one cluster: `inject`, then `heal` after ``duration`` seconds."""

    kind: str
    cluster: str
    duration: float
    #: namespace whose probe times the recovery
    namespace: str = WATCHED[0]
    detail: str = ""

    def inject(self, world: World) -> None:
        raise NotImplementedError

    def heal(self, world: World) -> None:
        """Undo the fault (nothing to undo for instantaneous ones)."""


class Freeze(Fault):
    """The API server hangs for everyone (`APIServer.freeze`), writers included."""

    def inject(self, world: World) -> None:
        world.fleet.freeze(self.cluster)

    def heal(self, world: World) -> None:
        world.fleet.thaw(self.cluster)


class Partition(Fault):
    """Only the subject's path to the cluster hangs (its `Proxy` frozen); writers go on writing."""

    def inject(self, world: World) -> None:
        world.proxies[self.cluster].freeze()

    def heal(self, world: World) -> None:
        world.proxies[self.cluster].thaw()


class Restart(Fault):
    """The API server stops (connections refused, watches cut) and starts again: same port, same data."""

    def inject(self, world: World) -> None:
        world.fleet[self.cluster].stop()

    def heal(self, world: World) -> None:
        world.fleet[self.cluster].start()


class StorageOutage(Fault):
    """The API server's storage goes down (`APIServer.storage_outage`, etcd down): what needs
    it hangs until its deadline, what the watch cache serves goes on, ``/readyz`` fails."""

    def inject(self, world: World) -> None:
        world.fleet[self.cluster].storage_outage()

    def heal(self, world: World) -> None:
        world.fleet[self.cluster].storage_restored()


class DropWatches(Fault):
    """Every watch stream of the server ends cleanly; clients resume from their resourceVersion."""

    def inject(self, world: World) -> None:
        world.fleet[self.cluster].drop_watches()


class Compact(Fault):
    """The server forgets its event history and cuts the watches: resuming gets 410 Gone, informers relist."""

    def inject(self, world: World) -> None:
        server = world.fleet[self.cluster]
        server.compact()
        server.drop_watches()


class Latency(Fault):
    """The subject's path to the cluster gets slow (`Proxy.latency`, each way)."""

    def inject(self, world: World) -> None:
        world.proxies[self.cluster].latency = float(self.detail)

    def heal(self, world: World) -> None:
        world.proxies[self.cluster].latency = 0.0


class RemoveCluster(Fault):
    """The provider removes the cluster (disengaged everywhere) and adds it again later (a new `Cluster`)."""

    def inject(self, world: World) -> None:
        with world.membership:
            world.removed.add(self.cluster)
            for r in world.live_replicas():
                r.remove(self.cluster)
            world.ledger.forget(self.cluster)

    def heal(self, world: World) -> None:
        with world.membership:
            world.removed.discard(self.cluster)
            for r in world.live_replicas():
                r.add(self.cluster)


class KillLeader(Fault):
    """The leading replica's path to its Lease is cut (its `Proxy` frozen): it must stop
    reconciling before its Lease expires, the standby takes over; when healed, the old
    replica (stopped by then, as a pod whose container exited) is replaced by a new standby.
    """

    victim: str | None = None

    def _target(self, world: World) -> Replica | None:
        with world.ledger.lock:
            leader = world.ledger.last_reconciler
        return world.live_replica(leader)

    def _victim(self, world: World) -> Replica | None:
        return next((r for r in world.replicas if r.name == self.victim), None)

    def inject(self, world: World) -> None:
        r = self._target(world)
        if r is not None:
            self.victim = r.name
            self.detail = r.name
            r.lease_path.freeze()

    def heal(self, world: World) -> None:
        victim = self._victim(world)
        if victim is None:
            return
        victim.lease_path.thaw()
        if victim.manager.leader_lost:  # it stops itself
            wait_for(victim.stopped, 30, f"replica {victim.name} stopped after losing its Lease")
            self.detail += " (lost its Lease, replaced)"
        if victim.stopped():
            world.retire(victim)
            world.spawn_replica()


class KillShardOwner(KillLeader):
    """Sharded replicas: the path to the Leases of the replica that owns the cluster is cut
    (its `Proxy` frozen) as if it were killed. It must stop reconciling each of its clusters
    before that cluster's fence expires; the other replicas take them over. When healed it is
    replaced by a new replica (a killed pod's replacement), which takes its share back.
    """

    def _target(self, world: World) -> Replica | None:
        return world.owner_of(self.cluster)

    def heal(self, world: World) -> None:
        victim = self._victim(world)
        if victim is None:
            return
        world.retire(victim)
        world.spawn_replica()


class DeleteNamespace(Fault):
    """A watched namespace is deleted (its objects with it) and created again."""

    def inject(self, world: World) -> None:
        assert world.writers is not None
        world.writers.block(self.cluster, self.namespace)
        direct = world.direct[self.cluster]
        direct.client.delete("v1/Namespace", self.namespace, timeout=10)

        def gone() -> bool:
            try:
                direct.api_reader.get("v1/Namespace", self.namespace, timeout=5)
            except NotFound:
                return True
            return False

        wait_for(gone, 60, f"namespace {self.namespace} of {self.cluster} deleted", interval=0.1)
        world.ledger.namespace_gone(self.cluster, self.namespace)

    def heal(self, world: World) -> None:
        assert world.writers is not None
        client = world.direct[self.cluster].client

        def created() -> bool:
            try:
                client.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}},
                    timeout=5,
                )
            except AlreadyExists:
                return True
            except Exception as exc:  # e.g. a deadline on a busy machine: try again
                log.debug("cluster=%s creating namespace failed: %s", self.cluster, exc)
                return False
            return True

        wait_for(created, 30, f"namespace {self.namespace} of {self.cluster} created")
        world.writers.unblock(self.cluster, self.namespace)


KINDS: dict[str, type[Fault]] = {
    "freeze": Freeze,
    "partition": Partition,
    "restart": Restart,
    "storage-outage": StorageOutage,
    "drop-watches": DropWatches,
    "compact": Compact,
    "latency": Latency,
    "remove-cluster": RemoveCluster,
    "delete-namespace": DeleteNamespace,
    "kill-leader": KillLeader,
    "kill-shard-owner": KillShardOwner,
}
#: kinds that need replicas with leader election, and kinds that need sharded replicas
ELECTED_ONLY = {"kill-leader"}
SHARDED_ONLY = {"kill-shard-owner"}
#: kinds that need two replicas
REPLICATED = ELECTED_ONLY | SHARDED_ONLY
#: kinds that are over once injected (recovery is timed from the injection)
INSTANT = {"drop-watches", "compact"}


def make_fault(kind: str, cluster: str, rng: random.Random) -> Fault:
    cls = KINDS[kind]
    if kind in INSTANT:
        return cls(kind, cluster, 0.0)
    if kind == "latency":
        return cls(kind, cluster, rng.uniform(2, 10), detail=f"{rng.uniform(0.02, 0.3):.3f}")
    if kind in REPLICATED:  # mostly past the renew deadline: the victim loses its Lease(s)
        return cls(kind, cluster, rng.uniform(RENEW_DEADLINE - 2, LEASE_DURATION + 4))
    if kind == "delete-namespace":
        return cls(kind, cluster, rng.uniform(0.5, 3), namespace=rng.choice(WATCHED))
    # sometimes longer than the health checks' interval + timeout, sometimes shorter
    return cls(kind, cluster, rng.uniform(0.5, 10))


@dataclass
class Outcome:
    kind: str
    cluster: str
    duration: float
    #: seconds from heal until the cluster converged (the probe written after healing was reconciled)
    recovery: float | None
    error: str | None = None
    #: seconds from heal until the cluster's copies of the hub's sources caught up with the
    #: hub as it was after healing (the hub's probe written then included)
    copy_recovery: float | None = None


def write_probe(world: World, key: Key, end: float) -> str | None:
    """Write a new value to the probe object ``key`` (created if missing), retried until
    ``end`` (monotonic); the value, or None if no write succeeded by then."""
    cluster, namespace, name = key
    client = world.direct[cluster].client
    stop = threading.Event()
    while True:
        value = world.next_value()
        try:
            try:
                client.patch("v1/ConfigMap", name, {"data": {"v": value}}, namespace, timeout=5)
            except NotFound:
                client.create(configmap(namespace, name, value), timeout=5)
            world.ledger.wrote(key, value, int(value))
            return value
        except Exception as exc:
            world.ledger.lost_track(key, int(value))
            log.debug("cluster=%s probe write failed: %s", cluster, exc)
            if time.monotonic() > end:
                return None
            stop.wait(0.2)


def copies_caught_up(world: World, member: str, marks: dict[Key, int]) -> bool:
    """Whether ``member`` holds, of each hub source in ``marks``, its state after the write
    numbered there, or a later one (read from the member's API server)."""
    try:
        held = copies_held(world.direct[member].api_reader, timeout=2)
    except Exception as exc:
        log.debug("cluster=%s copies not readable: %s", member, exc)
        return False
    return all(
        world.ledger.as_new(key, seq, held.get(key[2], DELETED)) for key, seq in marks.items()
    )


def probe(
    world: World, cluster: str, namespace: str, healed: float
) -> tuple[float | None, float | None]:
    """Write the probe object of ``cluster`` and the hub's, and wait until the subject
    reconciled the first and copied the hub's sources as they are now to ``cluster``.

    Returns the seconds from ``healed`` until each (None after `RECOVERY_DEADLINE`).
    """
    end = healed + RECOVERY_DEADLINE
    with world.hub_probe_lock:  # numbered in the order written: a later value lands later
        hub_value = write_probe(world, hub_key(PROBE), end)
        marks = world.ledger.numbers(hub_key(name) for name in (*SOURCES, PROBE))
    key: Key = (cluster, namespace, PROBE)
    value = write_probe(world, key, end)
    recovery: float | None = None
    copies: float | None = None

    def recovered() -> bool:
        nonlocal recovery, copies
        if recovery is None and value is not None:
            seen = world.ledger.seen_since(key, value, healed)
            if seen is not None:
                recovery = seen - healed
        if copies is None and hub_value is not None and copies_caught_up(world, cluster, marks):
            copies = time.monotonic() - healed
        return (recovery is not None or value is None) and (copies is not None or hub_value is None)

    if value is not None or hub_value is not None:
        with contextlib.suppress(WaitTimeout):
            wait_for(
                recovered,
                max(1.0, end - time.monotonic()),
                f"probe of {cluster} reconciled and its copies caught up",
                interval=0.05,
            )
    return recovery, copies


@dataclass
class Scheduler:
    """Starts faults at random (seeded) on clusters that have none, at most ``max_active`` at once."""

    world: World
    rng: random.Random
    kinds: list[str]
    max_active: int = 3
    #: mean seconds between two fault starts
    mean_gap: float = 1.5
    outcomes: list[Outcome] = field(default_factory=list)
    on_error: Callable[[str], None] = print
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _active: dict[str, tuple[threading.Thread, threading.Event]] = field(default_factory=dict)
    _faults: dict[str, Fault] = field(default_factory=dict)
    _running: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._running.set()
        self._thread = threading.Thread(target=self._loop, name="soak/faults", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._running.set()
        if self._thread is not None:
            self._thread.join(10)
        self.heal_all()

    def pause(self) -> None:
        """No new faults until `resume`."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def heal_all(self, timeout: float = RECOVERY_DEADLINE + 60) -> None:
        """Heal every active fault now and wait until each recovered (or its deadline passed)."""
        with self._lock:
            active = list(self._active.values())
        for _, heal_now in active:
            heal_now.set()
        end = time.monotonic() + timeout
        for t, _ in active:
            t.join(max(0.0, end - time.monotonic()))

    def active(self) -> int:
        with self._lock:
            return len(self._active)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._stop.wait(self.rng.expovariate(1 / self.mean_gap))
            self._running.wait()
            if self._stop.is_set():
                return
            with self._lock:
                killing = {
                    f.victim
                    for f in self._faults.values()
                    if isinstance(f, KillLeader) and f.victim
                }
            self.world.supervise(exempt={v for v in killing if v is not None})
            with self._lock:
                if len(self._active) >= self.max_active:
                    continue
                free = [c for c in self.world.names if c not in self._active]
                if not free:
                    continue
                kind = self.rng.choice(self.kinds)
                if kind in REPLICATED and any(
                    isinstance(f, KillLeader) for f in self._faults.values()
                ):
                    continue  # one replica killed at a time: the other must take over
                fault = make_fault(kind, self.rng.choice(free), self.rng)
                self._faults[fault.cluster] = fault
                heal_now = threading.Event()
                t = threading.Thread(
                    target=self._run,
                    args=(fault, heal_now),
                    name=f"soak/fault/{fault.cluster}",
                    daemon=True,
                )
                self._active[fault.cluster] = (t, heal_now)
            t.start()

    def _run(self, fault: Fault, heal_now: threading.Event) -> None:
        world = self.world
        error: str | None = None
        recovery: float | None = None
        began = time.monotonic()
        try:
            log.info("fault=%s cluster=%s injected %s", fault.kind, fault.cluster, fault.detail)
            fault.inject(world)
            heal_now.wait(fault.duration)
        except Exception as exc:
            error = f"inject: {exc!r}"
        try:
            fault.heal(world)
        except Exception as exc:
            error = (error + "; " if error else "") + f"heal: {exc!r}"
        healed = time.monotonic()
        log.info(
            "fault=%s cluster=%s healed after %.2fs", fault.kind, fault.cluster, healed - began
        )
        copies: float | None = None
        if error is None:
            recovery, copies = probe(world, fault.cluster, fault.namespace, healed)
            if recovery is None:
                error = f"not recovered within {RECOVERY_DEADLINE:.0f} s"
            if copies is None:
                error = (error + "; " if error else "") + (
                    f"copies of the hub's sources not caught up within {RECOVERY_DEADLINE:.0f} s"
                )
        else:
            self.on_error(f"fault {fault.kind} on {fault.cluster} failed: {error}")
        with self._lock:
            self.outcomes.append(
                Outcome(fault.kind, fault.cluster, healed - began, recovery, error, copies)
            )
            del self._active[fault.cluster]
            del self._faults[fault.cluster]
