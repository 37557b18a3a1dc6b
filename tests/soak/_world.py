"""The soak's fleet, its subject (managers reconciling ConfigMaps) and its writers."""

from __future__ import annotations

import itertools
import logging
import random
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import mcruntime
from mcruntime.cache import CacheOptions
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet, Proxy, wait_for
from mcruntime.errors import ClusterNotFound, NotFound
from mcruntime.event import meta
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.manager.coordinator import Sharded
from mcruntime.predicate import from_func
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request
from tests.soak._copier import HUB, HUB_NS, SOURCES, Copier, hub_key
from tests.soak._ledger import DELETED, Key, Ledger, Overlaps

log = logging.getLogger("soak")

#: namespaces the subject's caches watch
WATCHED = ("soak-a", "soak-b", "soak-c")
#: written to like the others but watched by nothing: no reconcile may name it
UNWATCHED = "soak-x"
NAMESPACES = (*WATCHED, UNWATCHED)
#: ConfigMaps the writers keep creating, updating and deleting, per namespace
OBJECTS = tuple(f"cm-{i}" for i in range(4))
#: the ConfigMap written after a fault heals, to time the cluster's recovery
PROBE = "probe"
#: deadline of one write (seconds)
WRITE_TIMEOUT = 3.0
#: the hub's writer writes this many times slower than a member's (each write is copied to
#: every member)
HUB_SLOWER = 4
#: leader election of the replicas: short, so that a killed leader is replaced within seconds
LEASE_DURATION = 6.0
RENEW_DEADLINE = 4.0
RETRY_PERIOD = 1.0


def configmap(namespace: str, name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"v": value},
    }


@dataclass
class World:
    """Everything a fault or a check needs to reach."""

    fleet: Fleet
    #: the subject reaches each cluster through its proxy (partition and latency faults);
    #: writers and checks go straight to the server
    proxies: dict[str, Proxy]
    #: a client per cluster, straight to its server (never started: no cache)
    direct: dict[str, Cluster]
    ledger: Ledger
    overlaps: Overlaps
    #: the replicas' local cluster: the hub, holding the sources the copiers copy to every member
    hub: APIServer
    #: writes of the copiers to members, per (member, namespace, name)
    copy_overlaps: Overlaps = field(default_factory=Overlaps)
    #: the hub again when it holds the replicas' leader-election Lease, or with ``sharded`` their
    #: peer and fence Leases (None: one replica, no election)
    lease: APIServer | None = None
    #: the replicas split the clusters among them (`Sharded`) instead of electing a leader
    sharded: bool = False
    #: the replicas run with ``ManagerOptions.freeze_gc``
    freeze_gc: bool = False
    health_interval: float = 2.0
    health_timeout: float = 1.0
    replicas: list[Replica] = field(default_factory=list)
    writers: Writers | None = None
    #: clusters the provider has removed now (a replica started meanwhile must not add them)
    removed: set[str] = field(default_factory=set)
    #: held while replicas are started, retired, or clusters removed and added
    membership: threading.RLock = field(default_factory=threading.RLock)
    #: replicas that stopped without a fault asking for it (e.g. a renewal missed on a busy machine)
    unplanned_restarts: int = 0
    replicas_started: int = 0
    #: writes the copiers made to members (acknowledged)
    copy_writes: int = 0
    #: held while the hub's probe is written (see `tests.soak._faults.probe`)
    hub_probe_lock: threading.Lock = field(default_factory=threading.Lock)
    _replica_seq: itertools.count[int] = field(default_factory=itertools.count)
    _values: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _values_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def names(self) -> list[str]:
        return self.fleet.names

    def copied(self) -> None:
        with self._values_lock:
            self.copy_writes += 1

    def next_value(self) -> str:
        """A value greater than every one written before (per object: monotonically increasing)."""
        with self._values_lock:
            return str(next(self._values))

    def spawn_replica(self) -> Replica:
        """Start one more replica (named ``r<n>``) and return it."""
        with self.membership:
            r = Replica(f"r{next(self._replica_seq)}", self)
            self.replicas.append(r)
            self.replicas_started += 1
        r.manager.start()
        return r

    def retire(self, replica: Replica) -> None:
        """Stop ``replica`` for good (a pod deleted) and forget it."""
        with self.membership:
            if replica in self.replicas:
                self.replicas.remove(replica)
        replica.stop()

    def live_replicas(self) -> list[Replica]:
        with self.membership:
            return [r for r in self.replicas if not r.stopped()]

    def engaged(self) -> bool:
        """Every cluster the provider has is engaged: by every live replica (leader election:
        the standbys keep their caches warm), or by one of them (sharded)."""
        live = self.live_replicas()
        if not live:
            return False
        if not self.sharded:
            return all(r.engaged() for r in live)
        with self.membership:
            wanted = set(self.names) - self.removed
        engaged: set[str] = set()
        for r in live:
            engaged.update(r.manager.engaged_clusters())
        return engaged >= wanted

    def live_replica(self, name: str | None) -> Replica | None:
        return next((r for r in self.live_replicas() if r.name == name), None)

    def owner_of(self, cluster: str) -> Replica | None:
        """The live replica that reconciled ``cluster`` last (the leader, or its shard's owner)."""
        with self.ledger.lock:
            name = self.ledger.owners.get(cluster)
        return self.live_replica(name)

    def supervise(self, exempt: Collection[str] = ()) -> int:
        """Replace every replica that stopped by itself (as a Deployment would); how many were."""
        with self.membership:
            dead = [r for r in self.replicas if r.stopped() and r.name not in exempt]
        for r in dead:
            self.retire(r)
            self.spawn_replica()
        self.unplanned_restarts += len(dead)
        return len(dead)

    def read(self, key: Key, timeout: float = 5.0) -> str:
        """What the API server holds for ``key`` now (`DELETED` if nothing)."""
        cluster, namespace, name = key
        try:
            obj = self.direct[cluster].api_reader.get(
                "v1/ConfigMap", name, namespace, timeout=timeout
            )
        except NotFound:
            return DELETED
        return str(obj["data"]["v"])


def _not_a_copy(obj: dict[str, Any]) -> bool:
    """The ConfigMap controller leaves the copiers' namespace alone (the copies' own watch
    shares its informer)."""
    return meta(obj).get("namespace") != HUB_NS


class Replica:
    """One subject: a Manager over every cluster of the fleet (or its shard of them) with a
    ConfigMap controller, and a `Copier` of the hub's sources (its local cluster) to the members.

    The reconciler reads the object from the cache and records what it saw
    (its ``v`` or `DELETED`) in the ledger, with enter and exit of each
    reconcile for the overlap check.
    """

    def __init__(self, name: str, world: World) -> None:
        self.name = name
        self.world = world
        self.provider = Provider()
        opts = ManagerOptions(
            cluster_health_interval=world.health_interval,
            cluster_health_timeout=world.health_timeout,
            graceful_shutdown_timeout=10.0,
            freeze_gc=world.freeze_gc,
        )
        #: this replica's own path to its local cluster, the hub: its sources and Leases (frozen
        #: by the kill-leader fault)
        self.lease_path = Proxy(world.hub).start()
        local = Cluster.from_kubeconfig(
            self.lease_path.kubeconfig(),
            cache_options=CacheOptions(default_namespaces=[HUB_NS]),
        )
        if world.lease is not None:
            if world.sharded:
                opts.coordinator = Sharded(
                    namespace="default",
                    peer_id=name,
                    lease_duration=LEASE_DURATION,
                    renew_deadline=RENEW_DEADLINE,
                    renew_period=RETRY_PERIOD,
                    drain_timeout=10.0,
                )
            else:
                opts.leader_election = True
                opts.leader_election_id = "soak"
                opts.leader_election_namespace = "default"
                opts.lease_duration = LEASE_DURATION
                opts.renew_deadline = RENEW_DEADLINE
                opts.retry_period = RETRY_PERIOD
        self.manager = Manager(local, provider=self.provider, options=opts)
        self.manager.on_cluster_disengaged(lambda cluster: world.ledger.disengaged(name, cluster))
        mcruntime.controller_managed_by(self.manager).named("soak").for_(
            "v1/ConfigMap"
        ).with_event_filter(from_func(_not_a_copy)).with_options(
            max_concurrent_reconciles=4, reconcile_timeout=10.0
        ).complete(self.reconcile)
        self.copier = Copier(self).build()
        for cluster in world.names:
            if cluster not in world.removed:
                self.add(cluster)

    def stopped(self) -> bool:
        """True once the manager stopped (it stops itself when it loses its leader election)."""
        return self.manager.wait(0)

    def stop(self) -> None:
        self.manager.stop(15)
        # its Cluster objects and what it saw must not be kept alive by the soak itself
        self.world.ledger.retired(self.name)
        self.lease_path.stop()

    def reconcile(self, req: Request) -> None:
        key: Key = (req.cluster_name, req.namespace, req.name)
        ledger, overlaps = self.world.ledger, self.world.overlaps
        overlaps.enter(self.name, key)
        try:
            if req.namespace not in WATCHED:
                with ledger.lock:
                    ledger.unwatched.append(key)
                return
            generation = ledger.generation(self.name, req.cluster_name)
            try:
                cluster = self.manager.get_cluster(req.cluster_name)
            except ClusterNotFound:
                return  # it left meanwhile
            try:
                obj = cluster.client.get("v1/ConfigMap", req.name, req.namespace)
                state = str(obj["data"]["v"])
            except NotFound:
                state = DELETED
            # the engagement's Cluster, or (sharded) a clone of it sharing its config
            ledger.saw(self.name, cluster.config, key, state, generation)
        finally:
            overlaps.exit(self.name, key)

    def add(self, cluster: str) -> None:
        """Engage ``cluster`` (anew: a fresh `Cluster` through the cluster's proxy)."""
        c = Cluster.from_kubeconfig(
            self.world.proxies[cluster].kubeconfig(),
            name=cluster,
            cache_options=CacheOptions(default_namespaces=[*WATCHED, HUB_NS]),
        )
        self.world.ledger.engaged(self.name, cluster, c.config)
        self.provider.add(cluster, c)

    def remove(self, cluster: str) -> None:
        self.world.ledger.engaged(self.name, cluster, None)
        self.provider.remove(cluster)

    def engaged(self) -> bool:
        """This replica engaged every cluster its provider has (leader election: all of them)."""
        return set(self.manager.engaged_clusters()) >= set(self.provider.names())


class Writers:
    """One thread per cluster, and one for the hub's sources, creating, updating (increasing
    ``v``) and deleting ConfigMaps.

    A write is recorded only once the API server acknowledged it; a write
    that failed in any way may or may not have happened, so its object is
    marked unknown and left alone until a quiet point reads it back.
    """

    def __init__(self, world: World, rate: float, seed: int) -> None:
        self.world = world
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.seed = seed
        self.stop_event = threading.Event()
        self._cond = threading.Condition()
        self._paused = False
        self._idle: set[str] = set()
        #: (cluster, namespace) the writers keep out of (a namespace being deleted)
        self._blocked: set[tuple[str, str]] = set()
        #: held by a cluster's writer during each write
        self.cluster_locks = {name: threading.Lock() for name in (*world.names, HUB)}
        self.threads: list[threading.Thread] = []
        self.failed = 0

    def start(self) -> None:
        for i, name in enumerate((*self.world.names, HUB)):
            t = threading.Thread(
                target=self._run,
                args=(name, random.Random(self.seed * 1000 + i)),
                name=f"soak/writer/{name}",
                daemon=True,
            )
            t.start()
            self.threads.append(t)

    def stop(self) -> None:
        self.stop_event.set()
        with self._cond:
            self._cond.notify_all()
        for t in self.threads:
            t.join(WRITE_TIMEOUT * 3)

    def pause(self, timeout: float = WRITE_TIMEOUT * 4) -> None:
        """Stop writing; returns once no write is in flight."""
        with self._cond:
            self._paused = True
        wait_for(
            lambda: len(self._idle) == len(self.threads),
            timeout,
            "every writer idle",
        )

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def block(self, cluster: str, namespace: str) -> None:
        """Keep writers out of ``namespace`` in ``cluster``; returns once none writes there."""
        with self.cluster_locks[cluster], self._cond:
            self._blocked.add((cluster, namespace))

    def unblock(self, cluster: str, namespace: str) -> None:
        with self._cond:
            self._blocked.discard((cluster, namespace))

    def _run(self, cluster: str, rng: random.Random) -> None:
        world, ledger = self.world, self.world.ledger
        client = world.direct[cluster].client
        keys: list[Key] = [(cluster, ns, n) for ns in NAMESPACES for n in OBJECTS]
        interval = self.interval
        if cluster == HUB:  # each of its writes is copied to every member
            keys = [hub_key(name) for name in SOURCES]
            interval *= HUB_SLOWER
        while not self.stop_event.is_set():
            with self._cond:
                while self._paused and not self.stop_event.is_set():
                    self._idle.add(cluster)
                    self._cond.wait()
                self._idle.discard(cluster)
            if interval:
                self.stop_event.wait(rng.uniform(0.5, 1.5) * interval)
            with self.cluster_locks[cluster]:
                with self._cond:
                    if self._paused:
                        continue
                    blocked = set(self._blocked)
                with ledger.lock:
                    free = [k for k in keys if k not in ledger.unknown and k[:2] not in blocked]
                    if not free:
                        continue
                    key = rng.choice(free)
                    state = ledger.written.get(key, DELETED)
                _, ns, name = key
                value = world.next_value()
                seq = int(value)
                try:
                    if state == DELETED:
                        client.create(configmap(ns, name, value), timeout=WRITE_TIMEOUT)
                        ledger.wrote(key, value, seq)
                    elif rng.random() < 0.85:
                        client.patch(
                            "v1/ConfigMap", name, {"data": {"v": value}}, ns, timeout=WRITE_TIMEOUT
                        )
                        ledger.wrote(key, value, seq)
                    else:
                        client.delete("v1/ConfigMap", name, ns, timeout=WRITE_TIMEOUT)
                        ledger.wrote(key, DELETED, seq)
                except Exception as exc:
                    with self._cond:
                        self.failed += 1
                    log.debug("cluster=%s write of %s/%s failed: %s", cluster, ns, name, exc)
                    ledger.lost_track(key, seq)
        with self._cond:
            self._idle.add(cluster)
