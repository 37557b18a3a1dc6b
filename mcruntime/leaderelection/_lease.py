"""coordination.k8s.io/v1 Leases: the one place mcruntime reads, writes and times them.

Leader election, the sharded coordinator's peer registry and its per-cluster
fences all hold Leases the same way (client-go's ``tryAcquireOrRenew``):

- reads and writes go straight to the API (never a cache) with a timeout per
  request, and every write carries the resourceVersion it was based on, so two
  contenders can never both win;
- expiry is judged by the *local* clock: a Lease is expired when its record has
  not changed for ``leaseDurationSeconds`` since this process first saw the
  current record ([`LeaseObserver`][mcruntime.leaderelection.LeaseObserver]), which is immune to clock skew
  between machines;
- a holder counts its own deadline from when it *sent* its last successful
  write, so it always gives up before anyone else can observe the Lease expired.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mcruntime._local import display_name
from mcruntime.errors import AlreadyExists, APIError, Conflict, MCRuntimeError, NotFound

if TYPE_CHECKING:
    from mcruntime.client import RESTClient
    from mcruntime.cluster import Cluster

__all__ = [
    "LEASE_KIND",
    "LeaseClient",
    "LeaseHolder",
    "LeaseObserver",
    "LeaseRecord",
    "micro_time",
]

LEASE_KIND = "coordination.k8s.io/v1/Lease"
_API = "/apis/coordination.k8s.io/v1"
#: the shortest timeout given to one request, whatever budget is left
_MIN_TIMEOUT = 0.05


def micro_time(when: datetime | None = None) -> str:
    """An RFC 3339 MicroTime (``2024-05-01T12:00:00.123456Z``), as Lease times are written."""
    return (when or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(value: float) -> int:
    return max(1, math.ceil(value))


@dataclass(frozen=True)
class LeaseRecord:
    """The spec of a Lease: who holds it, for how long, since when, and how often it changed hands."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        """The record of a Lease object (a dict as the API returns it)."""
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        """This record as a Lease ``spec``."""
        out: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            out["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            out["renewTime"] = self.renew_time
        return out


def _rest_of(cluster: Any) -> RESTClient:
    rest = getattr(cluster, "rest", None)
    if rest is None:
        if hasattr(cluster, "request"):
            return cluster  # type: ignore[no-any-return]
        raise TypeError(f"expected a Cluster or a RESTClient, got {type(cluster).__name__}")
    return rest  # type: ignore[no-any-return]


class LeaseClient:
    """The Leases of one namespace of one cluster, read and written straight from the API.

    ``cluster`` is a [`Cluster`][mcruntime.cluster.Cluster] (its ``rest`` is used;
    its cache never is) or a [`RESTClient`][mcruntime.client.RESTClient]. Every call
    takes a ``timeout`` in seconds so a holder never waits past its deadline.
    Errors are the usual [`mcruntime.errors`][mcruntime.errors] values. Thread-safe.
    """

    def __init__(self, cluster: Cluster | RESTClient, namespace: str) -> None:
        if not namespace:
            raise ValueError("a LeaseClient needs a namespace")
        self.rest = _rest_of(cluster)
        self.namespace = namespace
        self._base = f"{_API}/namespaces/{quote(namespace, safe='')}/leases"

    def __repr__(self) -> str:
        return f"LeaseClient(cluster={display_name(self.rest.cluster_name)!r}, namespace={self.namespace!r})"

    def _path(self, name: str) -> str:
        return f"{self._base}/{quote(name, safe='')}"

    def get(self, name: str, *, timeout: float) -> dict[str, Any]:
        """The Lease ``name``; [`NotFound`][mcruntime.errors.NotFound] if there is none."""
        obj: dict[str, Any] = self.rest.request(
            "GET", self._path(name), timeout=max(timeout, _MIN_TIMEOUT), expect_object=True
        )
        return obj

    def list(
        self, *, labels: Mapping[str, str] | None = None, timeout: float
    ) -> list[dict[str, Any]]:
        """The Leases of the namespace matching ``labels`` (one page: leases are few)."""
        query = {"labelSelector": ",".join(f"{k}={v}" for k, v in (labels or {}).items()) or None}
        page = self.rest.request(
            "GET",
            self._base,
            query=query,
            timeout=max(timeout, _MIN_TIMEOUT),
            expect_object=True,
        )
        return list((page or {}).get("items") or [])

    def create(
        self,
        name: str,
        record: LeaseRecord,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        timeout: float,
    ) -> dict[str, Any]:
        """Create the Lease ``name``; [`AlreadyExists`][mcruntime.errors.AlreadyExists] if it exists."""
        meta: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if labels:
            meta["labels"] = dict(labels)
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": record.spec(),
        }
        obj: dict[str, Any] = self.rest.request(
            "POST", self._base, body=body, timeout=max(timeout, _MIN_TIMEOUT), expect_object=True
        )
        return obj

    def update(
        self,
        lease: Mapping[str, Any],
        record: LeaseRecord,
        *,
        annotations: Mapping[str, str] | None = None,
        timeout: float,
    ) -> dict[str, Any]:
        """Replace the spec of ``lease`` (as read) with ``record``.

        The write is conditional on ``lease``'s resourceVersion:
        [`Conflict`][mcruntime.errors.Conflict] when the Lease changed since.
        """
        meta = dict(lease.get("metadata") or {})
        if annotations:
            meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": record.spec(),
        }
        obj: dict[str, Any] = self.rest.request(
            "PUT",
            self._path(str(meta.get("name") or "")),
            body=body,
            timeout=max(timeout, _MIN_TIMEOUT),
            expect_object=True,
        )
        return obj

    def delete(self, name: str, *, resource_version: str | None = None, timeout: float) -> None:
        """Delete the Lease ``name`` (only if unchanged since ``resource_version``, when given)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if resource_version:
            body["preconditions"] = {"resourceVersion": resource_version}
        self.rest.request("DELETE", self._path(name), body=body, timeout=max(timeout, _MIN_TIMEOUT))


@dataclass
class _Seen:
    version: str
    record: LeaseRecord
    at: float


class LeaseObserver:
    """Remembers, per Lease name, the current record and when this process first saw it.

    ``clock`` is a monotonic clock (tests pass a fake one). A Lease is *valid*
    (held) while its holder is not empty and ``first_seen + leaseDurationSeconds``
    has not passed; a Lease never observed is not valid. Thread-safe.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, _Seen] = {}

    def observe(self, lease: Mapping[str, Any]) -> LeaseRecord:
        """Record ``lease`` (just read or written); its clock restarts only when it changed."""
        meta = lease.get("metadata") or {}
        name = str(meta.get("name") or "")
        version = str(meta.get("resourceVersion") or "")
        record = LeaseRecord.of(lease)
        with self._lock:
            seen = self._seen.get(name)
            if seen is None or seen.version != version or seen.record != record:
                self._seen[name] = _Seen(version, record, self.clock())
        return record

    def forget(self, name: str) -> None:
        """Drop what is known about ``name`` (it was deleted)."""
        with self._lock:
            self._seen.pop(name, None)

    def retain(self, names: set[str]) -> None:
        """Forget every Lease not in ``names`` (after a full list)."""
        with self._lock:
            for gone in [n for n in self._seen if n not in names]:
                del self._seen[gone]

    def record(self, name: str) -> LeaseRecord | None:
        """The last record seen for ``name``."""
        with self._lock:
            seen = self._seen.get(name)
        return seen.record if seen is not None else None

    def version(self, name: str) -> str | None:
        """The resourceVersion of the last record seen for ``name``."""
        with self._lock:
            seen = self._seen.get(name)
        return seen.version if seen is not None else None

    def since(self, name: str) -> float | None:
        """Clock time at which this process first saw ``name``'s current record."""
        with self._lock:
            seen = self._seen.get(name)
        return seen.at if seen is not None else None

    def valid_until(self, name: str) -> float | None:
        """Clock time at which ``name`` expires unless it changes; None if free or never seen."""
        with self._lock:
            seen = self._seen.get(name)
        if seen is None or not seen.record.holder:
            return None
        return seen.at + seen.record.lease_duration_seconds

    def valid(self, name: str, now: float | None = None) -> bool:
        """True while ``name`` is held by someone and has not expired by the local clock."""
        until = self.valid_until(name)
        if until is None:
            return False
        return until > (self.clock() if now is None else now)


class LeaseHolder:
    """Acquires, renews and releases one Lease for one identity (client-go's rules).

    One attempt at a time, no threads: the caller (an elector loop, a shard
    worker) decides when to try and when to give up. [`try_acquire_or_renew()`][mcruntime.leaderelection.LeaseHolder.try_acquire_or_renew]
    takes a free or expired Lease, or renews one it holds; [`release()`][mcruntime.leaderelection.LeaseHolder.release] hands
    it over at once. ``last_renew`` is the ``clock`` time at which the last
    successful write was *sent*: the holder must stop working before
    ``last_renew + renew_deadline`` and ``renew_deadline`` must be shorter than
    ``lease_duration``, which is when others may take over. Not thread-safe.
    """

    def __init__(
        self,
        leases: LeaseClient,
        name: str,
        identity: str,
        *,
        lease_duration: float,
        observer: LeaseObserver | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not name:
            raise ValueError("a Lease needs a name")
        if not identity:
            raise ValueError("a Lease holder needs an identity")
        if lease_duration <= 0:
            raise ValueError(f"lease_duration must be positive, got {lease_duration}")
        self.leases = leases
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.observer = observer or LeaseObserver(clock or time.monotonic)
        self.clock = clock or self.observer.clock
        self.labels = dict(labels or {})
        self.annotations = dict(annotations or {})
        self.held = False
        self.last_renew: float | None = None
        self.last_error: str | None = None
        self._lease: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"LeaseHolder({self.leases.namespace}/{self.name}, identity={self.identity!r}, held={self.held})"

    @property
    def lease(self) -> dict[str, Any] | None:
        """The Lease object as last read or written by this holder."""
        return self._lease

    @property
    def holder(self) -> str:
        """The holder of the Lease as last seen ("" when free or unknown)."""
        record = self.observer.record(self.name)
        return record.holder if record is not None else ""

    def taken(self) -> bool:
        """True when the Lease was last seen held, validly, by another identity."""
        holder = self.holder
        return bool(holder) and holder != self.identity and self.observer.valid(self.name)

    def try_acquire_or_renew(self, timeout: float) -> bool:
        """One attempt to take or renew the Lease within ``timeout`` seconds; True if we hold it now.

        ``last_error`` tells afterwards why this attempt failed against the API server
        (``None`` when it did not: it succeeded, or the Lease is someone else's).
        """
        self.last_error = None
        end = time.monotonic() + timeout
        sent = self.clock()
        if self.held and self._lease is not None:
            # the holder renews from what it wrote last; a conflict means someone else wrote
            try:
                self._wrote(self._update(self._lease, self._next_record(self._lease), end), sent)
                return True
            except (Conflict, NotFound):
                pass  # someone else wrote or deleted it: read it and decide again
            except MCRuntimeError as exc:
                return self._failed(exc)
        sent = self.clock()
        try:
            lease = self.leases.get(self.name, timeout=end - time.monotonic())
        except NotFound:
            record = LeaseRecord(
                holder=self.identity,
                lease_duration_seconds=_seconds(self.lease_duration),
                acquire_time=micro_time(),
                renew_time=micro_time(),
            )
            try:
                created = self.leases.create(
                    self.name,
                    record,
                    labels=self.labels,
                    annotations=self.annotations,
                    timeout=end - time.monotonic(),
                )
            except AlreadyExists:
                # someone created it first: learn who, so a holder can tell it was taken
                self.held = False
                with contextlib.suppress(MCRuntimeError):
                    self.observer.observe(
                        self.leases.get(self.name, timeout=end - time.monotonic())
                    )
                return False
            except MCRuntimeError as exc:
                return self._failed(exc)
            self._wrote(created, sent)
            return True
        except MCRuntimeError as exc:
            return self._failed(exc)
        current = self.observer.observe(lease)
        if current.holder and current.holder != self.identity and self.observer.valid(self.name):
            self.held = False
            self._lease = lease
            return False
        try:
            self._wrote(self._update(lease, self._next_record(lease), end), sent)
        except (Conflict, NotFound):  # written or deleted (an expired Lease collected) since read
            self.held = False
            return False
        except MCRuntimeError as exc:
            return self._failed(exc)
        return True

    def release(self, timeout: float) -> bool:
        """Give the Lease up so the next holder starts at once; True if it was ours and is now free.

        Writes an empty holder with ``leaseDurationSeconds: 1`` (like client-go),
        conditional on the Lease being unchanged since our last write.
        """
        if not self.held or self._lease is None:
            self.held = False
            return False
        self.held = False
        self.last_error = None  # from here on: why this release failed
        end = time.monotonic() + timeout
        lease = self._lease
        for _ in range(2):
            old = LeaseRecord.of(lease)
            if old.holder != self.identity:
                return False
            now = micro_time()
            record = LeaseRecord(
                holder="",
                lease_duration_seconds=1,
                acquire_time=now,
                renew_time=now,
                transitions=old.transitions,
            )
            try:
                self._lease = self.leases.update(lease, record, timeout=end - time.monotonic())
                self.observer.observe(self._lease)
                return True
            except Conflict:
                try:
                    lease = self.leases.get(self.name, timeout=end - time.monotonic())
                except MCRuntimeError as exc:
                    self.last_error = str(exc)
                    return False
                self.observer.observe(lease)
            except MCRuntimeError as exc:
                self.last_error = str(exc)
                return False
        return False

    def _next_record(self, lease: Mapping[str, Any]) -> LeaseRecord:
        old = LeaseRecord.of(lease)
        now = micro_time()
        mine = old.holder == self.identity
        return LeaseRecord(
            holder=self.identity,
            lease_duration_seconds=_seconds(self.lease_duration),
            acquire_time=old.acquire_time if mine and old.acquire_time else now,
            renew_time=now,
            transitions=old.transitions if mine else old.transitions + 1,
        )

    def _update(self, lease: Mapping[str, Any], record: LeaseRecord, end: float) -> dict[str, Any]:
        return self.leases.update(
            lease, record, annotations=self.annotations, timeout=end - time.monotonic()
        )

    def _wrote(self, lease: dict[str, Any], sent: float) -> None:
        self._lease = lease
        self.observer.observe(lease)
        self.held = True
        self.last_renew = sent
        self.last_error = None

    def _failed(self, exc: MCRuntimeError) -> bool:
        self.last_error = (
            f"{type(exc).__name__}: {exc.message or exc.reason}"
            if isinstance(exc, APIError)
            else str(exc)
        )
        return False
