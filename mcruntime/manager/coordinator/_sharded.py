"""``Sharded``: split the provider's clusters across replicas, at most one replica per cluster."""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._streak import FailureStreaks, describe_error
from mcruntime._threads import start_thread, thread_name
from mcruntime.errors import ClusterNotFound, ConfigError, Conflict, MCRuntimeError, NotFound
from mcruntime.leaderelection import (
    LeaseClient,
    LeaseHolder,
    LeaseObserver,
    Watchdog,
    default_identity,
    default_namespace,
)
from mcruntime.manager.coordinator._hrw import Peer, owner
from mcruntime.manager.coordinator._names import lease_name
from mcruntime.manager.coordinator._peers import GC_LEASE_DURATIONS, LABEL_ROLE, PeerRegistry
from mcruntime.multicluster import Lifetime, on_end

if TYPE_CHECKING:
    from mcruntime.client import APIReader
    from mcruntime.cluster import Cluster
    from mcruntime.manager import Manager

__all__ = ["Sharded", "ANNOTATION_CLUSTER"]

log = logging.getLogger("mcruntime.coordinator")

ANNOTATION_CLUSTER = "mcruntime.io/cluster"
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_DRAIN_TIMEOUT = 30.0
_PREFIX = re.compile(r"[a-z0-9][-a-z0-9]*")
_DRAIN_POLL = 0.05
#: what the probe's failure streak is about
_READING_PEERS = "reading peers and fences"
#: what the streak of fences lost for want of renewal is about (one cause: the Lease server)
_RENEWING_FENCES = "renewing fences"
#: what the streak of failed deletions of expired Leases is about
_COLLECTING = "deleting expired Leases"
#: at most this many expired Leases are deleted per probe (the heartbeat waits meanwhile)
_COLLECT_BATCH = 20
#: what the streak of fences the Lease server refused or did not answer is about (one cause)
_TAKING_FENCES = "taking fences"


def _nothing() -> None:
    return None


@dataclass(eq=False)
class _Shard:
    """One provider cluster as this replica sees it."""

    name: str
    cluster: Cluster
    fence: str
    generation: int = 0
    gone: bool = False
    wake: threading.Event = field(default_factory=threading.Event)
    worker: threading.Thread | None = None
    running: bool = False
    unlink: Callable[[], None] = _nothing
    #: a clone of ``cluster`` whose API reader serves `Sharded.api_reader`; made on first use
    reader: Cluster | None = None


@dataclass(eq=False)
class _Run:
    """An engagement this replica runs under a held fence."""

    lifetime: Lifetime
    generation: int
    expired: bool = False


class Sharded:
    """Shards the provider's clusters across the replicas of a controller manager.

    Every replica runs the same provider and this coordinator (``start`` runs on
    every replica: sharding replaces leader election for controllers).

    - Replicas register as peers with Leases ``<lease_prefix><peer_id>`` in
      ``namespace`` of ``cluster`` (default: the manager's local cluster),
      renewed every ``renew_period``; a peer whose Lease was not renewed for
      ``lease_duration`` drops out (one first seen with a ``renewTime`` long past,
      by more than its lease duration plus the clock skew allowed, at once).
    - Each cluster belongs to the live peer that weighted rendezvous hashing
      picks (``weight`` is this replica's relative capacity). Membership is
      re-read every ``probe_interval``; joins and leaves move only the clusters
      of the peer that came or went.
    - A replica runs a cluster only while it holds the cluster's fence Lease
      ``<fence_prefix><cluster>``; it renews it every ``renew_period``. When it
      no longer owns the cluster (rebalance, provider removal, stop) it ends
      the engagement, waits up to ``drain_timeout`` for in-flight reconciles of
      that cluster, then releases the fence so the new owner starts at once.
      When it cannot renew within ``renew_deadline`` a watchdog ends the
      engagement at that deadline, even while the renewal is still blocked on a
      hung API server: before ``lease_duration`` can pass for anyone else. So at most one
      replica runs a cluster at any moment, even while peers disagree.
    - Leases left behind are deleted at each probe, each conditional on the
      resourceVersion seen: other peers' Leases unchanged for two lease durations
      (killed replicas), and free or expired fences of clusters not in this
      replica's fleet, unchanged for two lease durations.
    - The manager's ``/readyz`` gets a ``coordinator`` check (`ready_check`), and
      its metrics the gauges of the clusters run here and the live peers.

    Peer ids must be unique among replicas (the default is hostname + uuid).
    Durations are seconds; defaults: ``renew_period = lease_duration / 3``,
    ``renew_deadline = 2/3 lease_duration``, ``probe_interval = renew_period``.
    """

    def __init__(
        self,
        cluster: Cluster | None = None,
        *,
        namespace: str = "",
        peer_id: str | None = None,
        weight: float = 1.0,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_period: float | None = None,
        renew_deadline: float | None = None,
        probe_interval: float | None = None,
        lease_prefix: str = "mcr-peer-",
        fence_prefix: str = "mcr-shard-",
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        renew_period = lease_duration / 3 if renew_period is None else renew_period
        renew_deadline = lease_duration * 2 / 3 if renew_deadline is None else renew_deadline
        probe_interval = renew_period if probe_interval is None else probe_interval
        if not 0 < renew_period < renew_deadline < lease_duration:
            raise ValueError(
                "Sharded needs 0 < renew_period < renew_deadline < lease_duration, got "
                f"{renew_period}s < {renew_deadline}s < {lease_duration}s"
            )
        if probe_interval <= 0:
            raise ValueError(f"probe_interval must be positive, got {probe_interval}")
        for label, prefix in (("lease_prefix", lease_prefix), ("fence_prefix", fence_prefix)):
            if not _PREFIX.fullmatch(prefix):
                raise ValueError(f"{label} {prefix!r} must be lower-case letters, digits and '-'")
        self.peer = Peer(peer_id or default_identity(), weight)
        self.namespace = namespace or default_namespace()
        self.lease_duration = float(lease_duration)
        self.renew_period = float(renew_period)
        self.renew_deadline = float(renew_deadline)
        self.probe_interval = float(probe_interval)
        self.lease_prefix = lease_prefix
        self.fence_prefix = fence_prefix
        self.drain_timeout = float(drain_timeout)
        self.clock = clock
        self._cluster = cluster
        self._manager: Manager | None = None
        self._leases: LeaseClient | None = None
        self._registry: PeerRegistry | None = None
        self._fences = LeaseObserver(clock)
        self._lock = threading.Lock()
        self._shards: dict[str, _Shard] = {}
        #: teardowns of clusters whose fence expired or that were handed off (joined when the
        #: coordinator stops)
        self._expiring: list[threading.Thread] = []
        self._ready = threading.Event()
        self._halt = threading.Event()
        self._kick = threading.Event()
        #: failed reads of the peers and fences in a row
        self._streaks = FailureStreaks(log, f"coordinator peer={self.peer.id}")
        self._watchdog = Watchdog("coordinator", clock=clock)
        #: when (``clock``) the last heartbeat and the last read of the peers that worked were
        #: sent, and why the last ones failed: what `ready_check` judges
        self._beat_ok: float | None = None
        self._beat_error = ""
        self._probe_ok: float | None = None
        self._probe_error = ""

    def __repr__(self) -> str:
        return f"Sharded(peer={self.peer.id!r}, namespace={self.namespace!r})"

    # -- the coordinator contract ---------------------------------------------------------

    def bind(self, manager: Manager) -> Sharded:
        """Attach to ``manager``; the returned Aware (this object) is what the provider engages."""
        cluster = self._cluster if self._cluster is not None else manager.local
        if cluster is None:
            raise ConfigError(
                "the Sharded coordinator needs a cluster for its Leases: pass one to Sharded(...) "
                "or give the manager a local cluster"
            )
        self._manager = manager
        self._leases = LeaseClient(cluster, self.namespace)
        self._registry = PeerRegistry(
            self._leases,
            self.peer,
            prefix=self.lease_prefix,
            lease_duration=self.lease_duration,
            clock=self.clock,
        )
        manager.add_readyz_check("coordinator", self.ready_check)
        manager.metrics.register_coordinator(lambda: (len(self.owned()), len(self.peers())))
        return self

    def engage(self, cluster_name: str, cluster: Cluster, lifetime: threading.Event) -> None:
        """Take ``cluster`` into sharding until ``lifetime`` ends (the [`Aware`][mcruntime.multicluster.Aware] contract).

        Returns at once. The cluster is engaged with the manager only on the
        replica that owns it and only while that replica holds its fence.
        """
        if not cluster_name:
            raise ValueError("the empty cluster name is reserved for the local cluster")
        unlink: Callable[[], None] = _nothing
        reader: Cluster | None = None
        with self._lock:
            shard = self._shards.get(cluster_name)
            if shard is None:
                shard = _Shard(cluster_name, cluster, lease_name(self.fence_prefix, cluster_name))
                self._shards[cluster_name] = shard
            else:
                unlink, shard.unlink = shard.unlink, unlink
                reader, shard.reader = shard.reader, None  # the old cluster's
                shard.gone = False
                shard.cluster = cluster
                shard.generation += 1
            generation = shard.generation
        unlink()
        if reader is not None:
            reader.stop()
        link = on_end(
            lifetime, lambda: self._gone(shard, generation), name=f"coordinator/{cluster_name}"
        )
        with self._lock:
            if shard.generation == generation:
                shard.unlink, link = link, _nothing
        link()
        shard.wake.set()
        self._kick.set()

    def start(self, stop: threading.Event) -> None:
        """Heartbeat, probe membership and (re)assign clusters until ``stop``; then hand everything off."""
        registry = self._registry
        if registry is None:
            raise RuntimeError("Sharded.start() before bind(manager)")
        unlink = on_end(stop, self._stop_now, name="coordinator")
        log.info("coordinator peer=%s weight=%g: starting", self.peer.id, self.peer.weight)
        next_beat = next_probe = self.clock()
        try:
            while not self._halt.is_set():
                now = self.clock()
                if now >= next_beat:
                    if registry.heartbeat(self.renew_deadline):
                        self._beat_ok, self._beat_error = now, ""
                    else:
                        self._beat_error = registry.last_error
                    next_beat = now + self.renew_period
                if now >= next_probe:
                    self._probe()
                    next_probe = now + self.probe_interval
                self._recompute()
                self._kick.wait(max(0.0, min(next_beat, next_probe) - self.clock()))
                self._kick.clear()
        finally:
            unlink()
            self._halt.set()
            registry.leave(self.renew_deadline)
            self._stop_shards()
            self._watchdog.stop()
            self._join_expiring(self.drain_timeout)
            log.info("coordinator peer=%s: stopped", self.peer.id)

    def ready_check(self) -> None:
        """The ``coordinator`` check of the manager's ``/readyz``: raises while this replica
        cannot take part in sharding.

        Not ready while its own peer Lease has not been renewed within ``renew_deadline``
        (the others are about to count it dead, or never saw it) or the peer Leases could
        not be read for ``probe_interval + renew_deadline`` (it cannot tell which clusters are
        its own). Owning no cluster because live peers own them all is ready.
        """
        now = self.clock()
        server = display_name(self._lease_server())
        where = f"in namespace {self.namespace} of cluster={server}"
        problems = []
        if self._beat_ok is None or now - self._beat_ok > self.renew_deadline:
            since = "never renewed"
            if self._beat_ok is not None:
                since = f"not renewed for {now - self._beat_ok:.0f}s"
            name = self._registry.lease_name if self._registry is not None else "its peer Lease"
            why = f": {self._beat_error}" if self._beat_error else ""
            problems.append(f"peer Lease {name} {where} {since}{why}")
        if (
            self._probe_ok is None
            or now - self._probe_ok > self.probe_interval + self.renew_deadline
        ):
            since = "never read"
            if self._probe_ok is not None:
                since = f"not read for {now - self._probe_ok:.0f}s"
            why = f": {self._probe_error}" if self._probe_error else ""
            problems.append(f"peer Leases {where} {since}{why}")
        if problems:
            raise RuntimeError(f"coordinator peer={self.peer.id}: " + "; ".join(problems))

    # -- membership and assignment ----------------------------------------------------------

    def peers(self) -> list[Peer]:
        """The live peers as last seen (this replica included)."""
        return list(self._registry.live()) if self._registry is not None else [self.peer]

    def clusters(self) -> list[str]:
        """Every provider cluster this replica knows, whichever replica runs it."""
        with self._lock:
            return sorted(self._shards)

    def knows(self, cluster_name: str) -> bool:
        """Whether ``cluster_name`` is in the fleet now, whichever replica runs it.

        The manager's webhook server serves such a cluster on every replica: its
        API server calls whichever replica the webhook's Service picks.
        """
        with self._lock:
            shard = self._shards.get(cluster_name)
            return shard is not None and not shard.gone

    def api_reader(self, cluster_name: str) -> APIReader:
        """Reads of ``cluster_name`` straight from its API server, whichever replica runs it.

        What a webhook handler reads its cluster with on a replica that does not run
        it ([`Manager.get_api_reader`][mcruntime.manager.Manager.get_api_reader] asks
        here). The reader's connections are this coordinator's: they are closed, and
        calls in flight end with `ClusterLeft`, when the cluster leaves the fleet or
        the coordinator stops. Raises `ClusterNotFound` for a cluster not in the fleet.
        """
        with self._lock:
            shard = self._shards.get(cluster_name)
            if shard is None or shard.gone or self._halt.is_set():
                raise ClusterNotFound(f"cluster {cluster_name!r} is not in the fleet")
            if shard.reader is None:
                shard.reader = shard.cluster.clone()
            return shard.reader.api_reader

    def owned(self) -> list[str]:
        """Names of the clusters this replica runs now (fence held, engaged)."""
        with self._lock:
            return sorted(n for n, s in self._shards.items() if s.running)

    def owner_of(self, cluster_name: str) -> str | None:
        """The peer id that should run ``cluster_name`` by this replica's view of the peers."""
        return owner(cluster_name, self.peers())

    def _owns(self, name: str) -> bool:
        return self._ready.is_set() and owner(name, self.peers()) == self.peer.id

    def _probe(self) -> None:
        registry, leases = self._registry, self._leases
        assert registry is not None and leases is not None
        sent = self.clock()
        try:
            registry.refresh(self.renew_deadline)
            fences = leases.list(labels={LABEL_ROLE: "fence"}, timeout=self.renew_deadline)
        except MCRuntimeError as exc:
            self._probe_error = describe_error(exc)
            self._streaks.failed(
                leases.rest.cluster_name,
                _READING_PEERS,
                exc,
                retry=f"retrying every {self.probe_interval:g}s",
            )
            return
        self._probe_ok = sent
        self._streaks.recovered(leases.rest.cluster_name, _READING_PEERS)
        names = set()
        for lease in fences:
            name = str((lease.get("metadata") or {}).get("name") or "")
            if name.startswith(self.fence_prefix):
                names.add(name)
                self._fences.observe(lease)
        with self._lock:
            mine = {s.fence for s in self._shards.values()}
        garbage = [
            (name, self._fences.version(name) or "", self._fences)
            for name in sorted(names - mine)
            if self._unchanged_fence(name)
        ]
        names.update(mine)
        self._fences.retain(names)  # forgetting only delays a take-over; keep what shards need
        self._ready.set()
        self._collect([(n, v, registry.observer) for n, v in registry.garbage()] + garbage)

    def _unchanged_fence(self, name: str) -> bool:
        """Whether the fence ``name`` is garbage: free or expired, and seen unchanged for
        `GC_LEASE_DURATIONS` lease durations (its own and this coordinator's, the longer)."""
        record, since = self._fences.record(name), self._fences.since(name)
        if record is None or since is None or self._fences.valid(name):
            return False
        duration = max(record.lease_duration_seconds, self.lease_duration)
        return self.clock() - since >= GC_LEASE_DURATIONS * duration

    def _collect(self, garbage: list[tuple[str, str, LeaseObserver]]) -> None:
        """Delete the Leases in ``garbage`` (name, resourceVersion, who observes it): the peer
        Leases of replicas killed long ago, and the fences of clusters no longer in this
        replica's fleet, free or expired. Each delete is conditional on the resourceVersion seen, so a Lease
        renewed or taken meanwhile stays; a fence whose cluster came back is kept."""
        leases = self._leases
        assert leases is not None
        end = time.monotonic() + self.renew_period / 2
        deleted: list[str] = []
        for name, version, observer in garbage[:_COLLECT_BATCH]:
            if observer is self._fences:
                with self._lock:
                    if any(s.fence == name for s in self._shards.values()):
                        continue  # its cluster is back: its worker may be taking it now
            left = end - time.monotonic()
            if left <= 0:
                break  # the rest at the next probe: the heartbeat waits meanwhile
            if not version:
                continue
            try:
                leases.delete(
                    name, resource_version=version, timeout=min(left, self.renew_deadline)
                )
            except (Conflict, NotFound):
                continue  # renewed, taken or deleted since it was read: not ours to delete
            except MCRuntimeError as exc:
                self._streaks.failed(
                    leases.rest.cluster_name,
                    _COLLECTING,
                    f"{name}: {describe_error(exc)}",
                    retry="retrying at the next probe",
                )
                break
            deleted.append(name)
            observer.forget(name)
        if deleted:
            self._streaks.recovered(leases.rest.cluster_name, _COLLECTING)
            log.info(
                "coordinator peer=%s: deleted %d Lease%s expired and unchanged for %d lease "
                "durations (of replicas killed, of clusters that left the fleet): %s",
                self.peer.id,
                len(deleted),
                "" if len(deleted) == 1 else "s",
                GC_LEASE_DURATIONS,
                ", ".join(deleted),
            )

    def _recompute(self) -> None:
        if not self._ready.is_set():
            return
        with self._lock:
            for name, shard in list(self._shards.items()):
                if shard.gone and shard.worker is None:
                    del self._shards[name]
                elif self._owns(name) and not shard.gone and not self._halt.is_set():
                    if shard.worker is None:
                        shard.worker = start_thread(
                            self._work, thread_name("coordinator", name), shard
                        )
                elif shard.worker is not None:
                    shard.wake.set()

    def _gone(self, shard: _Shard, generation: int) -> None:
        with self._lock:
            if shard.generation != generation:
                return
            shard.gone = True
            reader, shard.reader = shard.reader, None
        if reader is not None:
            reader.stop()  # the cluster left: its reads in flight end now
        shard.wake.set()
        self._kick.set()

    def _stop_now(self) -> None:
        self._halt.set()
        self._kick.set()

    def _stop_shards(self) -> None:
        with self._lock:
            shards = list(self._shards.values())
            readers = [s.reader for s in shards if s.reader is not None]
            for shard in shards:
                shard.reader = None
        for reader in readers:
            reader.stop()
        for shard in shards:
            shard.wake.set()
        deadline = time.monotonic() + self.drain_timeout + self.renew_deadline
        for shard in shards:
            worker = shard.worker
            if worker is not None:
                worker.join(max(0.1, deadline - time.monotonic()))

    # -- one cluster: fence, engagement, hand-off ------------------------------------------------

    def _work(self, shard: _Shard) -> None:
        assert self._leases is not None
        fence = LeaseHolder(
            self._leases,
            shard.fence,
            self.peer.id,
            lease_duration=self.lease_duration,
            observer=self._fences,
            labels={LABEL_ROLE: "fence"},
            annotations={ANNOTATION_CLUSTER: shard.name},
        )
        run: _Run | None = None
        next_renew = 0.0
        try:
            while True:
                with self._lock:
                    gone, generation, cluster = shard.gone, shard.generation, shard.cluster
                if gone or self._halt.is_set() or not self._owns(shard.name):
                    break
                if not fence.held or run is None:  # (held, no run: taken too late to engage)
                    since = time.monotonic()
                    if not fence.try_acquire_or_renew(self.renew_deadline):
                        self._not_taken(shard.name, fence)
                        self._sleep(shard, self._retry_delay())
                        continue
                    self._streaks.recovered(self._lease_server(), _TAKING_FENCES)
                    self._fence_renewed(since)
                    if not self._fresh(shard.name, fence):
                        # still held (ours on the server): renewed at the next try, and
                        # released if the worker ends before the cluster is engaged
                        self._sleep(shard, self._retry_delay())
                        continue
                    run = self._engage(shard.name, cluster, generation)
                    self._guard(shard.name, run, fence)
                    next_renew = (fence.last_renew or self.clock()) + self.renew_period
                elif run is not None and run.generation != generation:
                    if not self._end(shard.name, run, fence):
                        run = None
                        continue
                    run = self._engage(shard.name, cluster, generation)
                    self._guard(shard.name, run, fence)
                self._sleep(shard, next_renew - self.clock())
                if self.clock() >= next_renew:
                    since, renewed = time.monotonic(), fence.last_renew
                    if not self._renew(fence) or (run is not None and run.expired):
                        self._lost(shard.name, run, fence)
                        run = None
                        continue
                    if fence.last_renew != renewed:  # (not a failure that left time to retry)
                        self._fence_renewed(since)
                    if run is not None:
                        self._guard(shard.name, run, fence)
                    next_renew = self._next_renew(fence)
        except Exception:
            log.exception(
                "coordinator cluster=%s: shard worker failed",
                shard.name,
                extra=log_fields(cluster=shard.name),
            )
        finally:
            self._watchdog.disarm(shard.name)
            if run is not None:
                self._end(shard.name, run, fence)
            if fence.held and fence.release(self.renew_deadline):
                log.info(
                    "coordinator peer=%s cluster=%s: fence released",
                    self.peer.id,
                    shard.name,
                    extra=log_fields(cluster=shard.name),
                )
            with self._lock:
                shard.worker = None
                if shard.gone and self._shards.get(shard.name) is shard:
                    del self._shards[shard.name]
            self._kick.set()

    def _not_taken(self, name: str, fence: LeaseHolder) -> None:
        """Say why ``name``'s fence was not taken: held by another replica (debug: a hand-off
        under way), or the Lease server's error (no namespace, no RBAC for Leases, not
        reachable). One cause for every fence, so one warning per failure streak, naming the
        first cluster; the first fence taken (or seen held) again ends it."""
        server = self._lease_server()
        if fence.last_error is None:
            log.debug(
                "coordinator peer=%s cluster=%s: fence not acquired (held by %r)",
                self.peer.id,
                name,
                fence.holder,
                extra=log_fields(cluster=name),
            )
            self._streaks.recovered(server, _TAKING_FENCES)
            return
        self._streaks.failed(
            server,
            _TAKING_FENCES,
            f"the fence {fence.name} of cluster={name} in namespace {self.namespace}: "
            f"{fence.last_error}",
            retry=f"cluster={name} and the others are not engaged; retrying every "
            f"{self.renew_period / 2:g}s",
        )

    def _fresh(self, name: str, fence: LeaseHolder) -> bool:
        """Whether the fence just taken leaves time to engage: a Lease server that answered
        late (one just thawed, a slow one) counts the hold from when the call was sent, so
        the watchdog would stop the cluster as soon as it started. Then renew it once first;
        a fence that cannot be had in time is said once per streak, not engaged."""
        what = f"taking its fence {fence.name}"
        for attempt in range(2):
            last = fence.last_renew if fence.last_renew is not None else self.clock()
            left = last + self.renew_deadline - self.clock()
            if left > self.renew_period / 2:
                self._streaks.recovered(name, what)
                return True
            if attempt or not fence.try_acquire_or_renew(self.renew_deadline):
                break
        self._streaks.failed(
            name,
            what,
            f"the Lease server answered too late to engage the cluster safely ({left:.2g}s "
            f"of the {self.renew_deadline:g}s renew deadline were left)",
            retry=f"retrying every {self.renew_period / 2:g}s",
        )
        return False

    def _engage(self, name: str, template: Cluster, generation: int) -> _Run:
        assert self._manager is not None
        run = _Run(Lifetime(), generation)
        self._set_running(name, True)
        log.info(
            "coordinator peer=%s cluster=%s: fence acquired, engaging",
            self.peer.id,
            name,
            extra=log_fields(cluster=name),
        )
        self._manager.engage(name, template.clone(), run.lifetime)
        return run

    def _end(self, name: str, run: _Run, fence: LeaseHolder) -> bool:
        """End ``run`` and wait for its in-flight reconciles while keeping the fence; False if lost.

        The teardown runs on a thread of its own, the fence renewed meanwhile: it waits for
        the cluster's reconciles in flight before the ``on_cluster_disengaged`` callbacks,
        removes webhook configurations and joins informers, which may take seconds."""
        log.info(
            "coordinator peer=%s cluster=%s: handing off",
            self.peer.id,
            name,
            extra=log_fields(cluster=name),
        )
        self._set_running(name, False)
        ending = start_thread(run.lifetime.set, thread_name("coordinator", name, "end"))
        with self._lock:  # (joined when the coordinator stops, if still running then)
            self._expiring = [t for t in self._expiring if t.is_alive()] + [ending]
        end = time.monotonic() + self.drain_timeout
        next_renew = self._next_renew(fence)
        while ending.is_alive() or self._in_flight(name):
            if time.monotonic() >= end:
                log.warning(
                    "coordinator cluster=%s: reconciles still running after %.1fs; releasing anyway",
                    name,
                    self.drain_timeout,
                    extra=log_fields(cluster=name),
                )
                break
            if self.clock() >= next_renew:
                if not self._renew(fence) or run.expired:
                    self._lost(name, None, fence)
                    return False
                self._guard(name, run, fence)
                next_renew = self._next_renew(fence)
            if ending.is_alive():
                ending.join(_DRAIN_POLL)
            else:
                time.sleep(_DRAIN_POLL)
        # the run is over: nothing is left for the watchdog to stop. A deadline armed by a
        # renewal during the drain would otherwise fire after a clean release, as a lost fence
        self._watchdog.disarm(name)
        return True

    def _guard(self, name: str, run: _Run, fence: LeaseHolder) -> None:
        """Arm the watchdog: ``run`` ends at the fence's renew deadline unless renewed first."""
        last = fence.last_renew if fence.last_renew is not None else self.clock()
        self._watchdog.arm(name, last + self.renew_deadline, lambda: self._expire(name, run))

    def _expire(self, name: str, run: _Run) -> None:
        """The watchdog's callback: the fence was not renewed in time; stop the cluster's work now."""
        run.expired = True
        self._fence_lost(name, f"not renewed within {self.renew_deadline:.1f}s", "the cluster")
        self._set_running(name, False)
        # on a thread of its own: the watchdog serves the deadlines of every fence, and the
        # teardown (reconciles stopped first, then webhook configurations removed, informers
        # joined) may wait seconds for a hung cluster, past the deadlines of the others
        expiring = start_thread(run.lifetime.set, thread_name("coordinator", name, "expire"))
        with self._lock:
            self._expiring = [t for t in self._expiring if t.is_alive()] + [expiring]

    def _join_expiring(self, timeout: float) -> None:
        """Wait (at most ``timeout`` in all) for the teardowns `_expire` started: they end
        with the coordinator, not after it."""
        with self._lock:
            expiring, self._expiring = self._expiring, []
        end = time.monotonic() + timeout
        for t in expiring:
            t.join(max(0.0, end - time.monotonic()))

    def _lost(self, name: str, run: _Run | None, fence: LeaseHolder) -> None:
        fence.held = False
        self._watchdog.disarm(name)
        if run is not None and run.expired:
            return  # the watchdog has stopped it already
        if fence.taken():  # another replica writes it: about this cluster, not the Lease server
            log.error(
                "coordinator peer=%s cluster=%s: fence lost (held by %r); stopping it",
                self.peer.id,
                name,
                fence.holder,
                extra=log_fields(cluster=name),
            )
        else:
            why = f"not renewed within {self.renew_deadline:.1f}s"
            self._fence_lost(name, f"{why}: {fence.last_error}" if fence.last_error else why, "it")
        self._set_running(name, False)
        if run is not None:
            run.lifetime.set()

    def _fence_lost(self, name: str, why: str, stopping: str) -> None:
        """Say that ``name``'s fence was not renewed in time (``why``) and ``stopping`` stops.

        A Lease server that hangs or is down loses every fence this replica holds, within a
        renew period: one cause, so one error per streak, naming the Lease server and the
        first cluster; each other cluster stopped for it is an info line, by its name, with
        the count so far. A renewal that works again ends the streak (`_fence_renewed`).
        """
        server = display_name(self._lease_server())
        n = self._streaks.fail((self._lease_server(), _RENEWING_FENCES))
        if n == 1:
            log.error(
                "cluster=%s coordinator peer=%s: %s failed: the fence of cluster=%s was %s; "
                "stopping %s; the other clusters whose fences are not renewed in time are "
                "stopped too, each said at info level, until a fence renews again",
                server,
                self.peer.id,
                _RENEWING_FENCES,
                name,
                why,
                stopping,
                extra=log_fields(cluster=self._lease_server()),
            )
        else:
            log.info(
                "coordinator peer=%s cluster=%s: fence lost (%s); stopping %s (%d fences lost "
                "since renewing them on cluster=%s failed)",
                self.peer.id,
                name,
                why,
                stopping,
                n,
                server,
                extra=log_fields(cluster=name),
            )

    def _fence_renewed(self, since: float) -> None:
        """A fence was written (taken or renewed) by a call begun at ``since``
        (``time.monotonic()``): a streak of fences lost is over."""
        lost = self._streaks.succeed((self._lease_server(), _RENEWING_FENCES), since)
        if lost:
            log.info(
                "cluster=%s coordinator peer=%s: %s works again after %d fence%s lost; "
                "their clusters are engaged again as their fences are taken back",
                display_name(self._lease_server()),
                self.peer.id,
                _RENEWING_FENCES,
                lost,
                "" if lost == 1 else "s",
                extra=log_fields(cluster=self._lease_server()),
            )

    def _lease_server(self) -> str:
        """The name of the cluster the fences live in."""
        return self._leases.rest.cluster_name if self._leases is not None else ""

    def _set_running(self, name: str, running: bool) -> None:
        with self._lock:
            shard = self._shards.get(name)
            if shard is not None:
                shard.running = running

    def _renew(self, fence: LeaseHolder) -> bool:
        """Renew the held fence; False once it is lost (taken, or the renew deadline passed)."""
        last = fence.last_renew if fence.last_renew is not None else self.clock()
        deadline = last + self.renew_deadline
        now = self.clock()
        if now >= deadline:
            return False
        if fence.try_acquire_or_renew(deadline - now):
            return True
        return not fence.taken() and self.clock() < deadline

    def _next_renew(self, fence: LeaseHolder) -> float:
        last = fence.last_renew if fence.last_renew is not None else self.clock()
        due = last + self.renew_period
        if due <= self.clock():
            # the last attempt failed: retry soon, but never later than the deadline
            due = min(self.clock() + self.renew_period / 4, last + self.renew_deadline)
        return due

    def _retry_delay(self) -> float:
        return self.renew_period / 2 * (1 + random.random() * 0.2)

    def _sleep(self, shard: _Shard, seconds: float) -> None:
        if seconds > 0:
            shard.wake.wait(seconds)
        shard.wake.clear()

    def _in_flight(self, name: str) -> bool:
        assert self._manager is not None
        return any(c.queue.in_flight_ages().get(name) for c in self._manager.controllers)
