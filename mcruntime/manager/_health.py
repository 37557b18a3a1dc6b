"""Cluster health: notice a hung, unreachable or not-ready cluster within a bound, report it,
recover promptly.

A cluster that accepts connections and never answers produces no error of its
own: its watches fall silent and its calls wait for their deadlines. Nor does
one whose API server answers but whose storage (etcd) is down: ``/version``,
discovery and watches are served from memory, while every other call waits for
the server's request timeout (60 s). So the manager checks each engaged
cluster: when no request of it has been answered for ``interval`` seconds
(watch bytes do not count: the watch cache serves them without etcd), it sends
``GET /readyz`` with a short deadline, as kube-apiserver's readiness says
whether it can serve (every user may read it: ``system:public-info-viewer``).
No answer, or a 5xx one (``[-]etcd failed``), marks the cluster unhealthy (one
warning, with the reason: ``no answer ...`` or ``not ready: etcd failed``); an
unhealthy cluster is probed every ``retry_interval`` seconds, and its first
ready answer marks it healthy again and makes its informers re-watch at once
(no backoff wait). Busy clusters cost nothing: any answered request counts.

A cluster that does not serve or allow ``/readyz`` (401, 403, 404: a proxy, a
changed RBAC role, a credential that lapsed) is checked as before it: any answer
counts, watch bytes included (said once, at info level). It is asked for
``/readyz`` again every ``6 * interval`` seconds (a minute by default) while it
answers, and once it is served again its storage is checked again (said too).

Worst case to detect a hung or not-ready cluster: ``interval + timeout + tick``
(defaults 10 + 5 + 1 s); for a cluster that has not answered since it was engaged (its
discovery and first lists are due at once), ``timeout + timeout + tick``, so a member
hung from the start holds a manager's start about 10 s, not 15. One thread schedules; probes run on a small pool so
one hung cluster never delays the probes of the others.

Clusters that reach one API server the same way (the same URL, CA, proxy, TLS server
name: the namespaces of the ``namespace`` provider, virtual clusters behind one gateway)
share one probe: the server is probed at the rate above however many clusters it holds,
each of them is marked unhealthy (or healthy) by its answer, and the streak is logged once
for the server, naming how many clusters it affects (``cluster=ns-a and 499 other clusters
on https://host:6443 health: ...``). The probe goes through one of them (as it is
authenticated), any of them answering counts as the server answering, and a cluster that
leaves takes its share with it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcruntime._credentials import credential_of
from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime._readyz import FAILED_CHECK as _FAILED_CHECK
from mcruntime._readyz import PROBE_PATH as _PROBE_PATH
from mcruntime._readyz import PROBE_QUERY as _PROBE_QUERY
from mcruntime._readyz import not_ready as _not_ready
from mcruntime._streak import FailureStreaks
from mcruntime._threads import start_thread, thread_name
from mcruntime.errors import APIError, ClusterLeft, DeadlineExceeded, MCRuntimeError

if TYPE_CHECKING:
    from mcruntime.cluster import Cluster

__all__ = [
    "ClusterHealth",
    "HealthState",
    "DEFAULT_HEALTH_INTERVAL",
    "DEFAULT_HEALTH_TIMEOUT",
    "DEFAULT_HEALTH_RETRY",
]

log = logging.getLogger("mcruntime.manager")

#: probe a cluster that has been silent this long (seconds)
DEFAULT_HEALTH_INTERVAL = 10.0
#: deadline of one probe (seconds)
DEFAULT_HEALTH_TIMEOUT = 5.0
#: how often an unhealthy cluster is probed (seconds): how fast recovery is noticed
DEFAULT_HEALTH_RETRY = 1.0
#: answers of a cluster that does not serve or allow /readyz (a proxy, RBAC): it answered
_NO_READYZ = frozenset({401, 403, 404})
#: a cluster that did not serve /readyz is asked again after this many intervals, though
#: it answers: a role granted again, a credential renewed, a proxy fixed
_READYZ_RECHECK = 6
#: probes in flight at most (threads, started as needed): a probe of a hung cluster holds
#: one for its whole deadline, so a mass outage (a region cut off) needs many at once
_MAX_PROBES = 64
#: of which the re-probes of clusters known to be unhealthy may hold at most this many, so
#: that a cluster that newly stops answering is noticed within its bound however many
#: others are down already
_MAX_RETRY_PROBES = _MAX_PROBES // 4
#: what a cluster's failure streak is about
_PROBING = f"probing GET {_PROBE_PATH}"


@dataclass
class HealthState:
    """What the manager knows of one cluster's health."""

    healthy: bool = True
    #: why it is unhealthy ("" when healthy)
    reason: str = ""
    #: why the calls in flight to it wait in vain ("" when they need not): its last probe got
    #: no answer within its deadline (hung, a black-holed path), or it answered that its
    #: storage is down; not when it refused (nothing listening, TLS, its credential)
    stuck: str = ""
    #: time.monotonic() since when it is healthy (tracked, or answering again), or, when
    #: unhealthy, since when it has not answered: its last answer before the failed probe
    since: float = field(default_factory=time.monotonic)
    last_probe: float = 0.0
    probing: Future[None] | None = None
    #: False once it answered /readyz with 401, 403 or 404: then any answer counts
    readyz: bool = True


@dataclass
class _Server:
    """The tracked clusters that reach one API server the same way: probed as one."""

    #: how they reach it (`_transport`): its key in `ClusterHealth`, and its streak's
    key: tuple[object, ...] = field(repr=False)  # (a proxy's URL may hold its password)
    #: its URL, as the clusters' messages name it (no credentials)
    url: str
    #: name -> (cluster, its health), in the order tracked: the first is probed through
    members: dict[str, tuple[Cluster, HealthState]] = field(default_factory=dict, repr=False)
    healthy: bool = True
    #: when it was last probed (time.monotonic()); 0: due as soon as it is silent
    last_probe: float = 0.0
    probing: Future[None] | None = None
    #: False once it answered /readyz with 401, 403 or 404: then any answer counts
    readyz: bool = True

    def also(self) -> str:
        """What the log says beside the name of the cluster probed through: the others."""
        others = len(self.members) - 1
        if others < 1:
            return ""
        return f"and {others} other cluster{'' if others == 1 else 's'} on {self.url}"

    def heard(self) -> float:
        """When any of its clusters last answered a request."""
        return max(
            (_heard(cluster, self.readyz) for cluster, _ in self.members.values()), default=0.0
        )


def _transport(cluster: Cluster) -> tuple[object, ...]:
    """What makes two clusters reach the same API server the same way: its URL and what the
    connection goes through. Not their tokens (every user may read /readyz), but a
    credential that can fail before the request is sent (an exec plugin, a token file, a
    client certificate): its failure says nothing of the server, so a cluster of its own is
    probed apart (copies of one configuration share it: the ``namespace`` provider's)."""
    rest = cluster.rest
    cfg = rest.api_client.configuration
    return (
        rest.host,
        credential_of(cfg),
        cfg.cert_file,
        cfg.key_file,
        cfg.verify_ssl,
        cfg.ssl_ca_cert,
        getattr(cfg, "ca_cert_data", None),
        cfg.proxy,
        cfg.no_proxy,
        getattr(cfg, "tls_server_name", None),
        cfg.assert_hostname,
    )


class ClusterHealth:
    """Probes tracked clusters on their own schedule; ``on_unhealthy(name, cluster)`` when one
    stops answering (and again when one flagged while it refused becomes `stuck`: its calls
    in flight now wait in vain), ``on_recovered(name, cluster)`` when it answers again.

    `track`/`untrack` as clusters engage and leave; `state(name)` for readiness
    and metrics. `start` runs the scheduler thread until `stop`.
    """

    def __init__(
        self,
        *,
        interval: float = DEFAULT_HEALTH_INTERVAL,
        timeout: float = DEFAULT_HEALTH_TIMEOUT,
        retry_interval: float = DEFAULT_HEALTH_RETRY,
        on_recovered: Callable[[str, Cluster], None] = lambda name, cluster: None,
        on_unhealthy: Callable[[str, Cluster], None] = lambda name, cluster: None,
    ) -> None:
        for name, value in (
            ("interval", interval),
            ("timeout", timeout),
            ("retry_interval", retry_interval),
        ):
            if not value > 0 or not math.isfinite(value):
                raise ValueError(
                    f"cluster health {name} must be a number of seconds, more than 0, got {value!r}"
                )
        self.interval = interval
        self.timeout = timeout
        self.retry_interval = retry_interval
        self.on_recovered = on_recovered
        self.on_unhealthy = on_unhealthy
        self._lock = threading.Lock()
        self._clusters: dict[str, tuple[Cluster, HealthState]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        #: failed probes in a row per server (counted under _lock, logged outside it)
        self._streaks = FailureStreaks(log, "health")
        #: the clusters tracked, by how they reach their API server (`_transport`): probed as one
        self._servers: dict[tuple[object, ...], _Server] = {}
        self._server_of: dict[str, tuple[object, ...]] = {}
        #: `probe_all` asked for a probe of every healthy cluster at the next tick
        self._all_due = False

    def track(self, name: str, cluster: Cluster) -> None:
        """Check ``cluster`` from now on (replacing an earlier cluster of that name)."""
        key = _transport(cluster)
        with self._lock:
            self._leave(name)
            # a new cluster counts as heard from now: its first probe waits one interval
            st = HealthState(last_probe=time.monotonic())
            self._clusters[name] = (cluster, st)
            server = self._servers.get(key)
            if server is None:
                server = self._servers[key] = _Server(
                    key, cluster.rest.host, last_probe=st.last_probe
                )
            st.readyz = server.readyz
            server.members[name] = (cluster, st)
            self._server_of[name] = key

    def untrack(self, name: str, cluster: Cluster | None = None) -> None:
        """Stop checking ``name`` (only if it is still ``cluster``, when given)."""
        with self._lock:
            entry = self._clusters.get(name)
            if entry is not None and (cluster is None or entry[0] is cluster):
                self._leave(name)

    def _leave(self, name: str) -> None:
        """Forget ``name`` and its share of its server (``_lock`` held); the server's streak
        ends with its last cluster."""
        self._clusters.pop(name, None)
        key = self._server_of.pop(name, None)
        server = None if key is None else self._servers.get(key)
        if server is None:
            return
        server.members.pop(name, None)
        if not server.members:
            del self._servers[server.key]
            self._streaks.forget(server.key)

    def state(self, name: str) -> HealthState | None:
        """The health of ``name``, or None when it is not tracked."""
        with self._lock:
            entry = self._clusters.get(name)
            return None if entry is None else entry[1]

    def states(self) -> dict[str, HealthState]:
        """The health of every tracked cluster."""
        with self._lock:
            return {n: s for n, (_, s) in self._clusters.items()}

    def probe_all(self) -> None:
        """Probe every healthy cluster now, however recently it answered: the manager asks it
        as it stops, so a call in flight to a cluster that stopped answering since is cut by
        the probe's deadline (``cluster_health_timeout``) instead of holding the stop for the
        whole ``graceful_shutdown_timeout``; the calls of clusters that answer go on."""
        with self._lock:
            self._all_due = True
        self._wake.set()

    # -- running --------------------------------------------------------------------

    def start(self) -> None:
        """Start the scheduler thread (``mcruntime/health``); idempotent."""
        with self._lock:
            if self._thread is not None or self._stop.is_set():
                return
            self._pool = ThreadPoolExecutor(
                _MAX_PROBES, thread_name_prefix="mcruntime/health/probe"
            )
            self._thread = start_thread(self._run, thread_name("health"))

    def stop(self) -> None:
        """Stop probing and join the threads (a probe in flight ends by its deadline)."""
        self._stop.set()
        self._wake.set()
        thread, pool = self._thread, self._pool
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.timeout + 1)
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        tick = min(self.retry_interval, self.interval) / 2
        while not self._stop.is_set():
            if not self._schedule(time.monotonic()):
                return
            self._wake.wait(tick)
            self._wake.clear()

    def _schedule(self, now: float) -> bool:
        """Start the probes due at ``now``; False when no more can ever start (stopping)."""
        with self._lock:
            due: list[_Server] = []
            retrying = 0  # re-probes in flight
            down: list[_Server] = []  # due for a re-probe
            all_due, self._all_due = self._all_due, False
            for server in self._servers.values():
                if server.probing is not None and not server.probing.done():
                    retrying += not server.healthy
                    continue
                if not server.healthy:
                    if now - server.last_probe >= self.retry_interval:
                        down.append(server)
                    continue
                answered = server.heard()
                # a cluster that has not answered since it was tracked (its discovery and
                # first lists are due at once) is probed once silent for the probe's timeout
                newest = max(st.since for _, st in server.members.values())
                silent = self.interval if answered >= newest else min(self.interval, self.timeout)
                heard = max(answered, server.last_probe)
                if (
                    not all_due
                    and now - heard < silent
                    and (server.readyz or now - server.last_probe < _READYZ_RECHECK * self.interval)
                ):
                    continue
                due.append(server)
            # the longest waiting first: with more servers down than re-probes may run, they
            # take turns (the first ones tracked would take every turn, and the recovery of a
            # later one never be noticed); the others are probed at a later tick
            down.sort(key=lambda server: server.last_probe)
            due.extend(down[: max(0, _MAX_RETRY_PROBES - retrying)])
            pool = self._pool
            if pool is None or self._stop.is_set():
                return False
            for server in due:
                server.last_probe = now
                # through its first cluster: the probe is authenticated as that cluster is
                name, (cluster, _) = next(iter(server.members.items()))
                try:
                    server.probing = pool.submit(self._probe, server, name, cluster)
                except RuntimeError:
                    # the interpreter is exiting with the manager still running:
                    # concurrent.futures takes no more work once its atexit hook ran
                    return False
                for _, st in server.members.values():
                    st.last_probe, st.probing = now, server.probing
        return True

    def _probe(self, server: _Server, name: str, cluster: Cluster) -> None:
        stuck = ""
        try:
            cluster.rest.request(
                "GET", _PROBE_PATH, query=_PROBE_QUERY, timeout=self.timeout, probe=True
            )
            reason = ""
            self._readyz_served(server, name)
        except APIError as exc:
            if exc.status >= 500:
                self._readyz_served(server, name)
                failed = _FAILED_CHECK.findall(exc.message)
                reason = _not_ready(exc, failed)
                if any(check.startswith("etcd") for check in failed):
                    # its calls that need storage wait for the server's request timeout (60 s)
                    stuck = f"the cluster's storage is down (its health probe, GET {_PROBE_PATH}: {reason})"
            else:  # it answered: reachable (an authorization problem is not a hang)
                reason = ""
                if exc.status in _NO_READYZ and server.readyz:
                    self._set_readyz(server, False)
                    also = server.also()
                    log.info(
                        "cluster=%s%s health: GET %s answered %d; any answer counts as healthy "
                        "for %s (its storage is not checked)",
                        display_name(name),
                        f" {also}" if also else "",
                        _PROBE_PATH,
                        exc.status,
                        "these clusters" if also else "this cluster",
                        extra=log_fields(cluster=name),
                    )
        except ClusterLeft:
            with self._lock:
                # it left: the others on its server (if any) are probed through another at once
                entry = server.members.pop(name, None)
                if entry is not None:
                    server.members[name] = entry  # the last to be probed through
                    if len(server.members) > 1:
                        server.last_probe = 0.0
            return
        except MCRuntimeError as exc:
            reason = str(exc)
            if isinstance(exc, DeadlineExceeded):
                stuck = (
                    f"the cluster is not answering (its health probe, GET {_PROBE_PATH}, got no "
                    f"answer within {self.timeout:g}s)"
                )
        self._report(server, name, reason, stuck)

    def _set_readyz(self, server: _Server, served: bool) -> None:
        with self._lock:
            server.readyz = served
            for _, st in server.members.values():
                st.readyz = served

    def _readyz_served(self, server: _Server, name: str) -> None:
        """``server`` answered /readyz itself (ready or not): check its storage again."""
        if not server.readyz:
            self._set_readyz(server, True)
            also = server.also()
            log.info(
                "cluster=%s%s health: GET %s is served again; its storage is checked again",
                display_name(name),
                f" {also}" if also else "",
                _PROBE_PATH,
                extra=log_fields(cluster=name),
            )

    def _report(self, server: _Server, probed: str, reason: str, stuck: str = "") -> None:
        """Mark every cluster of ``server`` by the answer its probe (through ``probed``) got."""
        unhealthy: list[tuple[str, Cluster]] = []
        recovered: list[tuple[str, Cluster]] = []
        with self._lock:
            if not server.members:
                return  # every cluster of it untracked meanwhile
            server.healthy = not reason
            heard = server.heard()
            for name, (cluster, st) in server.members.items():
                was, was_stuck = st.healthy, st.stuck
                st.healthy = not reason
                st.reason = _as_of(reason, probed, name)
                st.stuck = stuck
                if was and not st.healthy:
                    # silent since its server's last answer (or since it was tracked), not
                    # since the probe's deadline: a hung cluster has not answered for
                    # interval + timeout
                    st.since = max(st.since, heard)
                elif not was and st.healthy:
                    st.since = time.monotonic()
                if reason and (was or (stuck and not was_stuck)):
                    unhealthy.append((name, cluster))
                elif not reason and not was:
                    recovered.append((name, cluster))
            # counted here, so a probe of a server untracked meanwhile never starts a streak
            n = self._streaks.fail(server.key) if reason else self._streaks.succeed(server.key)
            # the others at the time of the probe's answer: how many clusters it affects
            also = server.also()
            if probed not in server.members:  # it left meanwhile: name one that is still there
                probed = next(iter(server.members))
        if reason:
            self._streaks.log_failure(
                n,
                probed,
                _PROBING,
                reason,
                retry="its watches and reconciles wait until it answers and is ready"
                + ("; calls to it fail at once meanwhile" if stuck else "")
                + f"; probing every {self.retry_interval:g}s",
                also=also,
            )
        else:
            self._streaks.log_recovery(n, probed, _PROBING, detail="; re-watching", also=also)
        for name, cluster in unhealthy:
            self._hook(self.on_unhealthy, "unhealthy", name, cluster)
        for name, cluster in recovered:
            self._hook(self.on_recovered, "recovery", name, cluster)

    @staticmethod
    def _hook(hook: Callable[[str, Cluster], None], what: str, name: str, cluster: Cluster) -> None:
        try:
            hook(name, cluster)
        except Exception:
            log.exception(
                "cluster=%s: %s hook failed",
                display_name(name),
                what,
                extra=log_fields(cluster=name),
            )


def _as_of(reason: str, probed: str, name: str) -> str:
    """``reason`` (of the probe through cluster ``probed``) as cluster ``name`` reads it: its
    server's answer is its own."""
    prefix = f"[cluster {display_name(probed)}] "
    if name == probed or not reason.startswith(prefix):
        return reason
    return f"[cluster {display_name(name)}] {reason[len(prefix) :]}"


def _heard(cluster: Cluster, readyz: bool) -> float:
    """When ``cluster`` last answered a request (any answer, watch bytes too, when its server
    does not serve /readyz)."""
    return cluster.rest.last_response if readyz else cluster.rest.last_answer
