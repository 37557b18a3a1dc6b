"""The cross-cluster garbage collector: a manager runnable acting on owner records.

Design (docs/concepts/ownership.md has the user's view):

- State lives only in the objects: the owner record on each dependent (labels
  and an annotation), the owner's finalizer (its deletion policy) and, while
  the owner is being deleted, the annotation `mcruntime.io/dependents-cleared`
  on the owner listing the clusters that reported their dependents gone (or
  released, for orphan). Nothing is kept elsewhere, so a restart or another
  replica takes over where the last one stopped.
- One worker thread per cluster this replica can reach (the local cluster and
  every engaged one), named ``mcruntime/gc/<cluster>``: it lists the labelled
  dependents of its cluster, looks their owners up and deletes (or releases)
  them, then reports the pending owners it has nothing left of. A worker stops
  when its cluster is disengaged, so with sharding each cluster's dependents
  are collected by the replica that runs that cluster.
- The collector's own thread (the manager's runnable) lists the owners being
  deleted that carry a collector finalizer and removes the finalizer once
  every cluster of the fleet has reported.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._ownership import (
    ANNOTATION_CLEARED,
    ANNOTATION_OWNER,
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    LABEL_OWNER_CLUSTER,
    LABEL_OWNER_UID,
    OwnerRecord,
    owner_record,
)
from mcruntime._streak import FailureStreaks
from mcruntime._threads import start_thread, thread_name
from mcruntime.client import deadline, kind_of
from mcruntime.errors import (
    ClusterLeft,
    ClusterNotFound,
    Conflict,
    FleetNotKnown,
    NoKindMatch,
    NotFound,
)

if TYPE_CHECKING:
    from mcruntime.client import KindLike
    from mcruntime.cluster import Cluster
    from mcruntime.manager import Manager

__all__ = ["CrossClusterGarbageCollector", "DEFAULT_GRACE_PERIOD", "DEFAULT_INTERVAL"]

log = logging.getLogger("mcruntime.gc")

#: seconds between two passes over a cluster
DEFAULT_INTERVAL = 10.0
#: a dependent whose owner does not exist is collected once it is this old (seconds)
DEFAULT_GRACE_PERIOD = 30.0
#: deadline of each API call the collector makes (all attempts)
DEFAULT_CALL_TIMEOUT = 10.0

OwnerClusterGone = Literal["keep", "delete"]


@dataclass(frozen=True)
class _OwnerKey:
    cluster: str
    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass
class _Pending:
    """An owner being deleted with a collector finalizer."""

    cluster: str
    obj: dict[str, Any]

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])

    @property
    def orphan(self) -> bool:
        return FINALIZER_ORPHAN in (self.obj["metadata"].get("finalizers") or ())

    def cleared(self) -> set[str]:
        return _cleared(self.obj)


def _cleared(obj: dict[str, Any]) -> set[str]:
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_CLEARED)
    try:
        value = orjson.loads(raw) if raw else []
    except orjson.JSONDecodeError:
        return set()
    return {str(v) for v in value} if isinstance(value, list) else set()


def _dependent_key(cluster: str, dep: dict[str, Any]) -> tuple[str, str]:
    m = dep.get("metadata") or {}
    return (cluster, str(m.get("uid") or f"{m.get('namespace') or ''}/{m.get('name')}"))


@dataclass(eq=False)
class _Worker:
    cluster: str
    stop: threading.Event = field(default_factory=threading.Event)
    wake: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    #: the departed clusters the owners of its dependents were in, at its last complete pass
    gone: set[str] = field(default_factory=set)


class CrossClusterGarbageCollector:
    """Deletes (or releases) dependents whose cross-cluster owner is deleted or gone.

    Add it to a manager (``mgr.add(CrossClusterGarbageCollector(mgr, ...))``);
    it works on the local cluster and every engaged cluster of that manager.

    - ``owner_kinds``: kinds whose objects own dependents (their collector
      finalizers are handled); ``dependent_kinds``: kinds that carry owner
      records (listed in every cluster by the label `mcruntime.io/owner-uid`).
    - ``interval``: seconds between passes over a cluster.
    - ``grace_period``: a dependent whose owner does not exist (NotFound, or
      another object of the same name with a new uid) is collected once this
      replica has seen it so for this many seconds (on its monotonic clock, as
      ``owner_cluster_gone_grace``: not by the member cluster's
      creationTimestamp, which another machine's clock wrote; a restart starts it
      again).
    - ``owner_cluster_gone``: what happens to dependents whose owner's cluster
      this replica no longer knows (it left the fleet): ``"keep"`` (default)
      or ``"delete"`` once ``owner_cluster_gone_grace`` seconds have passed
      since this replica first saw it gone.
    - ``fleet``: the clusters whose reports an owner's finalizer waits for
      (default: the local cluster and every provider cluster the manager knows,
      engaged or not: `Manager.fleet_clusters`, which with a coordinator that has
      ``clusters()`` counts every cluster it knows, engaged here or not).
    - ``call_timeout``: deadline of every API call.
    """

    def __init__(
        self,
        manager: Manager,
        *,
        owner_kinds: Sequence[KindLike],
        dependent_kinds: Sequence[KindLike],
        interval: float = DEFAULT_INTERVAL,
        grace_period: float = DEFAULT_GRACE_PERIOD,
        owner_cluster_gone: OwnerClusterGone = "keep",
        owner_cluster_gone_grace: float = 300.0,
        fleet: Callable[[], Iterable[str]] | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        if owner_cluster_gone not in ("keep", "delete"):
            raise ValueError(
                f"owner_cluster_gone must be 'keep' or 'delete', not {owner_cluster_gone!r}"
            )
        if not dependent_kinds:
            raise ValueError("dependent_kinds must name at least one kind")
        self.manager = manager
        self.owner_kinds = [kind_of(k) for k in owner_kinds]
        self.dependent_kinds = [kind_of(k) for k in dependent_kinds]
        self.interval = interval
        self.grace_period = grace_period
        self.owner_cluster_gone = owner_cluster_gone
        self.owner_cluster_gone_grace = owner_cluster_gone_grace
        self.call_timeout = call_timeout
        self._fleet = fleet
        self._lock = threading.Lock()
        self._workers: dict[str, _Worker] = {}
        self._pending: list[_Pending] = []
        self._gone_since: dict[str, float] = {}
        #: (cluster, dependent uid) -> when this replica first saw its owner not exist
        #: (`time.monotonic`): the start of its ``grace_period``
        self._absent_since: dict[tuple[str, str], float] = {}
        #: failures of API calls, logged once per streak (per cluster and call)
        self._streaks = FailureStreaks(log, "garbage collection")
        self._wake = threading.Event()
        #: completed passes per cluster (tests and probes wait on it)
        self.passes: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"CrossClusterGarbageCollector(owners={[str(k) for k in self.owner_kinds]})"

    def _failed(self, cluster: str, what: str, exc: Exception) -> None:
        if isinstance(exc, ClusterLeft):
            # no failure: the cluster left (or the manager stops), which cut its calls; its
            # worker stops, and a pass that reads in it again finds it gone
            log.debug(
                "cluster=%s garbage collection: %s cut: %s",
                display_name(cluster),
                what,
                exc,
                extra=log_fields(cluster=cluster),
            )
            return
        self._streaks.failed(
            cluster, what, exc, retry=f"retrying at the next pass (every {self.interval:g}s)"
        )

    def _ok(self, cluster: str, what: str, since: float | None = None) -> None:
        """``what`` worked on ``cluster`` (a call begun at ``since``: the owners' pass and a
        cluster's worker list the same kind on the same cluster from two threads)."""
        self._streaks.recovered(cluster, what, since=since)

    # -- the runnable ------------------------------------------------------------

    def start(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set; then stop and join every worker."""
        try:
            while not stop.is_set():
                self._sync_workers()
                self._finalize_owners()
                self._wake.wait(self.interval)
                self._wake.clear()
        finally:
            with self._lock:
                workers = list(self._workers.values())
                self._workers.clear()
            for w in workers:
                w.stop.set()
                w.wake.set()
            for w in workers:
                if w.thread is not None:
                    w.thread.join(self.call_timeout + 1)

    def trigger(self) -> None:
        """Start a pass now, on every cluster (e.g. from a reconciler that saw an owner being deleted)."""
        self._wake.set()
        with self._lock:
            workers = list(self._workers.values())
        for w in workers:
            w.wake.set()

    def _reachable(self) -> list[str]:
        names = [""] if self.manager.local is not None else []
        return names + self.manager.engaged_clusters()

    def fleet(self) -> set[str]:
        """The clusters an owner's finalizer waits for (see ``fleet`` in the constructor).

        By default the local cluster and every provider cluster of the manager, engaged or
        not ([`Manager.fleet_clusters`][mcruntime.manager.Manager.fleet_clusters]): a member
        down since the start has not reported, so an owner waits for it. Raises
        [`FleetNotKnown`][mcruntime.errors.FleetNotKnown] as that does (before the
        provider reported its initial clusters): no owner is released meanwhile.
        """
        if self._fleet is not None:
            return set(self._fleet())
        names = {""} if self.manager.local is not None else set()
        names.update(self.manager.fleet_clusters())
        return names

    def _sync_workers(self) -> None:
        want = set(self._reachable())
        with self._lock:
            stale = [w for n, w in self._workers.items() if n not in want]
            for w in stale:
                del self._workers[w.cluster]
            for name in want - self._workers.keys():
                w = _Worker(name)
                self._workers[name] = w
                w.thread = start_thread(self._run_worker, thread_name("gc", name), w)
        for w in stale:
            w.stop.set()
            w.wake.set()
            log.debug(
                "cluster=%s garbage collection stops: disengaged",
                display_name(w.cluster),
                extra=log_fields(cluster=w.cluster),
            )
        for w in stale:
            if w.thread is not None and w.thread is not threading.current_thread():
                w.thread.join(self.call_timeout + 1)

    # -- owners being deleted (the collector's thread) ----------------------------

    def _cluster(self, name: str) -> Cluster | None:
        try:
            return self.manager.get_cluster(name)
        except ClusterNotFound:
            return None

    def _finalize_owners(self) -> None:
        pending: list[_Pending] = []
        try:
            fleet: set[str] | None = self.fleet()
        except FleetNotKnown as exc:
            fleet = None  # a member not reported yet would be left out: release no owner now
            log.debug("garbage collection: no owner released this pass: %s", exc)
        for name in self._reachable():
            cluster = self._cluster(name)
            if cluster is None:
                continue
            for kind in self.owner_kinds:
                began = time.monotonic()
                try:
                    with deadline(self.call_timeout):
                        owners = cluster.api_reader.list(kind, None)
                except NoKindMatch:
                    continue  # not served here: no owners of that kind
                except Exception as exc:
                    self._failed(name, f"listing {kind.kind}", exc)
                    continue
                self._ok(name, f"listing {kind.kind}", began)
                for obj in owners:
                    m = obj.get("metadata") or {}
                    fins = m.get("finalizers") or ()
                    if not m.get("deletionTimestamp") or not (
                        FINALIZER_FOREGROUND in fins or FINALIZER_ORPHAN in fins
                    ):
                        continue
                    obj.setdefault("apiVersion", kind.api_version)
                    obj.setdefault("kind", kind.kind)
                    p = _Pending(name, obj)
                    if fleet is not None and fleet <= p.cleared():
                        self._release_owner(cluster, p)
                    else:
                        pending.append(p)
        with self._lock:
            new = {p.uid for p in pending} - {p.uid for p in self._pending}
            self._pending = pending
            workers = list(self._workers.values()) if new else []
        for w in workers:  # owners newly being deleted: every cluster looks now
            w.wake.set()

    def _release_owner(self, cluster: Cluster, p: _Pending) -> None:
        m = p.obj["metadata"]
        fins = [
            f
            for f in m.get("finalizers") or ()
            if f not in (FINALIZER_FOREGROUND, FINALIZER_ORPHAN)
        ]
        patch = {"metadata": {"finalizers": fins, "resourceVersion": m.get("resourceVersion")}}
        try:
            cluster.client.patch(
                f"{p.obj['apiVersion']}/{p.obj['kind']}",
                m["name"],
                patch,
                m.get("namespace"),
                timeout=self.call_timeout,
            )
            log.info(
                "cluster=%s %s %s: every cluster cleared its dependents; finalizer removed",
                display_name(p.cluster),
                p.obj["kind"],
                m["name"],
                extra=log_fields(cluster=p.cluster),
            )
        except (NotFound, Conflict):
            pass  # gone already, or changed: the next pass looks again
        except Exception as exc:
            self._failed(p.cluster, "removing an owner's finalizer", exc)
            return
        self._ok(p.cluster, "removing an owner's finalizer")

    # -- dependents (one worker per cluster) -------------------------------------

    def _run_worker(self, w: _Worker) -> None:
        while not w.stop.is_set():
            try:
                self._collect(w)
            except Exception:
                log.exception(
                    "cluster=%s garbage collection pass failed",
                    display_name(w.cluster),
                    extra=log_fields(cluster=w.cluster),
                )
            with self._lock:
                self.passes[w.cluster] = self.passes.get(w.cluster, 0) + 1
            w.wake.wait(self.interval)
            w.wake.clear()
        with self._lock:
            self.passes.pop(w.cluster, None)
            self._forget_absent(w.cluster, set())

    def _forget_absent(self, cluster: str, listed: set[tuple[str, str]]) -> None:
        """Drop the grace periods of ``cluster``'s dependents not in ``listed`` (gone)."""
        for key in [k for k in self._absent_since if k[0] == cluster and k not in listed]:
            del self._absent_since[key]

    def _forget_gone(self) -> None:
        """Drop when each departed cluster no dependent's owner is in any more was first
        seen gone (lock held): clusters come and go, each name once."""
        referenced = set().union(*(w.gone for w in self._workers.values()))
        for cluster in [c for c in self._gone_since if c not in referenced]:
            del self._gone_since[cluster]

    def _collect(self, w: _Worker) -> None:
        name = w.cluster
        cluster = self._cluster(name)
        if cluster is None:
            return
        with self._lock:
            pending = list(self._pending)
        remaining: set[str] = set()  # owner uids with a dependent left here
        owners: dict[_OwnerKey, tuple[str, dict[str, Any] | None]] = {}
        complete = True
        listed: set[tuple[str, str]] = set()
        for kind in self.dependent_kinds:
            if w.stop.is_set():
                return
            began = time.monotonic()
            try:
                with deadline(self.call_timeout):
                    deps = cluster.api_reader.list(kind, None, labels=LABEL_OWNER_UID)
            except NoKindMatch:
                continue  # the cluster does not serve the kind: it has none of them
            except Exception as exc:
                self._failed(name, f"listing {kind.kind}", exc)
                complete = False
                continue
            self._ok(name, f"listing {kind.kind}", began)
            for dep in deps:
                if w.stop.is_set():
                    return
                listed.add(_dependent_key(name, dep))
                rec = owner_record(dep)
                if rec is None:
                    continue
                if not self._handle(name, cluster, kind, dep, rec, owners):
                    remaining.add(rec.uid)
        if complete:
            with self._lock:
                self._forget_absent(name, listed)
                w.gone = {
                    key.cluster for key, (state, _) in owners.items() if state == "cluster-gone"
                }
                self._forget_gone()
            self._report(name, pending, remaining)

    def _owner(
        self, rec: OwnerRecord, owners: dict[_OwnerKey, tuple[str, dict[str, Any] | None]]
    ) -> tuple[str, dict[str, Any] | None]:
        """``(state, owner)``: state is present, absent, cluster-gone or unknown (cached per pass)."""
        key = _OwnerKey(rec.cluster, rec.api_version, rec.kind, rec.namespace, rec.name)
        if key in owners:
            return owners[key]
        cluster = self._cluster(rec.cluster)
        result: tuple[str, dict[str, Any] | None]
        if cluster is None:
            # engaged here but not synced, or run by another replica: not gone
            try:
                known = set(self.manager.cluster_states()) | self.fleet() if rec.cluster else set()
            except FleetNotKnown:  # not reported yet: its cluster may still come
                known = {rec.cluster}
            result = ("unknown" if rec.cluster in known else "cluster-gone", None)
        else:
            # one streak per cluster and kind, not per owner: a cluster down is one warning,
            # however many owners it holds (the error names the object)
            what = f"reading owner {rec.kind}s"
            began = time.monotonic()
            try:
                with deadline(self.call_timeout):
                    obj = cluster.api_reader.get(
                        f"{rec.api_version}/{rec.kind}", rec.name, rec.namespace or None
                    )
                result = ("present", obj)
            except NotFound:
                result = ("absent", None)
                self._ok(rec.cluster, what, began)
            except Exception as exc:
                self._failed(rec.cluster, what, exc)
                result = ("unknown", None)
            else:
                self._ok(rec.cluster, what, began)
        owners[key] = result
        return result

    def _handle(
        self,
        name: str,
        cluster: Cluster,
        kind: Any,
        dep: dict[str, Any],
        rec: OwnerRecord,
        owners: dict[_OwnerKey, tuple[str, dict[str, Any] | None]],
    ) -> bool:
        """Act on one dependent; True when it no longer counts for its owner (deleted or released)."""
        state, owner = self._owner(rec, owners)
        key = _dependent_key(name, dep)
        if state == "present" and owner is not None:
            om = owner.get("metadata") or {}
            if om.get("uid") != rec.uid:
                state = "absent"  # re-created under the same name: a new owner
            elif om.get("deletionTimestamp"):
                if FINALIZER_ORPHAN in (om.get("finalizers") or ()):
                    return self._release(name, cluster, kind, dep)
                return self._delete(name, cluster, kind, dep, "its owner is being deleted")
            else:
                with self._lock:
                    self._gone_since.pop(rec.cluster, None)
                    self._absent_since.pop(key, None)  # (its owner is back: a grace anew)
                return False
        if state == "absent":
            # first seen by this process, on the monotonic clock: not the dependent's
            # creationTimestamp, which the member cluster's clock wrote (a clock ahead of it
            # would skip the grace, one behind would add its skew)
            with self._lock:
                since = self._absent_since.setdefault(key, time.monotonic())
            if time.monotonic() - since < self.grace_period:
                return False
            return self._delete(name, cluster, kind, dep, f"owner uid {rec.uid} does not exist")
        if state == "cluster-gone":
            with self._lock:
                since = self._gone_since.setdefault(rec.cluster, time.monotonic())
            if self.owner_cluster_gone == "delete" and (
                time.monotonic() - since >= self.owner_cluster_gone_grace
            ):
                return self._delete(
                    name, cluster, kind, dep, f"owner's cluster {rec.cluster!r} left the fleet"
                )
        return False  # unknown: kept, looked at again next pass

    def _delete(
        self, name: str, cluster: Cluster, kind: Any, dep: dict[str, Any], why: str
    ) -> bool:
        m = dep["metadata"]
        if m.get("deletionTimestamp"):
            return False  # on its way (its own finalizers): counts until it is gone
        try:
            cluster.client.delete(
                kind,
                m["name"],
                m.get("namespace"),
                propagation="Background",
                preconditions={"uid": m["uid"]},
                timeout=self.call_timeout,
            )
            log.info(
                "cluster=%s %s %s/%s deleted: %s",
                display_name(name),
                kind.kind,
                m.get("namespace") or "",
                m["name"],
                why,
                extra=log_fields(cluster=name),
            )
        except NotFound:
            gone = True
        except Conflict:
            gone = False  # replaced meanwhile: the next pass looks at the new one
        except Exception as exc:
            self._failed(name, f"deleting {kind.kind}", exc)
            return False
        else:
            gone = False  # deleted; it counts until a list no longer shows it
        self._ok(name, f"deleting {kind.kind}")
        return gone

    def _release(self, name: str, cluster: Cluster, kind: Any, dep: dict[str, Any]) -> bool:
        m = dep["metadata"]
        patch = {
            "metadata": {
                "labels": {LABEL_OWNER_UID: None, LABEL_OWNER_CLUSTER: None},
                "annotations": {ANNOTATION_OWNER: None},
            }
        }
        try:
            cluster.client.patch(
                kind, m["name"], patch, m.get("namespace"), timeout=self.call_timeout
            )
            log.info(
                "cluster=%s %s %s/%s orphaned: its owner is deleted with propagation Orphan",
                display_name(name),
                kind.kind,
                m.get("namespace") or "",
                m["name"],
                extra=log_fields(cluster=name),
            )
        except NotFound:
            pass
        except Exception as exc:
            self._failed(name, f"releasing {kind.kind}", exc)
            return False
        self._ok(name, f"releasing {kind.kind}")
        return True

    def _report(self, name: str, pending: list[_Pending], remaining: set[str]) -> None:
        for p in pending:
            if p.uid in remaining or name in p.cleared():
                continue
            owner_cluster = self._cluster(p.cluster)
            if owner_cluster is None:
                continue
            self._add_cleared(name, owner_cluster, p)

    def _add_cleared(self, name: str, owner_cluster: Cluster, p: _Pending) -> None:
        m = p.obj["metadata"]
        kind = f"{p.obj['apiVersion']}/{p.obj['kind']}"
        for _ in range(3):  # conflicts with other clusters' reports: re-read and merge
            try:
                with deadline(self.call_timeout):
                    cur = owner_cluster.api_reader.get(kind, m["name"], m.get("namespace"))
                    cm = cur["metadata"]
                    if cm.get("uid") != p.uid:
                        return
                    cleared = _cleared(cur)
                    if name in cleared:
                        return
                    value = orjson.dumps(sorted(cleared | {name})).decode()
                    owner_cluster.client.patch(
                        kind,
                        m["name"],
                        {
                            "metadata": {
                                "annotations": {ANNOTATION_CLEARED: value},
                                "resourceVersion": cm.get("resourceVersion"),
                            }
                        },
                        m.get("namespace"),
                    )
                log.info(
                    "cluster=%s reported the dependents of %s %s (cluster %s) cleared",
                    display_name(name),
                    p.obj["kind"],
                    m["name"],
                    display_name(p.cluster),
                    extra=log_fields(cluster=name),
                )
                self._ok(name, "reporting to an owner")
                self._wake.set()  # the collector's thread may release the owner now
                return
            except Conflict:
                continue
            except NotFound:
                return
            except Exception as exc:
                self._failed(name, "reporting to an owner", exc)
                return
