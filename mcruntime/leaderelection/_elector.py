"""``LeaderElector``: client-go leader election on a coordination.k8s.io/v1 Lease."""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._streak import FailureStreaks
from mcruntime.errors import MCRuntimeError
from mcruntime.leaderelection._lease import LeaseClient, LeaseHolder, LeaseObserver
from mcruntime.leaderelection._watchdog import Watchdog

if TYPE_CHECKING:
    from mcruntime.client import RESTClient
    from mcruntime.cluster import Cluster

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "JITTER_FACTOR",
    "LeaderElectionLost",
    "LeaderElector",
    "default_identity",
    "default_namespace",
]

log = logging.getLogger("mcruntime.leaderelection")

DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
#: acquisition retries wait retry_period * (1 + up to JITTER_FACTOR), as in client-go
JITTER_FACTOR = 1.2
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: what the elector's failure streak is about
_ATTEMPT = "taking or renewing the Lease"


class LeaderElectionLost(MCRuntimeError):
    """Leadership was lost (the Lease could not be renewed in time); the work it guarded stopped."""


def default_identity() -> str:
    """``<hostname>_<uuid>``: unique per process, readable in ``kubectl get lease``."""
    return f"{socket.gethostname() or 'unknown'}_{uuid.uuid4()}"


def default_namespace(path: str = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """The pod's namespace (from its service account) when in a cluster, else ``"default"``."""
    try:
        with open(path, encoding="utf-8") as fh:
            namespace = fh.read().strip()
    except OSError:
        return "default"
    return namespace or "default"


def _noop() -> None:
    return None


class LeaderElector:
    """Elects one leader among the processes sharing the Lease ``namespace/name`` on ``cluster``.

    [`run()`][mcruntime.leaderelection.LeaderElector.run] blocks: it retries every ``retry_period`` (jittered) to acquire
    the Lease, calls ``on_started_leading`` once it holds it, then renews it
    every ``retry_period``. If no renewal succeeds within ``renew_deadline`` of
    the last successful one (counted from when that one was sent), leadership
    is lost: a watchdog runs ``on_stopped_leading`` at that deadline, even
    while the renewal is still blocked on a hung API server, and ``run``
    returns once the renewal gives up; all before ``lease_duration`` has
    passed for anyone else, so nobody can take over while this process still
    works. When ``stop`` is set, ``on_stopped_leading``
    runs first and then (with ``release_on_cancel``) the Lease is released so
    the next leader starts at once.

    Callbacks run on the thread calling [`run()`][mcruntime.leaderelection.LeaderElector.run] and must return promptly;
    ``on_stopped_leading`` runs only if leadership was held.
    ``on_new_leader(identity)`` runs whenever another holder is observed.
    ``clock`` is the monotonic clock used for expiry and deadlines.
    """

    def __init__(
        self,
        cluster: Cluster | RESTClient,
        *,
        name: str,
        namespace: str,
        identity: str | None = None,
        lease_duration: float = DEFAULT_LEASE_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        on_started_leading: Callable[[], None] = _noop,
        on_stopped_leading: Callable[[], None] = _noop,
        on_new_leader: Callable[[str], None] | None = None,
        release_on_cancel: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not name:
            raise ValueError("leader election needs a Lease name")
        if not namespace:
            raise ValueError("leader election needs a namespace")
        if retry_period <= 0:
            raise ValueError(f"retry_period must be positive, got {retry_period}")
        if lease_duration <= renew_deadline:
            raise ValueError(
                f"lease_duration ({lease_duration}s) must be greater than renew_deadline ({renew_deadline}s)"
            )
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(
                f"renew_deadline ({renew_deadline}s) must be greater than "
                f"{JITTER_FACTOR} * retry_period ({retry_period}s)"
            )
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.lease_duration = float(lease_duration)
        self.renew_deadline = float(renew_deadline)
        self.retry_period = float(retry_period)
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self.clock = clock
        self._holder = LeaseHolder(
            LeaseClient(cluster, namespace),
            name,
            self.identity,
            lease_duration=self.lease_duration,
            observer=LeaseObserver(clock),
        )
        self._leading = threading.Event()
        self._reported_leader = ""
        #: failed attempts in a row (see _note)
        #: the fields of its lines (`log_fields`), its failure streak's too
        self._fields = log_fields(
            cluster=self._holder.leases.rest.cluster_name,
            lease=f"{namespace}/{name}",
            identity=self.identity,
        )
        self._streaks = FailureStreaks(
            log, f"leaderelection lease={namespace}/{name} identity={self.identity}", self._fields
        )
        self._expired = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped_leading = True
        #: clock() when the attempt in flight was sent (None between attempts)
        self._attempt_sent: float | None = None

    def __repr__(self) -> str:
        return f"LeaderElector({self.namespace}/{self.name}, identity={self.identity!r}, leading={self.is_leader()})"

    # -- state ---------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """True while this elector leads (between the two callbacks)."""
        return self._leading.is_set()

    @property
    def leader(self) -> str:
        """The identity last seen holding the Lease ("" if none)."""
        return self._holder.holder

    def wait_for_leadership(self, timeout: float | None = None) -> bool:
        """Block until this elector leads; False on timeout."""
        return self._leading.wait(timeout)

    # -- running -------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Acquire, lead, renew; return when ``stop`` is set or leadership is lost."""
        if not self._acquire(stop):
            return
        self._expired.clear()
        with self._stop_lock:
            self._stopped_leading = False
        self._leading.set()
        log.info("%s identity=%s: leading", self._where(), self.identity, extra=self._fields)
        watchdog = Watchdog(f"{self.namespace}/{self.name}", clock=self.clock)
        lost = False
        try:
            self.on_started_leading()
            lost = not self._renew(stop, watchdog) or self._expired.is_set()
        finally:
            watchdog.stop()
            self._stop_leading(lost)
            if not lost and self.release_on_cancel:
                self.release()

    def _stop_leading(self, lost: bool) -> None:
        """Run ``on_stopped_leading`` once per term: from the watchdog or from ``run``."""
        with self._stop_lock:
            if self._stopped_leading:
                return
            self._stopped_leading = True
            self._leading.clear()
        if lost:
            log.error(
                "%s identity=%s: leadership lost (no renewal within %.1fs: %s)",
                self._where(),
                self.identity,
                self.renew_deadline,
                self._loss_reason(),
                extra=self._fields,
            )
        self.on_stopped_leading()

    def _loss_reason(self) -> str:
        """Why no renewal succeeded in time: what an operator looks at (the API server or the
        replica that took the Lease over)."""
        if self._holder.last_error:
            return self._holder.last_error
        if self._holder.taken():
            return f"the Lease was taken by {self._holder.holder}"
        sent = self._attempt_sent
        if sent is not None:
            # the watchdog fired while a renewal still waits: a hung API server or path
            return (
                f"the renewal sent {self.clock() - sent:.1f}s ago has had no answer from "
                f"cluster {display_name(self._holder.leases.rest.cluster_name)}"
            )
        return "no renewal succeeded"

    def _deadline_passed(self) -> None:
        """The watchdog's callback: the renew deadline passed with no renewal; stop working now."""
        self._expired.set()
        self._stop_leading(True)

    def release(self) -> bool:
        """Release the Lease if held (empty holder, 1 s duration); True on success."""
        held = self._holder.held
        if self._holder.release(timeout=self.renew_deadline):
            log.info("%s identity=%s: released", self._where(), self.identity, extra=self._fields)
            return True
        if held and self._holder.last_error:
            # the next leader waits for the Lease to expire: say why a hand-over is slow
            log.warning(
                "%s identity=%s: releasing the Lease failed: %s; "
                "the next leader takes over once it expires (within %gs)",
                self._where(),
                self.identity,
                self._holder.last_error,
                self.lease_duration,
                extra=self._fields,
            )
        return False

    def _attempt(
        self, timeout: float, stop: threading.Event, renew_deadline: float | None = None
    ) -> bool:
        """One try to take or renew the Lease (``renew_deadline``: a renewal's, when the
        leadership ends unless one succeeds)."""
        self._attempt_sent = self.clock()
        try:
            ok = self._holder.try_acquire_or_renew(timeout)
        finally:
            self._attempt_sent = None
        error = self._holder.last_error
        # an attempt cut by the stop is no failure to retry: the stop releases the Lease; nor
        # is a renewal that failed too late for another before the renew deadline: the loss
        # of the leadership says it (this failure, or the renewal's wait), and nothing is retried
        last = renew_deadline is not None and self.clock() + self.retry_period >= renew_deadline
        if error is None or not (stop.is_set() or last):
            self._note(error)
        leader = self._holder.holder
        if leader and leader != self._reported_leader:
            self._reported_leader = leader
            if leader != self.identity:
                log.info("%s: %s is the leader", self._where(), leader, extra=self._fields)
                if self.on_new_leader is not None:
                    self.on_new_leader(leader)
        return ok

    def _where(self) -> str:
        """How its lines begin, as its failure streak's do: the Lease's cluster and name."""
        cluster = display_name(self._holder.leases.rest.cluster_name)
        return f"cluster={cluster} leaderelection lease={self.namespace}/{self.name}"

    def _note(self, error: str | None) -> None:
        """Log the first failed attempt of a streak (a Lease the credentials may not read or
        write, an API server that does not answer) as a warning and its end as an info line."""
        cluster = self._holder.leases.rest.cluster_name
        if error is not None:
            self._streaks.failed(
                cluster, _ATTEMPT, error, retry=f"retrying every {self.retry_period:.1f}s"
            )
        else:
            self._streaks.recovered(cluster, _ATTEMPT)

    def _acquire(self, stop: threading.Event) -> bool:
        while not stop.is_set():
            if self._attempt(self.renew_deadline, stop):
                return True
            if stop.wait(self.retry_period * (1 + random.random() * JITTER_FACTOR)):
                break
        return False

    def _renew(self, stop: threading.Event, watchdog: Watchdog) -> bool:
        """Renew until ``stop`` (True) or until the renew deadline passes (False: lost)."""
        last = self._holder.last_renew
        assert last is not None
        watchdog.arm("lease", last + self.renew_deadline, self._deadline_passed)
        next_try = last + self.retry_period
        while True:
            if stop.wait(max(0.0, next_try - self.clock())):
                return True
            now = self.clock()
            deadline = last + self.renew_deadline
            if now >= deadline or self._expired.is_set():
                return False
            if self._attempt(deadline - now, stop, deadline):
                if self._expired.is_set():
                    return False  # renewed too late: the work has already stopped
                last = self._holder.last_renew or now
                watchdog.arm("lease", last + self.renew_deadline, self._deadline_passed)
                next_try = last + self.retry_period
            elif self._holder.taken():
                return False
            else:
                next_try = min(self.clock() + self.retry_period, deadline)
