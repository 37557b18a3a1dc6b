from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import logging.handlers
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from mcruntime import _held_back as held_back
from mcruntime._backoff import Backoff
from mcruntime._callables import refuse_coroutine_function
from mcruntime._listen import parse_bind_address
from mcruntime._local import LOCAL, display_name
from mcruntime._logfields import log_fields
from mcruntime._streak import FailureStreaks, describe_error
from mcruntime._threads import described, start_thread, thread_name
from mcruntime.client import APIReader
from mcruntime.client import deadline as call_deadline
from mcruntime.controller import Controller
from mcruntime.errors import (
    ClusterNotFound,
    FleetNotKnown,
    Forbidden,
    GracePeriodExceeded,
    MethodNotSupported,
    NoKindMatch,
    Unauthorized,
    Unreachable,
)
from mcruntime.healthz import Checker, CheckResult, Checks, ping
from mcruntime.leaderelection import LeaderElectionLost
from mcruntime.manager._engagement import Engagement, EngagementState, EngageSlot, EngageSlots
from mcruntime.manager._gc import HeapFreezer
from mcruntime.manager._health import ClusterHealth
from mcruntime.manager._http import ProbeServer, serving_tls
from mcruntime.manager._metrics_auth import MetricsAuth
from mcruntime.manager._off_loop import off_the_loop
from mcruntime.manager._options import ManagerOptions
from mcruntime.multicluster import Aware, Provider, ProviderRunnable, on_end
from mcruntime.recorder import EventRecorder, RecorderProvider

if TYPE_CHECKING:
    from kubernetes.client import Configuration

    from mcruntime.cache import FieldIndexer
    from mcruntime.client import KindLike
    from mcruntime.cluster import Cluster
    from mcruntime.manager._leadership import ManagerLeadership
    from mcruntime.webhook import WebhookServer

log = logging.getLogger("mcruntime.manager")

#: what an engagement's failure streak is about
_ENGAGING = "engaging every controller"
#: how often start() looks whether it should stop waiting for clusters (seconds)
_START_SLICE = 0.05


#: a controller still syncing a cluster after this many seconds is logged (once per attempt)
_SYNC_SLOW = 5.0
#: how long a cluster's leave waits for its reconciles in flight (their calls to it cut)
#: before its on_cluster_disengaged callbacks run anyway, said in a warning (seconds)
_LEAVE_WAIT = 5.0


class _NotSynced(TimeoutError):
    """An informer of a controller did not sync within an engagement attempt. Its message says
    why (the informer's last error: a 401, a 403, a refused connection); logged without its
    type's name, which would read as a slow cluster whatever the reason."""


@runtime_checkable
class Runnable(Protocol):
    """Work the manager runs in a thread of its own: ``start(stop)`` blocks until ``stop`` is set.

    A runnable runs on every replica, unlike a Go ``Runnable`` (leader-only unless it says
    otherwise). Give it ``need_leader_election = True`` (an attribute, or a method returning
    it) and, under leader election, it starts once this replica leads and its ``stop`` is set
    when leadership is lost or the manager stops, before the Lease is released.
    """

    def start(self, stop: threading.Event, /) -> None: ...


class _RunnableFunc:
    """A function taking the stop event, run as a [`Runnable`][mcruntime.manager.Runnable]."""

    def __init__(self, fn: Callable[[threading.Event], Any]) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)
        self.need_leader_election = needs_leader_election(fn)

    def start(self, stop: threading.Event) -> None:
        self.fn(stop)

    def __repr__(self) -> str:
        return f"RunnableFunc({self.name})"


def needs_leader_election(runnable: Any) -> bool:
    """Whether ``runnable`` says it may run on the leader only (``need_leader_election``)."""
    flag = getattr(runnable, "need_leader_election", False)
    return bool(flag() if callable(flag) else flag)


class _FieldIndexer:
    def __init__(self, mgr: Manager) -> None:
        self._mgr = mgr
        self._lock = threading.Lock()
        self._indexes: list[tuple[Any, str, Callable[[dict[str, Any]], Any]]] = []

    def index_field(self, kind: KindLike, field: str, fn: Callable[[dict[str, Any]], Any]) -> None:
        """Index ``field`` of ``kind`` with ``fn`` on the local cluster and every provider cluster.

        A cluster that cannot be reached now gets the index when it is engaged.
        """
        with self._lock:
            self._indexes.append((kind, field, fn))
        if self._mgr.local is not None:
            try:
                self._mgr.local.cache.index_field(kind, field, fn)
            except Unreachable as exc:
                log.warning(
                    "cluster=local index %r registered once the cluster answers: %s",
                    field,
                    exc,
                    extra=log_fields(cluster=LOCAL),
                )
        if self._mgr.provider is not None:
            self._mgr.provider.index_field(kind, field, fn)

    def apply(self, name: str, cluster: Cluster) -> None:
        """Register every index on ``cluster`` (those it has are kept); a kind it does not serve is skipped."""
        with self._lock:
            indexes = list(self._indexes)
        for kind, field_name, fn in indexes:
            try:
                cluster.cache.index_field(kind, field_name, fn)
            except NoKindMatch as exc:
                log.warning(
                    "cluster=%s index %r skipped: %s",
                    display_name(name),
                    field_name,
                    exc,
                    extra=log_fields(cluster=name),
                )


def _local_cluster(config: Any, options: ManagerOptions) -> Cluster:
    from kubernetes.client import Configuration

    from mcruntime._kubeconfig import not_a_kubeconfig
    from mcruntime.cluster import Cluster

    if isinstance(config, Cluster):
        if config.stopped:
            # (as the clusters provider refuses one: it cannot start again)
            raise ValueError(
                f"Manager(cluster): cluster {display_name(config.name)} was stopped (by "
                "itself, or by the manager it was given to before) and cannot start again; "
                "give Manager cluster.clone()"
            )
        return config
    kwargs: dict[str, Any] = {"name": LOCAL}
    if options.cache is not None:
        kwargs["cache_options"] = options.cache
    if config is None or isinstance(config, (str, os.PathLike, dict)):
        return Cluster.from_kubeconfig(config, **kwargs)
    if not isinstance(config, Configuration):
        raise not_a_kubeconfig(
            config, "a kubeconfig path or dict, a kubernetes Configuration or a Cluster"
        )
    return Cluster.from_config(config, **kwargs)


class Manager:
    """Runs controllers and runnables against the local cluster and a provider's clusters.

    ``config`` names the local cluster: a ``kubernetes.client.Configuration``, a
    kubeconfig path or dict, or a [`Cluster`][mcruntime.Cluster]. Without config and
    without provider the default kubeconfig (or in-cluster config) is used; with
    a provider and no config there is no local cluster. A `Cluster` built with a
    ``name`` is renamed to the local cluster's (``""``, read ``local``) here, unless
    started already: take its ``client`` and ``cache`` from the manager afterwards. The
    manager's stop stops its local cluster for good: a stopped `Cluster` raises ValueError
    here (a notebook's manager cell run again: give it ``cluster.clone()``).

    Every cluster the provider engages is engaged with every controller that
    wants it: its caches start and sync first (with a timeout, retried with
    backoff), then it becomes visible to [`get_cluster()`][mcruntime.manager.Manager.get_cluster] and its initial
    objects reach every handler. Engagements run concurrently, so a slow or
    unreachable cluster never holds up the others.
    """

    def __init__(
        self,
        config: Configuration | str | os.PathLike[str] | dict[str, Any] | Cluster | None = None,
        *,
        provider: Provider | None = None,
        options: ManagerOptions | None = None,
    ) -> None:
        self.options = options or ManagerOptions()
        self.options.check()  # (again: a field may have been set since it was made)
        self.provider = provider
        self.local: Cluster | None = (
            _local_cluster(config, self.options) if config is not None or provider is None else None
        )
        if self.local is not None:
            # named as engaged now: what is built on it before its engagement (the leader
            # election's Lease client) keeps working, instead of the client a later renaming
            # closes (a started one keeps its name: its engagement says so)
            if not self.local.started:
                _take_name(self.local, LOCAL)
            if self.options.field_manager:
                self.local.apply_default_field_manager(self.options.field_manager)
        from mcruntime.metrics import Metrics

        self.metrics = Metrics()
        self._lock = threading.RLock()
        #: provider clusters in state ENGAGED (the engaged-clusters gauge), kept on each
        #: transition instead of counted over every engagement each time (O(n) per engagement)
        self._engaged_count = 0
        self._engaged_count_lock = threading.Lock()
        self._controllers: list[Controller] = []
        self._runnables: list[Runnable] = []
        self._started_runnables: set[int] = set()  # ids: each runnable starts once
        #: set when this replica may do leader-only work (Go's ``mgr.Elected()``)
        self._elected = threading.Event()
        #: the stop of leader-only runnables: leadership lost, or the manager stopping
        self._leader_only_stop = threading.Event()
        self._leader_only_threads: list[threading.Thread] = []
        self._leads = False  # leader-only runnables added from now on start at once
        self._engagements: dict[str, Engagement] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._provider_stop = threading.Event()
        self._done = threading.Event()
        #: held by the stop() that runs the steps; one that an exception such as
        #: KeyboardInterrupt cut lets it go without setting _done, and the next stop() resumes
        self._stopping = threading.Lock()
        self._stopping_thread: threading.Thread | None = None
        #: the steps of stop() that have ended, (what, its n-th step): resumed past
        self._stop_steps_done: set[tuple[str, int]] = set()
        self._stop_deadline: float | None = None
        self._stop_grace = 0.0  # the grace period of the stop under way (seconds)
        self._stop_failed: list[tuple[str, Exception]] = []
        #: a signal came to run(): start() stops waiting (a plain flag, set in a signal handler)
        self._signalled = False
        #: run() said it holds a running event loop: its start() and stop() say nothing more
        self._run_said_loop = False
        self._local_engagement: Engagement | None = None
        self._started = False
        #: start() has waited for the provider's initial clusters (a provider that cannot
        #: tell when it has reported them counts as reported from then on)
        self._start_waited = False
        #: the process that started it (`os.getpid()`): a child forked from it has none of its
        #: threads, and its locks may be held by one of them (`_started_elsewhere`)
        self._pid: int | None = None
        self._field_indexer = _FieldIndexer(self)
        limit = self.options.max_concurrent_engagements
        self._engage_slots = EngageSlots(limit) if limit is not None else None
        self._heap = HeapFreezer() if self.options.freeze_gc else None
        #: True once this replica lost its leader election (the manager then stops itself)
        self.leader_lost = False
        #: the exception of a controller that runs with ``recover_panic=False`` and crashed
        self.fatal_error: BaseException | None = None
        #: set by a stop that ended with work still running past ``graceful_shutdown_timeout``
        #: (or its own ``timeout``): what still ran; `run()`, `arun()` and the end of a
        #: ``with mgr:`` block raise it, as controller-runtime's ``Start`` returns it
        self.grace_period_exceeded: GracePeriodExceeded | None = None
        self._leadership: ManagerLeadership | None = None
        self.healthz = Checks("healthz")
        self.healthz.add("ping", ping)
        self.readyz = Checks("readyz")
        self.readyz.add_source(self._cluster_readiness)
        self._servers: list[ProbeServer] = []
        #: health of every engaged cluster (hung or unreachable ones are reported by name)
        self.health = ClusterHealth(
            interval=self.options.cluster_health_interval,
            timeout=self.options.cluster_health_timeout,
            retry_interval=self.options.cluster_health_retry_interval,
            on_recovered=self._cluster_recovered,
            on_unhealthy=self._cluster_unhealthy,
        )
        self.metrics.register_clusters(self._cluster_metrics)
        self.metrics.register_requests(self._request_metrics)
        self._disengaged_callbacks: list[Callable[[str], None]] = []
        self._recorders: RecorderProvider | None = None
        self._webhook_server: WebhookServer | None = None
        self._check_metrics_options()
        if self.options.leader_election:
            from mcruntime.manager._leadership import check_options

            check_options(self)  # now, not when it starts: a unit test that builds it sees it
        if self.options.webhook_server is not None:
            # given, so served: hooks registered on it directly count as much as those
            # of webhook_managed_by (before, it was bound by `port` and never served)
            self.get_webhook_server()

    def _check_metrics_options(self) -> None:
        opts = self.options
        debug = parse_bind_address(opts.debug_bind_address, "debug_bind_address")
        for other in ("metrics_bind_address", "health_probe_bind_address"):
            address = parse_bind_address(getattr(opts, other), other)
            if debug is not None and debug[1] != 0 and debug == address:
                raise ValueError(
                    f"debug_bind_address {opts.debug_bind_address!r} is also the {other}: "
                    "the debug pages are served on a server of their own (plain HTTP, "
                    "no authentication)"
                )
        if opts.metrics_cert_dir is not None and not opts.metrics_secure:
            raise ValueError("metrics_cert_dir is set but metrics_secure is not")
        if opts.metrics_auth and not opts.metrics_secure:
            raise ValueError(
                "metrics_auth needs metrics_secure: scrapers' bearer tokens must not travel in clear"
            )
        if opts.metrics_auth and self.local is None:
            raise ValueError(
                "metrics_auth needs a local cluster (the manager's config): the cluster the "
                "manager runs in reviews the scrapers' tokens"
            )

    # -- composition -----------------------------------------------------------

    def add(self, runnable: Controller | Runnable | Callable[[threading.Event], Any]) -> None:
        """Add a controller or a runnable; started at once if the manager runs.

        A controller added to a running manager is engaged in the background with every
        cluster it wants, each once its informers there synced (those still syncing too, once
        their attempt is over), and retried with backoff where that fails (a kind a cluster
        does not serve yet), as the controllers it started with are: this call never waits
        for a cluster, nor raises for one.

        A runnable is an object with ``start(stop)``, or a function taking the stop event
        (Go's ``manager.RunnableFunc``); either runs in a thread of its own until ``stop``
        is set. Raises TypeError for anything else (an ``async def`` too: nothing would await
        it), and RuntimeError once the manager is stopping: nothing would stop what it started.

        A runnable that raises before its stop event is set stops the manager, which then
        raises its error from [`run()`][mcruntime.manager.Manager.run], as controller-runtime
        does when a runnable returns an error; return instead when there is nothing more to do.
        """
        if not isinstance(runnable, Controller):
            fn = getattr(runnable, "start", runnable)
            refuse_coroutine_function(
                fn,
                f"cannot add {runnable!r}: the runnable",
                "a runnable runs in a thread of its own: take the stop event in a plain "
                "function (it may call asyncio.run)",
            )
        if isinstance(runnable, Controller) or callable(getattr(runnable, "start", None)):
            self._add(cast("Controller | Runnable", runnable))
        elif callable(runnable):
            self._add(_RunnableFunc(runnable))
        else:
            raise TypeError(
                f"cannot add {runnable!r}: a runnable has a start(stop) method or is a "
                "function taking the stop event"
            )

    def _add(self, runnable: Controller | Runnable) -> None:
        with self._lock:
            if self._stop.is_set():
                raise RuntimeError(f"cannot add {runnable!r}: the manager is stopped")
            if isinstance(runnable, Controller):
                runnable.set_has_provider(self.provider is not None)
                runnable.cluster_known = self._cluster_known
                runnable.on_fatal = self._fatal_error
                runnable.engage_again = self._engage_again
                self._controllers.append(runnable)
                # every cluster engaged or being engaged: the new controller is engaged as the
                # others were, once its informers there synced, retried when it fails
                engagements = list(self._engagements.values())
                leading = self._leadership is None or self._leadership.elector.is_leader()
                if self._started and (leading or not runnable.need_leader_election):
                    runnable.start()
            else:
                self._runnables.append(runnable)
                engagements = []
                if self._started and (self._leads or not self._leader_only(runnable)):
                    self._start_runnable(runnable)
        for eng in engagements:
            if isinstance(runnable, Controller) and runnable.wants(eng.name):
                self._engage_late(eng)

    @property
    def controllers(self) -> list[Controller]:
        with self._lock:
            return list(self._controllers)

    def get_field_indexer(self) -> FieldIndexer:
        """Registers field indexes on every cluster, present and future."""
        return self._field_indexer

    def get_provider(self) -> Provider | None:
        return self.provider

    def get_event_recorder_for(self, name: str) -> EventRecorder:
        """An [`EventRecorder`][mcruntime.recorder.EventRecorder] posting Events as component ``name``.

        Events land in the object's own cluster (the reconcile's, or an explicit
        ``cluster_name``); each engaged cluster gets a bounded queue and a sender
        thread, both gone when the cluster is disengaged or the manager stops.
        """
        with self._lock:
            if self._recorders is None:
                self._recorders = RecorderProvider(self.get_cluster, metrics=self.metrics)
                self._disengaged_callbacks.append(self._recorders.forget_cluster)
            recorders = self._recorders
        return recorders.get_event_recorder_for(name)

    def on_cluster_disengaged(self, fn: Callable[[str], None]) -> Callable[[], None]:
        """Call ``fn(cluster_name)`` each time a cluster is disengaged; returns a function that cancels it.

        Called after the controllers let go of the cluster, its reconciles in flight
        then ended (their calls to it were cut; one still running after 5 s, or
        ``graceful_shutdown_timeout`` if shorter, is named in a warning and not waited
        for), and the library dropped its own per-cluster metrics series: drop your own
        there too (``my_gauge.remove(cluster_name)``), stop the threads your reconciler
        started for the cluster's objects, or forget per-cluster state. ``fn`` runs on
        the thread ending the engagement; it must not block for long.
        """
        with self._lock:
            self._disengaged_callbacks.append(fn)

        def cancel() -> None:
            with self._lock:
                if fn in self._disengaged_callbacks:
                    self._disengaged_callbacks.remove(fn)

        return cancel

    def _fatal_error(self, exc: BaseException) -> None:
        if self.fatal_error is None:
            self.fatal_error = exc
        start_thread(self.stop, thread_name("manager", None, "fatal"))

    def get_webhook_server(self) -> WebhookServer:
        """The manager's webhook server, added as a runnable on first use.

        It is ``options.webhook_server`` or one with default options; its
        readiness and liveness are served as the ``webhook`` probes, it serves a
        cluster only while that cluster is engaged, and it is told when clusters
        are engaged and leave (to install and remove webhook configurations).
        """
        with self._lock:
            if self._webhook_server is not None:
                return self._webhook_server
            from mcruntime.webhook import WebhookServer

            server = self.options.webhook_server or WebhookServer()
            server.cluster_known = self._webhooks_serve
            server.metrics = self.metrics
            self.metrics.register_webhook_clusters(self._webhooks_serve)
            self._webhook_server = server
            engaged = [e for e in self._engagements.values() if e.state == "engaged"]
        self.add_readyz_check("webhook", server.ready_check)
        self.add_healthz_check("webhook", server.health_check)
        self.add(server)
        for eng in engaged:
            server.engage(eng.name, eng.cluster)
        return server

    # -- probes and metrics ------------------------------------------------------

    def add_healthz_check(self, name: str, check: Checker) -> None:
        """Add a liveness check served at ``/healthz`` (and ``/healthz/<name>``)."""
        self.healthz.add(name, check)

    def add_readyz_check(self, name: str, check: Checker) -> None:
        """Add a readiness check served at ``/readyz`` (and ``/readyz/<name>``)."""
        self.readyz.add(name, check)

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """Where ``/metrics`` is served (the bound port when configured with port 0)."""
        return next((s.address for s in self._servers if "metrics" in s.name), None)

    @property
    def debug_address(self) -> tuple[str, int] | None:
        """Where the debug pages are served (``debug_bind_address``), once started."""
        return next((s.address for s in self._servers if s.name == "debug"), None)

    @property
    def health_probe_address(self) -> tuple[str, int] | None:
        """Where ``/healthz`` and ``/readyz`` are served."""
        return next((s.address for s in self._servers if "probes" in s.name), None)

    def _cluster_readiness(self) -> list[CheckResult]:
        """One line per cluster: synced caches pass; an unreachable provider cluster is shown, not
        failing; so is a provider whose discovery fails (its management cluster hung or refusing)."""
        if not self._started or self._stop.is_set():
            return [CheckResult("manager", False, "not running")]
        results = [CheckResult("manager", True)]
        if self.provider is not None and (error := getattr(self.provider, "discovery_error", None)):
            # its engaged clusters keep working: no cluster comes or goes until it recovers
            results.append(
                CheckResult(f"provider/{self._provider_name()}", False, error, informational=True)
            )
        with self._lock:
            engagements = list(self._engagements.values())
        now = time.monotonic()
        for eng in sorted(engagements, key=lambda e: e.name):
            label = f"cluster/{display_name(eng.name)}"
            local = eng.name == LOCAL
            health = self.health.state(eng.name)
            if health is not None and not health.healthy:
                results.append(
                    CheckResult(
                        label,
                        False,
                        f"not answering for {now - health.since:.0f}s: {health.reason}",
                        informational=not local,
                    )
                )
            elif eng.state == EngagementState.ENGAGED:
                errors = [
                    error
                    for inf in eng.cluster.cache.all_informers()
                    if (error := getattr(inf, "last_error", None)) is not None
                ]
                if errors:
                    results.append(
                        CheckResult(
                            label, False, _informer_failure(errors[0]), informational=not local
                        )
                    )
                else:
                    results.append(CheckResult(label, True))
            elif eng.error is not None or now - eng.since > self.options.engage_sync_timeout:
                reason = eng.error or "caches not synced"
                results.append(CheckResult(label, False, reason, informational=not local))
            else:
                results.append(CheckResult(label, False, "caches syncing"))
        return results

    def _cluster_metrics(self) -> dict[str, tuple[str, bool | None]]:
        with self._lock:
            engagements = [(n, e.state) for n, e in self._engagements.items()]
        out: dict[str, tuple[str, bool | None]] = {}
        for name, state in engagements:
            health = self.health.state(name)
            out[name] = (state, None if health is None else health.healthy)
        return out

    def _request_metrics(
        self,
    ) -> dict[str, tuple[str, dict[tuple[str, str], int], dict[str, int]]]:
        with self._lock:
            clusters = [(n, e.cluster.rest) for n, e in self._engagements.items()]
        return {
            name: (rest.address, rest.request_counts(), rest.retry_counts())
            for name, rest in clusters
        }

    def _cluster_unhealthy(self, name: str, cluster: Cluster) -> None:
        """The health check got no answer from ``cluster``, or a not-ready one: its requests
        wait, so that each does not hold a worker until its calls' deadlines while other
        clusters are due. When its calls wait in vain (its probe got no answer at all, or its
        storage is down), new ones fail at once until it answers again, whoever makes them
        (another cluster's reconcile copying to it), and those in flight are cut, so that
        the reconciles (and other work) blocked in them end now, not at their deadlines:
        their requests are retried as soon as it answers again."""
        for ctrl in self.controllers:
            ctrl.pause_cluster(name)  # first: the requests of the calls cut wait behind it
        health = self.health.state(name)
        if health is not None and health.stuck:
            cluster.rest.refuse_calls(health.stuck)  # first: a call begun meanwhile is cut
            cluster.rest.cut_calls(health.stuck)

    def _cluster_recovered(self, name: str, cluster: Cluster) -> None:
        """The health check heard from ``cluster`` again: send its calls, re-watch now, retry
        engagement now, reconcile its requests again (and the requests that failed on it)."""
        cluster.rest.accept_calls()
        for ctrl in self.controllers:
            ctrl.resume_cluster(name)
        if cluster.started:
            cluster.cache.retry_now()
        with self._lock:
            eng = self._engagements.get(name)
        if eng is not None and eng.cluster is cluster:
            eng.wake.set()

    def _bind_servers(self) -> list[ProbeServer]:
        """Bind every server (metrics, probes, debug pages) before any serves: when one
        cannot listen, those bound already are closed and its
        [`ListenError`][mcruntime.errors.ListenError] (naming the server, the option and
        the address) is raised, as controller-runtime's ``Start`` returns its listener's."""
        opts = self.options
        metrics = parse_bind_address(opts.metrics_bind_address, "metrics_bind_address")
        probes = parse_bind_address(opts.health_probe_bind_address, "health_probe_bind_address")
        debug = parse_bind_address(opts.debug_bind_address, "debug_bind_address")
        secure: dict[str, Any] = {}
        if metrics is not None and opts.metrics_secure:
            secure["tls"] = serving_tls(opts.metrics_cert_dir, metrics[0])
            if opts.metrics_auth:
                assert self.local is not None  # _check_metrics_options
                secure["auth"] = MetricsAuth(self.local)
        metrics_served = {"metrics": self.metrics, **secure}
        probes_served = {"healthz": self.healthz, "readyz": self.readyz}
        # (address, server name, option, what it serves)
        wanted: list[tuple[tuple[str, int], str, str, dict[str, Any]]] = []
        if metrics is not None and metrics == probes and metrics[1] != 0:
            # one server: over TLS when metrics are; only /metrics asks for a token (two
            # ":0" addresses are two free ports, as for the debug pages)
            wanted.append(
                (
                    metrics,
                    "metrics+probes",
                    "metrics_bind_address and health_probe_bind_address",
                    {**metrics_served, **probes_served},
                )
            )
        else:
            if metrics is not None:
                wanted.append((metrics, "metrics", "metrics_bind_address", metrics_served))
            if probes is not None:
                wanted.append((probes, "probes", "health_probe_bind_address", probes_served))
        if debug is not None:
            wanted.append((debug, "debug", "debug_bind_address", {"debug": self._debug_page}))
        servers: list[ProbeServer] = []
        try:
            for address, name, option, served in wanted:
                servers.append(ProbeServer(address, name=name, option=option, **served))
        except BaseException:
            for server in servers:
                server.stop()  # bound, never started: only closed
            raise
        return servers

    def _debug_page(self, path: str) -> str | None:
        from mcruntime.manager import _debug

        return _debug.page(path, list(self.controllers))

    # -- clusters ----------------------------------------------------------------

    def get_cluster(self, name: str = LOCAL) -> Cluster:
        """The cluster ``name``: a provider's once its caches have synced; the local one (``""``) at any time.

        Raises [`ClusterNotFound`][mcruntime.errors.ClusterNotFound] for unknown,
        not-yet-synced and disengaged provider clusters, and for ``""`` when the manager has
        no local cluster. The local cluster is returned before the manager starts too: its
        ``uncached_client`` serves set-up work, its cached ``client`` raises
        [`CacheNotStarted`][mcruntime.cache.CacheNotStarted] until its caches run.
        """
        if name == LOCAL:
            if self.local is None:
                raise ClusterNotFound(
                    "this manager has no local cluster (built with a provider and no config)"
                )
            return self.local
        # every reconcile's reads come here: a dict read is atomic, and the lock would
        # only order it against an engagement that changes at any moment anyway
        eng = self._engagements.get(name)
        if eng is None:
            if self._run_elsewhere(name):
                raise ClusterNotFound(
                    f"cluster {name!r} is not engaged here: the coordinator runs it on "
                    "another replica (get_api_reader reads it from here)"
                )
            raise ClusterNotFound(f"cluster {name!r} is not engaged")
        if eng.state != EngagementState.ENGAGED:
            detail = f": {eng.error}" if eng.error else ""
            raise ClusterNotFound(f"cluster {name!r} is not ready yet ({eng.state}{detail})")
        return eng.cluster

    def get_api_reader(self, name: str = LOCAL) -> APIReader:
        """Reads of cluster ``name`` straight from its API server, never a cache.

        Unlike `get_cluster` it needs no synced cache, and it works on every replica:
        for a cluster the coordinator runs on another replica (the
        [`Sharded`][mcruntime.manager.coordinator.Sharded] coordinator), it reads
        through the coordinator's own connections. So it is what a webhook handler
        reads its cluster with, as controller-runtime's ``GetAPIReader``. Raises
        [`ClusterNotFound`][mcruntime.errors.ClusterNotFound] for a cluster that is
        neither engaged here nor in the fleet.
        """
        if name == LOCAL:
            return self.get_cluster(LOCAL).api_reader
        eng = self._engagements.get(name)
        if eng is not None and not eng.cluster.stopped:
            return eng.cluster.api_reader
        reader = getattr(self.options.coordinator, "api_reader", None)
        if reader is not None and self._run_elsewhere(name):
            api_reader: APIReader = reader(name)
            return api_reader
        raise ClusterNotFound(f"cluster {name!r} is not engaged")

    def engaged_clusters(self) -> list[str]:
        """Names of the provider clusters engaged and synced now."""
        with self._lock:
            return sorted(
                n for n, e in self._engagements.items() if e.state == EngagementState.ENGAGED and n
            )

    def fleet_clusters(self) -> list[str]:
        """Names of every provider cluster of the fleet, engaged or not.

        The engaged ones ([`engaged_clusters()`][mcruntime.manager.Manager.engaged_clusters]),
        those the provider reported that are still syncing or failing to engage (a member
        down since the manager started, one whose caches sync after a restart) and, with a
        coordinator that splits the fleet ([`Sharded`][mcruntime.manager.coordinator.Sharded]),
        those other replicas run. What must reach every member walks this list, not the
        engaged ones: deleting a hub object's copies before its finalizer goes (a member
        left out keeps its copy for good), a roll-up that must not say "ready" while a
        member has not been reached. A member not engaged here fails such work
        ([`get_cluster`][mcruntime.manager.Manager.get_cluster] raises `ClusterNotFound`
        for it), and the reconcile runs again. With `Sharded`, a cluster another replica
        runs is such a member on this one: work that must reach every member does not fit
        a sharded manager (see Operations, sharding).

        Raises [`FleetNotKnown`][mcruntime.errors.FleetNotKnown] until the provider has
        reported the clusters it knows at start (the local cluster's controllers run
        before that: a hub reconcile right after a restart would see few members or
        none) and once the manager stops. A provider that cannot tell when it has
        reported them (no ``wait_for_initial_clusters``) counts as reported once
        ``start()`` has returned.
        """
        why = self._fleet_unknown()
        if why:
            raise FleetNotKnown(f"the clusters of the fleet are not known: {why}")
        with self._lock:
            names = {n for n in self._engagements if n}
        clusters = getattr(self.options.coordinator, "clusters", None)
        if callable(clusters):
            names.update(n for n in clusters() if n)
        return sorted(names)

    def _fleet_unknown(self) -> str:
        """Why the manager cannot name its fleet now, or "" when it can."""
        if self._stop.is_set():
            return "the manager is stopping"
        if not self._started:
            return "the manager has not started"
        if self.provider is None:
            return ""
        wait = getattr(self.provider, "wait_for_initial_clusters", None)
        reported = bool(wait(0)) if callable(wait) else self._start_waited
        if reported:
            return ""
        name = getattr(self.provider, "provider_name", None) or type(self.provider).__name__
        return f"provider={name} has not reported its initial clusters yet"

    def cluster_answering(self, name: str = LOCAL) -> bool:
        """Whether cluster ``name`` answers, as the manager's health check last heard.

        False from the probe that found it hung, unreachable or not ready until it answers
        again (what the gauge ``mcruntime_cluster_healthy`` says), and for a cluster not
        engaged. For a reconcile that reads a member's cache, which keeps the last state
        it saw: it reports such a member as unknown instead, and, having asked, runs again
        at the member's first answer (as one whose call to it failed does).
        """
        health = self.health.state(name)
        if health is None:
            return False
        answering = health.healthy
        if not answering:
            held_back.failed(name)  # the reconcile that asked waits for its answer
        return answering

    def cluster_states(self) -> dict[str, tuple[str, str | None]]:
        """Every known cluster's engagement state and last error: ``{name: (state, error)}``.

        ``state`` is an [`EngagementState`][mcruntime.manager.EngagementState] (equal to its
        string value: ``"syncing"``, ``"engaged"``, ``"failed"``).
        """
        with self._lock:
            return {n: (e.state, e.error) for n, e in self._engagements.items()}

    def _cluster_known(self, name: str) -> bool:
        if name == LOCAL:
            return self.local is not None
        with self._lock:
            return name in self._engagements

    def _run_elsewhere(self, name: str) -> bool:
        """Whether the coordinator knows ``name`` as a cluster of the fleet (one it may run
        on another replica): its optional ``knows``."""
        knows = getattr(self.options.coordinator, "knows", None)
        return bool(knows is not None and knows(name))

    def _webhooks_serve(self, name: str) -> bool:
        # a sharded fleet's webhooks reach any replica, whichever runs the cluster
        return self._cluster_known(name) or self._run_elsewhere(name)

    def engage(self, cluster_name: str, cluster: Cluster, lifetime: threading.Event) -> None:
        """Engage a provider cluster until ``lifetime`` is set (the [`Aware`][mcruntime.multicluster.Aware] contract).

        Returns at once; caches sync in the background. Engaging a name again
        with another cluster ends the earlier engagement first.
        """
        if cluster_name == LOCAL:
            raise ValueError("the empty cluster name is reserved for the local cluster")
        if cluster_name == display_name(LOCAL) and self.local is not None:
            # said, not refused: a provider's context or Secret called "local" is legal, and a
            # refusal would end its engagement; but nothing tells the two apart downstream
            log.warning(
                "cluster=local: a provider's cluster is named local, as the manager's own "
                "cluster reads in logs, metrics and /readyz: their lines and series mix, and "
                "its leaving removes the series of the manager's own; give it another name"
            )
        self._engage(cluster_name, cluster, lifetime)

    def _engage(
        self, name: str, cluster: Cluster, lifetime: threading.Event | None
    ) -> Engagement | None:
        if cluster.name != name:
            # its errors, logs and metrics say the name it is engaged under, and a request
            # failing on it waits for it by that name
            _take_name(cluster, name)
        with self._lock:
            if self._stop.is_set():
                log.info(
                    "cluster=%s not engaged: the manager is stopping",
                    display_name(name),
                    extra=log_fields(cluster=name),
                )
                return None
            old = self._engagements.get(name)
            if old is not None and old.cluster is cluster and not old.lifetime.is_set():
                return old
            eng = Engagement(name, cluster)
            if self._heap is not None:
                eng.first_attempt_over = self._heap.starting()
            self._engagements[name] = eng
        if old is not None:
            log.info(
                "cluster=%s re-engaged with a new cluster", name, extra=log_fields(cluster=name)
            )
            old.lifetime.set()
        if self.options.cache is not None:
            cluster.apply_default_cache_options(self.options.cache)
        if self.options.field_manager:
            cluster.apply_default_field_manager(self.options.field_manager)
        eng.lifetime.add_callback(eng.wake.set)
        # kinds installed through it (`install_crds`): the controllers waiting for them
        # are retried now, not at the end of their backoff
        eng.lifetime.add_callback(cluster.rest_mapper.on_reset(eng.wake.set))
        if self._engage_slots is not None:
            eng.lifetime.add_callback(self._engage_slots.wake)
        eng.lifetime.add_callback(lambda: self._teardown(eng))
        if lifetime is not None:
            eng.provider_lifetime = lifetime
            eng.cancel_link = on_end(lifetime, eng.lifetime.set, name=name)
        self.metrics.cluster_engagement("engage")
        with eng.lock:  # (its thread's end takes it: it sees itself as eng.thread)
            eng.thread = start_thread(self._run_engagement, thread_name("engage", name), eng, True)
        return eng

    def _engage_late(self, eng: Engagement) -> None:
        """Engage the controllers added since ``eng``'s attempts began: its thread's next
        attempt does (a wait for a retry ends now), or a new thread once its attempts are
        over (the cluster engaged)."""
        with eng.lock:
            if eng.lifetime.is_set() or eng.state in (
                EngagementState.FAILED,
                EngagementState.ENDED,
            ):
                return
            if eng.attempting:  # it looks for new controllers before it ends
                eng.wake.set()
                return
            eng.attempting = True
            eng.thread = start_thread(
                self._run_engagement, thread_name("engage", eng.name), eng, False
            )

    def _engage_again(self, name: str) -> None:
        """A controller let go of cluster ``name`` on its own (a source it was given could not
        start there): engage it again, as a controller added late (`_engage_late`)."""
        with self._lock:
            eng = self._engagements.get(name)
        if eng is not None:
            self._engage_late(eng)

    def _run_engagement(self, eng: Engagement, start: bool) -> None:
        """The thread of ``eng``'s attempts: the cluster's start and first attempts
        (``start``), or those of controllers added once they were over."""
        slot: EngageSlot | None = None
        try:
            if self._engage_slots is not None:
                slot = self._engage_slots.acquire(eng.lifetime.is_set)
                if slot is None:
                    return  # the cluster left while it waited for a slot
            if start:
                self._engage_and_sync(eng, slot)
            else:
                self._attempt_engagements(eng, slot)
        finally:
            if slot is not None:
                slot.release()
            eng.first_attempt_over()
            with eng.lock:
                if eng.thread is threading.current_thread():
                    eng.attempting = False  # (ended early: the next controller starts one)

    def _engage_and_sync(self, eng: Engagement, slot: EngageSlot | None) -> None:
        """Start ``eng``'s cluster and engage its controllers, retrying; ``slot`` (of
        `max_concurrent_engagements`) is given back after the first attempt to sync."""
        name = display_name(eng.name)
        try:
            eng.cluster.start()
            self.health.track(eng.name, eng.cluster)
        except Exception as exc:
            with eng.lock:
                if eng.state == EngagementState.SYNCING:
                    eng.move_to(EngagementState.FAILED)
            eng.error = f"cannot start: {exc}"
            log.error("cluster=%s cannot start: %s", name, exc, extra=log_fields(cluster=eng.name))
            return
        self._attempt_engagements(eng, slot)

    def _attempt_engagements(self, eng: Engagement, slot: EngageSlot | None) -> None:
        """Engage the controllers that want ``eng``'s started cluster and have not engaged
        it, retrying with backoff those that fail, until none is left: controllers added
        meanwhile included (looked for under ``eng.lock`` before it ends, see `_engage_late`)."""
        backoff = Backoff(initial=1.0, maximum=60.0)
        streaks = FailureStreaks(log, "manager")  # this engagement's attempts
        slow_logged: set[str] = set()  # controllers logged as slow to sync
        tried: set[Controller] = set()  # the controllers an attempt engaged or tried to
        while not eng.lifetime.is_set():
            began = time.monotonic()
            # one deadline for the attempt: discovery on a hung cluster ends with it, not
            # after a call's own deadline
            attempt_end = began + self.options.engage_sync_timeout
            errors: list[str] = []
            try:
                with call_deadline(attempt_end - time.monotonic()):
                    self._field_indexer.apply(eng.name, eng.cluster)
            except Exception as exc:
                errors.append(f"field indexes: {type(exc).__name__}: {exc}")
            pending = self._not_engaged(eng)
            tried.update(pending)

            def synced(c: Controller, errors: list[str] = errors) -> None:
                # engaged as soon as its informers synced: not after the other controllers,
                # one of which may wait for a hung group's discovery until the deadline
                with eng.lock:
                    if eng.lifetime.is_set():
                        return
                    if eng.state == EngagementState.SYNCING:
                        eng.move_to(EngagementState.ENGAGED)
                        self._count_engaged(eng, 1)
                        first = True
                    else:
                        first = False
                    if eng.state == EngagementState.ENGAGED:
                        try:
                            c.engage(eng.name, eng.cluster)
                        except Exception as exc:
                            errors.append(f"controller {c.name}: {type(exc).__name__}: {exc}")
                if first:
                    self._engaged_first(eng)

            ready, failed, not_served = self._sync(eng, pending, attempt_end, synced, slow_logged)
            errors += failed
            if slot is not None:
                slot.release()  # started and synced once: retries wait without a slot
            with eng.lock:
                if eng.lifetime.is_set():
                    return
                # Reachable (nothing to sync, or its discovery answered that it serves none
                # of the kinds yet; a controller that synced engaged it already): engaged, even
                # if a controller's kind is wrong or its CRD not installed; those controllers
                # alone are retried, and an operator can install its CRDs through `get_cluster`.
                first = eng.state == EngagementState.SYNCING and (
                    not pending or (bool(failed) and not_served == len(failed))
                )
                if first:
                    eng.move_to(EngagementState.ENGAGED)
                    self._count_engaged(eng, 1)
                eng.error = "; ".join(errors) or None
            if first:
                self._engaged_first(eng)
            eng.first_attempt_over()
            if not errors:
                streaks.recovered(eng.name, _ENGAGING)
                with eng.lock:
                    if eng.lifetime.is_set() or not self._not_engaged(eng, tried):
                        eng.attempting = False
                        return
                continue  # a controller added during the attempt: engaged now
            delay = backoff.next()
            streaks.failed(
                eng.name,
                _ENGAGING,
                f"{eng.error} (the attempt took {time.monotonic() - began:.1f}s)",
                retry=f"retrying in {delay:.1f}s",
            )
            # a kind not served yet: a CRD created meanwhile (kubectl apply) resets the
            # cluster's discovery, which wakes this wait (`on_reset` above): it retries now
            end_crd_watch = eng.cluster.rest_mapper.watch_crds() if not_served else None
            try:
                if eng.wake.wait(delay):  # (a CRD changed, the cluster answers again ...)
                    backoff.reset()
            finally:
                if end_crd_watch is not None:
                    end_crd_watch()
            eng.wake.clear()
            if eng.lifetime.is_set():
                return

    def _not_engaged(self, eng: Engagement, but: set[Controller] | None = None) -> list[Controller]:
        """The controllers (other than ``but``) that want ``eng``'s cluster and have not
        engaged it."""
        return [
            c
            for c in self.controllers
            if (but is None or c not in but)
            and c.wants(eng.name)
            and eng.name not in c.engaged_clusters()
        ]

    def _engaged_first(self, eng: Engagement) -> None:
        """What follows a cluster's first engagement: its webhook configurations, a log line."""
        if self._webhook_server is not None:
            self._webhook_server.engage(eng.name, eng.cluster)
        log.info(
            "cluster=%s engaged in %.2fs",
            display_name(eng.name),
            time.monotonic() - eng.since,
            extra=log_fields(cluster=eng.name),
        )

    def _sync(
        self,
        eng: Engagement,
        controllers: list[Controller],
        deadline: float,
        synced: Callable[[Controller], None] = lambda c: None,
        slow_logged: set[str] | None = None,
    ) -> tuple[list[Controller], list[str], int]:
        """Create and wait for each controller's informers until ``deadline`` (monotonic),
        each controller on a thread of its own (one alone: on this thread), calling
        ``synced(c)`` as each syncs: (controllers synced, errors of the others, how many of
        those are a kind the cluster does not serve, or cannot list and watch, per its
        discovery: it answered). A
        controller still syncing after `_SYNC_SLOW` seconds is logged, at warning level the
        first time (``slow_logged``: the names logged so far, this engagement's)."""
        began = time.monotonic()
        slow_logged = set() if slow_logged is None else slow_logged
        ready: list[Controller] = []
        errors: list[str] = []
        not_served = [0]
        lock = threading.Lock()
        #: each controller's informers on the cluster, once created
        informers: dict[str, list[Any]] = {}

        def one(c: Controller) -> None:
            # a controller's own cache_sync_timeout bounds its sync (controller-runtime's
            # CacheSyncTimeout), else the attempt's engage_sync_timeout
            own = c.cache_sync_timeout
            within = f"within its cache_sync_timeout ({own:g}s)" if own else ""
            try:
                if not self._sync_one(eng, c, began + own if own else deadline, informers, within):
                    return
            except Exception as exc:
                with lock:
                    # (a kind its API cannot list and watch: its discovery answered too)
                    not_served[0] += isinstance(exc, NoKindMatch | MethodNotSupported)
                    kind = "" if isinstance(exc, _NotSynced) else f"{type(exc).__name__}: "
                    errors.append(f"controller {c.name}: {kind}{exc}")
                return
            with lock:
                ready.append(c)
            synced(c)

        if len(controllers) == 1:
            one(controllers[0])
        else:
            threads = [
                (c, start_thread(one, thread_name("engage", eng.name, c.name), c))
                for c in controllers
            ]
            slow = min(deadline, began + _SYNC_SLOW)
            for c, t in threads:
                t.join(max(0.0, slow - time.monotonic()))
                if t.is_alive() and not eng.lifetime.is_set():
                    mapper = getattr(eng.cluster, "rest_mapper", None)
                    waits = mapper.discovering() if mapper is not None else []
                    # an informer whose list failed said so in its own warning, with the
                    # reason: this line only repeats it, at debug level
                    failing = [
                        inf.last_error
                        for inf in informers.get(c.name, ())
                        if getattr(inf, "last_error", None) is not None
                    ]
                    log.log(
                        logging.DEBUG if c.name in slow_logged or failing else logging.WARNING,
                        "cluster=%s controller=%s: still syncing after %.1fs, the other "
                        "controllers engage without it (%s)",
                        display_name(eng.name),
                        c.name,
                        time.monotonic() - began,
                        f"discovery of {', '.join(waits)} has had no answer"
                        if waits
                        else f"its informers' list fails: {failing[0]}"
                        if failing
                        else "its informers have not listed",
                        extra=log_fields(cluster=eng.name, controller=c.name),
                    )
                    slow_logged.add(c.name)
            for _, t in threads:
                t.join()  # (each ends by the deadline, or the cluster's lifetime)
        if eng.lifetime.is_set():
            return ready, errors, 0
        return ready, errors, not_served[0]

    def _sync_one(
        self,
        eng: Engagement,
        c: Controller,
        deadline: float,
        created: dict[str, list[Any]] | None = None,
        within: str = "",
    ) -> bool:
        """Create and wait for ``c``'s informers on ``eng``'s cluster until ``deadline``
        (put in ``created`` under ``c``'s name once created); False if the cluster's lifetime
        ended meanwhile. ``within`` says in the error what bounded the wait."""
        from mcruntime.cache import first_list_here  # the cache package loads on first use

        # the first informer lists on this thread: no hand-over before its sync
        with call_deadline(max(0.0, deadline - time.monotonic())), first_list_here():
            informers = c.informers_for(eng.name, eng.cluster)
        if created is not None:
            created[c.name] = list(informers)
        for inf in informers:
            if not inf.wait_for_sync(max(0.0, deadline - time.monotonic()), stop=eng.lifetime):
                if eng.lifetime.is_set():
                    return False
                reason = getattr(inf, "last_error", None) or self._silence(eng.name)
                raise _NotSynced(
                    f"informer {getattr(inf, 'name', inf)} not synced"
                    + (f" {within}" if within else "")
                    + (f": {reason}" if reason else "")
                )
        return True

    def _silence(self, name: str) -> str | None:
        """Why a cluster whose list has not failed yet has not answered: its health probe's
        reason when it is unhealthy (a hung API server fails no call before its deadline)."""
        health = self.health.state(name)
        if health is None or health.healthy:
            return None
        return f"the cluster is not answering ({health.reason})"

    def _count_engaged(self, eng: Engagement, delta: int) -> None:
        """Count ``eng`` into (1) or out of (-1) the engaged provider clusters (``eng.lock`` held)."""
        if eng.name == LOCAL:
            return
        with self._engaged_count_lock:
            self._engaged_count += delta
            self.metrics.set_engaged(self._engaged_count)

    def _teardown(self, eng: Engagement) -> None:
        name = display_name(eng.name)
        with eng.lock:
            was = eng.move_to(EngagementState.ENDED)
            if was == EngagementState.ENGAGED:
                self._count_engaged(eng, -1)
        with self._lock:
            if self._engagements.get(eng.name) is eng:
                del self._engagements[eng.name]
        eng.cancel_link()
        self.health.untrack(eng.name, eng.cluster)
        for c in self.controllers:
            c.disengage(eng.name, eng.cluster)
            c.resume_cluster(eng.name)  # (held back while it did not answer: no longer)
        if self._webhook_server is not None:
            hold = getattr(eng.provider_lifetime, "hold", None)
            done = hold("the removal of its webhook configurations") if callable(hold) else None
            self._webhook_server.disengage(eng.name, eng.cluster, done=done)
        if eng.name != LOCAL:
            try:
                eng.cluster.stop()
            except Exception:
                log.exception(
                    "cluster=%s stopping failed", name, extra=log_fields(cluster=eng.name)
                )
        if (
            eng.name != LOCAL
            and eng.thread is not None
            and eng.thread is not threading.current_thread()
        ):
            eng.thread.join(5.0)  # (the local one may wait for its cluster: joined once it stopped)
        self.metrics.cluster_engagement("disengage")
        if self._heap is not None:
            self._heap.thaw()  # the next full collection frees what the cluster left
        self._wait_for_reconciles_of(eng.name)
        with self._lock:
            callbacks = list(self._disengaged_callbacks)
        for cb in callbacks:
            try:
                cb(eng.name)
            except Exception:
                log.exception(
                    "cluster=%s on_cluster_disengaged callback %r failed",
                    name,
                    cb,
                    extra=log_fields(cluster=eng.name),
                )
        log.info("cluster=%s disengaged (was %s)", name, was, extra=log_fields(cluster=eng.name))

    def _wait_for_reconciles_of(self, name: str) -> None:
        """Wait for the reconciles of cluster ``name`` still running as it left (their calls
        to it were cut), up to ``_LEAVE_WAIT`` (or ``graceful_shutdown_timeout`` if shorter),
        before the callbacks forget the cluster: a reconcile ending after them would start
        again what they stopped (a thread per object) or record it anew (a metric series).
        Bounded: the thread ending the engagement may be a provider's, which the other
        clusters wait for. Not while stopping: the stop waited for every reconcile already."""
        if self._stop.is_set():
            return
        bound = min(_LEAVE_WAIT, self.options.graceful_shutdown_timeout)
        end = time.monotonic() + bound
        for c in self.controllers:
            still = c.wait_for_cluster_reconciles(name, max(0.0, end - time.monotonic()))
            if still:
                log.warning(
                    "controller=%s cluster=%s: %d reconcile%s of the cluster that left still "
                    "running after %gs (%s); its on_cluster_disengaged callbacks run now, "
                    "and what %s after them is not undone",
                    c.name,
                    display_name(name),
                    len(still),
                    "" if len(still) == 1 else "s",
                    bound,
                    ", ".join(sorted(r.key for r in still)),
                    "it does" if len(still) == 1 else "they do",
                    extra=log_fields(cluster=name, controller=c.name),
                )

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> Manager:
        """Start everything and return once running (the local cluster's caches synced, if any).

        Starting again a manager that runs returns it. One that [`stop()`][mcruntime.manager.Manager.stop]
        stopped raises RuntimeError (make a new one); one that stopped itself after starting (a
        failing runnable or provider, a lost leader election) returns, and
        [`run()`][mcruntime.manager.Manager.run] raises that failure.

        Cut short (Ctrl-C while it waits for the fleet's first clusters, in a notebook or at
        ``with mgr:``, whose ``__exit__`` then never runs), it stops what it started, then
        raises on: no thread of it goes on running.

        A manager started in another process, which this one was forked from, raises
        RuntimeError: none of its threads are in this process (make and start a manager in
        each process, after the fork); its ``stop()`` here returns at once.
        """
        elsewhere = self._started_elsewhere()
        if elsewhere is not None:
            raise RuntimeError(
                f"this Manager was started in process {elsewhere}, which this process was "
                "forked from: none of its threads (informers, workers, servers) came along, so "
                "nothing of it runs here; make and start a Manager in each process after the "
                "fork (a pre-fork server's worker: in its post-fork hook or the application's "
                "lifespan, not at import)"
            )
        with self._lock:
            if self._stop.is_set():
                if self._started and (self.fatal_error is not None or self.leader_lost):
                    # stopped by its own failure after start(): run() raises that error
                    return self
                # (started before, or not: it would run nothing)
                raise RuntimeError("a stopped manager cannot be started again: make a new Manager")
            if self._started:
                return self
            if not self._run_said_loop:
                _holds_a_running_loop("start")
            # first, before anything runs: a server that cannot listen fails start() with
            # nothing to stop (run() then raises its error; nothing hangs)
            self._servers = self._bind_servers()
            if self._webhook_server is not None:
                try:
                    self._webhook_server.bind()  # (served by its runnable, below)
                except BaseException:
                    for server in self._servers:
                        server.stop()
                    self._servers = []
                    raise
            if self.options.leader_election:
                from mcruntime.manager._leadership import ManagerLeadership

                self._leadership = ManagerLeadership(self)
            self._started = True
            self._pid = os.getpid()
            controllers = list(self._controllers)
            runnables = list(self._runnables)
        try:
            for server in self._servers:
                server.start()
            self.health.start()
            for c in controllers:
                if self._leadership is None or not self._leadership.gated(c):
                    c.start()
            local = self._engage(LOCAL, self.local, None) if self.local is not None else None
            self._local_engagement = local
            for r in runnables:
                if not self._leader_only(r):
                    self._start_runnable(r)
            if self._leadership is not None:
                self._leadership.start()
            else:
                self._elected.set()
            aware: Aware = self
            coordinator = self.options.coordinator
            if coordinator is not None:
                aware = coordinator.bind(self)
                self._start_runnable(coordinator)
            if self.provider is not None and isinstance(self.provider, ProviderRunnable):
                provider = self.provider
                self._threads.append(
                    start_thread(
                        self._run_provider,
                        thread_name("provider", None, type(provider).__name__),
                        provider,
                        aware,
                    )
                )
            # Provider clusters engage meanwhile: a slow local cluster holds up nothing else.
            deadline = time.monotonic() + self.options.engage_sync_timeout
            if local is not None and local.thread is not None:
                thread = local.thread

                def joined(seconds: float) -> bool:
                    thread.join(seconds)
                    return not thread.is_alive()

                self._wait_starting(joined, deadline)
                if local.state != EngagementState.ENGAGED and not self._cut_short():
                    # (its attempt ends at the same deadline: it may not have said why yet)
                    why = local.error or (
                        f"not synced within engage_sync_timeout "
                        f"({self.options.engage_sync_timeout:g}s); its engagement goes on"
                    )
                    log.warning(
                        "local cluster caches not synced yet (%s); continuing",
                        why,
                        extra=log_fields(cluster=LOCAL),
                    )
            self._wait_for_initial_clusters(deadline)
            self._start_waited = True
        except BaseException:
            # cut short (Ctrl-C in a notebook or at `with mgr:`, whose __exit__ then never
            # runs; a provider or coordinator that fails to start): what it started stops
            # now, instead of running (and logging) on with no owner; as astart() does
            # when cancelled
            log.info("manager start cut short: stopping what it started")
            with contextlib.suppress(Exception):  # (each failed step is logged by stop())
                self.stop()
            raise
        if not self._stop.is_set():  # (a failure while starting stopped it: logged as such)
            log.info("manager started (%d controllers)", len(controllers))
        return self

    def _started_elsewhere(self) -> int | None:
        """The process that started this manager, if it is not this one (a child forked from
        it: see `start`), else None."""
        pid = self._pid
        return pid if pid is not None and pid != os.getpid() else None

    def _provider_name(self) -> str:
        """How logs and ``/readyz`` name the provider."""
        return str(getattr(self.provider, "provider_name", None) or type(self.provider).__name__)

    def _wait_for_initial_clusters(self, deadline: float) -> None:
        """Wait (until ``deadline``) for the provider's initial clusters to be engaged.

        A provider that can tell (``wait_for_initial_clusters``) reports the
        clusters it knows at start; each of them is then waited for until it
        is engaged or shows a problem (an engagement error, a failing informer,
        failed health): a broken cluster costs the others nothing. A provider
        late to report is named, with its ``discovery_error`` when it has one.
        """
        wait = getattr(self.provider, "wait_for_initial_clusters", None)
        if not callable(wait):
            return
        if not self._wait_starting(wait, deadline):
            if not self._cut_short():
                name = self._provider_name()
                error = getattr(self.provider, "discovery_error", None)
                log.warning(
                    "provider=%s has not reported its initial clusters yet (%s); continuing: "
                    "its clusters are engaged as it reports them",
                    name,
                    f"its last error: {error}" if error else "it reports no error",
                    extra=log_fields(provider=name),
                )
            return
        with self._lock:
            initial = [e for e in self._engagements.values() if e.name]
        pending: list[Engagement] = []
        while time.monotonic() < deadline and not self._cut_short():
            pending = [
                e
                for e in initial
                if e.state == EngagementState.SYNCING and not self._engagement_troubled(e)
            ]
            if not pending:
                return
            self._stop.wait(min(_START_SLICE, max(0.0, deadline - time.monotonic())))
        if self._cut_short():
            return
        log.warning(
            "clusters still syncing after %.0fs; continuing: %s",
            self.options.engage_sync_timeout,
            ", ".join(sorted(e.name for e in pending)),
        )

    def _cut_short(self) -> bool:
        """start() stops waiting: the manager stops, or a signal came to run()."""
        return self._signalled or self._stop.is_set()

    def _wait_starting(self, done: Callable[[float], bool], deadline: float) -> bool:
        """Wait until ``done(seconds)`` (which waits up to that long) holds, at most until
        ``deadline``, and no longer once `_cut_short` holds; True once done."""
        while not self._cut_short():
            left = deadline - time.monotonic()
            if done(max(0.0, min(_START_SLICE, left))):
                return True
            if left <= 0:
                return False
        return False

    def _engagement_troubled(self, eng: Engagement) -> bool:
        if eng.error is not None:
            return True
        health = self.health.state(eng.name)
        if health is not None and not health.healthy:
            return True
        if not eng.cluster.started:
            return False
        return any(
            getattr(inf, "last_error", None) is not None
            for inf in eng.cluster.cache.all_informers()
        )

    def _run_provider(self, provider: ProviderRunnable, aware: Aware) -> None:
        try:
            provider.start(aware, self._provider_stop)
        except Exception as exc:
            if self._provider_stop.is_set():
                log.exception(
                    "provider %s failed while stopping",
                    type(provider).__name__,
                    extra=log_fields(provider=type(provider).__name__),
                )
                return
            # its clusters are gone and no more are discovered: a manager that went on would
            # look live and ready with nothing to reconcile. Stop, as controller-runtime does
            # when a runnable fails: run() raises and the process is restarted.
            log.critical(
                "provider %s failed: stopping the manager: %s",
                type(provider).__name__,
                exc,
                exc_info=exc,
                extra=log_fields(provider=type(provider).__name__),
            )
            self._fatal_error(exc)

    def elected(self) -> threading.Event:
        """An event set once this replica may do leader-only work, as Go's ``mgr.Elected()``.

        Without leader election it is set when [`start()`][mcruntime.manager.Manager.start]
        has started the controllers and runnables; with it, once this replica holds the Lease
        (and its leader-only controllers and runnables started). It is never cleared: a
        replica that loses leadership stops (``leader_lost``). ``mgr.elected().wait(timeout)``
        blocks until then.
        """
        return self._elected

    def _leader_only(self, runnable: Runnable) -> bool:
        return self._leadership is not None and needs_leader_election(runnable)

    def _start_runnable(self, runnable: Runnable) -> None:
        leader_only = self._leader_only(runnable)
        stop = self._leader_only_stop if leader_only else self._stop
        with self._lock:
            if id(runnable) in self._started_runnables:
                return
            self._started_runnables.add(id(runnable))

        def run() -> None:
            try:
                runnable.start(stop)
            except Exception as exc:
                if stop.is_set():
                    log.exception("runnable %r failed while stopping", runnable)
                    return
                # what it did (a coordinator's engagements, a user's sweep) is not done any
                # more: stop, as controller-runtime does when a runnable fails
                log.critical(
                    "runnable %r failed: stopping the manager: %s", runnable, exc, exc_info=exc
                )
                self._fatal_error(exc)

        label = runnable.name if isinstance(runnable, _RunnableFunc) else type(runnable).__name__
        thread = start_thread(run, thread_name("runnable", None, label))
        self._threads.append(thread)
        if leader_only:
            self._leader_only_threads.append(thread)

    def _leading(self) -> None:
        """This replica leads (from its leadership): start the leader-only runnables."""
        with self._lock:
            if self._stop.is_set():
                return
            self._leads = True
            waiting = [r for r in self._runnables if self._leader_only(r)]
        for r in waiting:
            self._start_runnable(r)
        self._elected.set()

    def _stop_leader_only(self, timeout: float) -> None:
        """Stop the leader-only runnables and wait for them up to ``timeout`` seconds."""
        self._leader_only_stop.set()
        deadline = time.monotonic() + timeout
        for t in list(self._leader_only_threads):
            if t is not threading.current_thread():
                t.join(max(0.0, deadline - time.monotonic()))

    def stop(self, timeout: float | None = None) -> None:
        """Stop everything: controllers finish in-flight work, clusters disengage, threads end.

        A component whose stop raises does not keep the others running: each is stopped,
        each failure logged, and then a RuntimeError names every one that failed.

        What still runs once ``graceful_shutdown_timeout`` (or ``timeout``) has passed (a
        reconcile that does not return, a runnable that ignores its stop event) is named in a
        warning and kept in `grace_period_exceeded`, which ``run()``, ``arun()`` and the end
        of a ``with`` block raise; this does not raise it.

        A stop cut short by an exception that is not an ``Exception`` (a KeyboardInterrupt,
        pytest-timeout's ``Failed``) ends at once, as asked, and is not finished:
        [`wait()`][mcruntime.manager.Manager.wait] does not report the manager stopped, and
        the next ``stop()`` resumes at the step that was cut, within what is left of the
        graceful timeout (or its own ``timeout``).

        Called by an ``async def`` reconcile, it returns at once and stops in a thread of its
        own: waiting there would hold the event loop the other async reconciles need to
        finish (the stop would always wait the whole graceful timeout for them).
        """
        elsewhere = self._started_elsewhere()
        if elsewhere is not None:
            # its steps would wait for threads of the parent's (a server's serve loop: for
            # ever) and take locks they may have held; its clients forgot the parent's
            # connections at the fork, so nothing of the parent's is touched
            if not self._done.is_set():
                log.info(
                    "manager started in process %d, which this process was forked from: "
                    "nothing of it runs here, nothing to stop",
                    elsewhere,
                )
            self._stop.set()
            self._done.set()
            return
        if Controller.in_async_reconcile():
            with self._lock:
                if self._stop.is_set():
                    return
            log.info(
                "manager stopping, asked by an async reconcile: it stops in the background "
                "(waiting on the event loop would hold the other async reconciles)"
            )
            start_thread(lambda: self.stop(timeout), thread_name("manager", None, "stop"))
            return
        with self._lock:
            self._stop.set()
            started = self._started
        if started and not self._done.is_set() and not self._run_said_loop:
            _holds_a_running_loop("stop")
        if self._stopping_thread is threading.current_thread():
            return  # called from within a step of this thread's own stop()
        # another thread's stop() runs the steps: wait for it to end; one that was cut
        # (KeyboardInterrupt, pytest-timeout) lets go of the lock with _done unset
        if not self._stopping.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return
        try:
            if self._done.is_set():
                return
            self._stopping_thread = threading.current_thread()
            self._run_stop(started, timeout)
        finally:
            self._stopping_thread = None
            self._stopping.release()

    def _run_stop(self, started: bool, timeout: float | None) -> None:
        """The steps of stop(), run by one thread at a time.

        An exception that is not an ``Exception`` (KeyboardInterrupt, pytest-timeout's
        ``Failed``) cuts the stop at once, as the caller asked; the steps that ended are
        counted, and the next stop() resumes at the one that was cut, within what is left
        of the first's graceful timeout (or its own ``timeout``). Until the last step has
        ended, wait() does not report the manager stopped.
        """
        if self._stop_deadline is None or timeout is not None:
            timeout = self.options.graceful_shutdown_timeout if timeout is None else timeout
            self._stop_deadline = time.monotonic() + timeout
            self._stop_grace = timeout
        deadline = self._stop_deadline
        # every component is stopped even when another's stop raises (a controller whose
        # event loop a reconcile closed): one failure must not leave the provider, the
        # informers and the servers running; the failures are raised at the end
        failed = self._stop_failed
        seen: dict[str, int] = {}

        def step(what: str, fn: Callable[[], object]) -> None:
            # keyed by name, not position: a cluster that left meanwhile drops out
            key = (what, seen.setdefault(what, 0))
            seen[what] += 1
            if key in self._stop_steps_done:
                return  # ended in a stop() that was cut later
            try:
                fn()
            except Exception as exc:
                failed.append((what, exc))
                log.error("stopping %s failed: %s: %s", what, type(exc).__name__, exc, exc_info=exc)
            self._stop_steps_done.add(key)

        def left() -> float:
            return max(0.1, deadline - time.monotonic())

        def join_threads() -> None:
            for t in self._threads:
                if t is not threading.current_thread():  # a runnable may stop its manager
                    t.join(left())

        finished = False
        try:
            if not started:
                finished = True
                return
            with self._lock:
                clusters = {id(e.cluster): e.cluster for e in self._engagements.values()}
            if self.local is not None:
                clusters[id(self.local)] = self.local
            for cluster in clusters.values():
                # in-flight reads of unsynced kinds end now
                step(f"cluster {display_name(cluster.name)}", cluster.cache.cancel_sync_waits)
            for c in self.controllers:
                step(f"controller {c.name}", c.shut_down)  # no reconcile starts meanwhile
            # a reconcile waiting on a cluster that stopped answering is cut by the probe's
            # deadline, not waited for until the graceful timeout
            step("the cluster health check", self.health.probe_all)
            for c in self.controllers:
                step(f"controller {c.name}", functools.partial(c.stop, left()))
            leadership = self._leadership
            if leadership is not None:
                step("the leader-only runnables", lambda: self._stop_leader_only(left()))
                # only now that leader-only work has stopped may the next leader start; what
                # still runs past the graceful timeout keeps the Lease until it expires
                step(
                    "the leader election",
                    lambda: leadership.release(left(), running=self._leader_work_running()),
                )
            recorders = self._recorders
            if recorders is not None:
                # what the last reconciles recorded is written while the clusters are
                # still engaged (their leave drops their queues)
                step("the event recorders", lambda: recorders.flush(left()))
            with self._lock:
                engagements = list(self._engagements.values())
            for eng in engagements:
                # torn down here, before the provider stops: one that owns its clusters'
                # servers (embedded) keeps them up meanwhile
                step(f"cluster {display_name(eng.name)}", eng.lifetime.set)
            step("the provider", self._provider_stop.set)
            step("the manager's threads", join_threads)
            if recorders is not None:
                step("the event recorders", lambda: recorders.stop(left()))
            if self.local is not None:
                # cuts what the local engagement still waits for (a first list)
                step("the local cluster", self.local.stop)
                local = self._local_engagement
                if local is not None and local.thread not in (None, threading.current_thread()):
                    local_thread = local.thread
                    step("the local cluster", lambda: local_thread.join(left()))
            # after the clusters: a probe in flight is cut, not waited for
            step("the cluster health check", self.health.stop)
            for server in self._servers:
                step(f"the {server.name} server", server.stop)
            finished = True
            # a runnable may stop its manager while start() is still starting threads (the
            # provider's): one added after the join above has its stop event set and ends at
            # once, so it is joined too before anything is named still running
            for t in list(self._threads):
                if t is not threading.current_thread():
                    t.join(max(0.0, deadline - time.monotonic()))
            alive = [
                t for t in self._threads if t.is_alive() and t is not threading.current_thread()
            ]
            if alive:
                log.warning("threads still running after stop: %s", described(alive))
            still = self._still_running(alive)
            if still and self._stop_grace > 0:
                # (0: asked not to wait, as Go's GracefulShutdownTimeout 0, which is no error)
                self.grace_period_exceeded = GracePeriodExceeded(self._stop_grace, still)
            if failed:
                raise RuntimeError(
                    "manager stopped, but stopping failed for "
                    + "; ".join(f"{w}: {type(e).__name__}: {e}" for w, e in failed)
                ) from failed[0][1]
            log.info("manager stopped")
        finally:
            if finished:
                if self._heap is not None:
                    self._heap.thaw()
                self._done.set()
            else:
                log.warning(
                    "manager stop cut short (%d steps done): stop() again finishes it",
                    len(self._stop_steps_done),
                )

    def _still_running(self, alive: list[threading.Thread]) -> tuple[str, ...]:
        """What still runs at the end of a stop, for `GracePeriodExceeded`: the reconciles
        in flight (not the one stopping the manager) and the manager's threads ``alive``
        (runnables, the provider, the coordinator) other than the controllers' workers."""
        me = threading.current_thread()
        found: list[str] = []
        workers = set()
        for c in self.controllers:
            for r in c.in_flight_reconciles():
                if r.thread == me.name:
                    continue
                workers.add(r.thread)
                req = r.request
                key = f"{req.namespace}/{req.name}" if req.namespace else req.name
                found.append(
                    f"reconcile {key} of controller {c.name} in cluster "
                    f"{display_name(req.cluster_name)}, for {r.seconds:.1f}s"
                )
        found.extend(f"thread {t.name}" for t in alive if t.name not in workers)
        return tuple(found)

    def _leader_work_running(self) -> str | None:
        """The leader-only work still running once stop() waited for it (a reconcile past the
        graceful timeout), or None; a reconcile that is stopping the manager is not counted."""
        leadership = self._leadership
        if leadership is None:
            return None
        me = threading.current_thread()
        parts = []
        for c in self.controllers:
            if leadership.gated(c):
                n = sum(r.thread != me.name for r in c.in_flight_reconciles())
                if n:
                    parts.append(f"{n} reconcile{'' if n == 1 else 's'} of controller {c.name}")
        alive = [t for t in self._leader_only_threads if t.is_alive() and t is not me]
        if alive:
            parts.append(f"the leader-only runnables {described(alive)}")
        return "; ".join(parts) or None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the manager has stopped; False on timeout."""
        return self._done.wait(timeout)

    def run(self) -> None:
        """Start, block until SIGINT/SIGTERM (or [`stop()`][mcruntime.manager.Manager.stop]), then stop cleanly.

        A second signal while it stops (a reconcile that does not finish within
        ``graceful_shutdown_timeout``, pressing Ctrl-C again) ends the process at once with
        exit status 1, as controller-runtime's signal handler does; its warning is flushed
        through every logging handler (a ``QueueHandler``'s queue drained, up to half a
        second) and written to stderr as well.

        Raises, once stopped, the error that stopped the manager on its own (``fatal_error``,
        `LeaderElectionLost`), else
        [`GracePeriodExceeded`][mcruntime.errors.GracePeriodExceeded] when the stop left a
        reconcile or a runnable running past ``graceful_shutdown_timeout``, as
        controller-runtime's ``Start`` returns ``failed waiting for all runnables to end
        within grace period``: the process does not exit as if it had stopped cleanly.

        From an asyncio program, await [`arun()`][mcruntime.manager.Manager.arun] instead:
        this holds the event loop, and ``await asyncio.to_thread(mgr.run)`` is not stopped
        by a cancel (Ctrl-C under ``asyncio.run`` then waits for its thread for ever).
        """
        requested: list[int] = []  # signal numbers
        previous: dict[signal.Signals, Any] = {}

        def on_signal(signum: int, _frame: object) -> None:
            if requested:
                _exit_at_once(signum)
            requested.append(signum)
            self._signalled = True  # start(), if still waiting for clusters, returns now

        self._run_said_loop = _holds_a_running_loop("run")
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, on_signal)
        try:
            self.start()
            while not requested and not self._stop.wait(0.2):
                pass
            if requested:
                log.info("signal %s received, stopping", signal.Signals(requested[0]).name)
        finally:
            if previous:
                self._stop_awake_to_signals()
            else:
                self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self._raise_end_error()

    def _stop_awake_to_signals(self) -> None:
        """stop() in a helper thread while the main thread wakes every 0.2 s: a signal that
        another thread happens to receive runs its Python handler (a second Ctrl-C) only
        when the main thread next runs, not when a join of a hung reconcile times out."""
        failed: list[BaseException] = []

        def stop() -> None:
            try:
                self.stop()
            except BaseException as exc:
                failed.append(exc)

        stopping = start_thread(stop, thread_name("manager", None, "stop"))
        while stopping.is_alive():
            stopping.join(0.2)
        if failed:
            raise failed[0]

    def __enter__(self) -> Manager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        """[`stop()`][mcruntime.manager.Manager.stop], then raise the error that stopped the
        manager on its own, or the stop's
        [`GracePeriodExceeded`][mcruntime.errors.GracePeriodExceeded], as
        [`run()`][mcruntime.manager.Manager.run] does."""
        self.stop()
        self._raise_fatal_error(exc)

    def _raise_end_error(self) -> None:
        """At the end of `run()` or `arun()`: raise `LeaderElectionLost` after a lost
        election, else `fatal_error`, else `grace_period_exceeded` (the stop left work
        running); the first of them raised notes the overrun, if there was one."""
        if self.leader_lost:
            raise self._noting_overrun(
                LeaderElectionLost("this replica lost its leader election and stopped")
            )
        if self.fatal_error is not None:
            raise self._noting_overrun(self.fatal_error)
        if self.grace_period_exceeded is not None:
            raise self.grace_period_exceeded

    def _noting_overrun(self, exc: BaseException) -> BaseException:
        """``exc``, with a note naming `grace_period_exceeded` if the stop overran."""
        overran = self.grace_period_exceeded
        if overran is not None and exc is not overran:
            note = f"(and the manager's stop then {overran})"
            if note not in getattr(exc, "__notes__", ()):
                exc.add_note(note)
        return exc

    def _raise_fatal_error(self, exc_info: tuple[object, ...]) -> None:
        """At the end of a ``with`` block: raise `fatal_error` (a reconciler's exception with
        ``recover_panic=False``, its ``sys.exit()``, a runnable's error), or
        `LeaderElectionLost` after a lost election, as `run()` does and kopf's
        ``KopfRunner`` re-raises the operator's: a test inside the block would otherwise see
        only a wait that timed out, or pass, and a replica's process would exit 0. When the
        block raised an error itself, it goes on, with a note naming the fatal one."""
        fatal = self.fatal_error
        if fatal is None and self.leader_lost:
            fatal = LeaderElectionLost("this replica lost its leader election and stopped")
        if fatal is None:
            fatal = self.grace_period_exceeded
        exc = exc_info[1] if len(exc_info) > 1 else None
        if fatal is None or exc is fatal:
            return
        if exc is None:
            raise self._noting_overrun(fatal)
        if isinstance(exc, Exception):
            exc.add_note(
                f"(the manager had stopped on an error of its own: {describe_error(fatal)})"
                if fatal is not self.grace_period_exceeded
                else f"(the manager's stop then {describe_error(fatal)})"
            )

    # -- from an asyncio application ---------------------------------------------------

    async def astart(self) -> Manager:
        """[`start()`][mcruntime.manager.Manager.start] as a coroutine, for a manager embedded
        in an asyncio application (a FastAPI lifespan, an aiohttp ``on_startup``): the start
        runs in a thread of its own while the application's event loop goes on serving
        (``start()`` called there holds it until the fleet's first clusters engage).

        Cancelled (the application's start-up cut short), it stops the manager, waits for
        that stop, and is cancelled: nothing it started keeps running.
        """
        try:
            await off_the_loop(self.start, "start")
        except asyncio.CancelledError:
            await off_the_loop(self.stop, "stop", finish=True)
            raise
        return self

    async def astop(self, timeout: float | None = None) -> None:
        """[`stop()`][mcruntime.manager.Manager.stop] as a coroutine: the stop runs in a thread
        of its own while the application's event loop goes on serving. ``stop()`` called on
        that loop holds it, and an ``async def`` reconcile awaiting work handed to the loop
        (``asyncio.run_coroutine_threadsafe(..., app_loop)``) can then never finish: the stop
        would wait the whole ``graceful_shutdown_timeout`` for it.

        Cancelled, it still waits for the stop to end (bounded by the graceful timeout, or
        ``timeout``), then is cancelled: the application does not exit half-stopped; a
        second cancel no longer waits. Awaited by an ``async def`` reconcile, it returns at
        once and the manager stops in the background, as ``stop()`` does there.
        """
        if Controller.in_async_reconcile():
            self.stop(timeout)  # (returns at once: the stop runs in a thread of its own)
            return
        await off_the_loop(functools.partial(self.stop, timeout), "stop", finish=True)

    async def arun(self) -> None:
        """[`run()`][mcruntime.manager.Manager.run] as a coroutine: start, await the end of the
        manager, then stop; the event loop goes on serving the application throughout.

        The manager's end is [`stop()`][mcruntime.manager.Manager.stop] (by anyone), its own
        failure (raised here, as ``run()`` raises it), a SIGTERM, or the cancel of the task
        awaiting this (``asyncio.run`` cancels its main task at Ctrl-C; a ``TaskGroup``
        sibling's failure): the manager is then stopped, the stop awaited, and the
        ``CancelledError`` raised on. SIGTERM (what Kubernetes sends a pod) is handled only
        when nothing else handles it (its handler is the default) and this runs in the main
        thread: a server that handles signals itself (uvicorn) stops the manager through its
        shutdown (``await mgr.astop()``). A second SIGTERM while it stops ends the process
        at once with exit status 1, as with ``run()``.
        """
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        requested: list[int] = []

        def end() -> None:
            if not ended.done():
                ended.set_result(None)

        def on_signal(signum: int) -> None:
            if requested:
                _exit_at_once(signum)
            requested.append(signum)
            self._signalled = True  # start(), if still waiting for clusters, returns now
            log.info("signal %s received, stopping", signal.Signals(signum).name)
            end()

        handled = _handle_sigterm(loop, on_signal)

        def wait_for_the_stop() -> None:
            self._stop.wait()
            with contextlib.suppress(RuntimeError):  # (the loop closed)
                loop.call_soon_threadsafe(end)

        try:
            await self.astart()
            # ends with the manager: the stop below sets the event in every case
            start_thread(wait_for_the_stop, thread_name("manager", None, "arun"))
            await ended
        finally:
            try:
                await self.astop()
            finally:
                for sig in handled:
                    loop.remove_signal_handler(sig)
        self._raise_end_error()

    async def __aenter__(self) -> Manager:
        return await self.astart()

    async def __aexit__(self, *exc: object) -> None:
        """[`astop()`][mcruntime.manager.Manager.astop], then raise the error that stopped the
        manager on its own, as [`arun()`][mcruntime.manager.Manager.arun] does."""
        await self.astop()
        self._raise_fatal_error(exc)

    def __repr__(self) -> str:
        # `is not None`: a provider is a collection of clusters, falsy while it has none
        provider = None if self.provider is None else type(self.provider).__name__
        return f"Manager(local={self.local is not None}, provider={provider})"


def _handle_sigterm(
    loop: asyncio.AbstractEventLoop, handler: Callable[[int], None]
) -> list[signal.Signals]:
    """Have ``loop`` call ``handler`` at SIGTERM, if nothing else handles it (its handler is
    the default: the process would end without a stop) and this is the main thread; the
    signals so handled (for ``loop.remove_signal_handler``)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return []
    try:
        loop.add_signal_handler(signal.SIGTERM, handler, signal.SIGTERM)
    except (NotImplementedError, RuntimeError):  # (not on Windows, nor on every loop)
        return []
    return [signal.SIGTERM]


def _holds_a_running_loop(what: str) -> bool:
    """Warn that ``what`` (a blocking step of the manager) is called on a thread that runs an
    asyncio event loop, which it holds meanwhile; an ``async def`` reconcile's stop is not
    (it stops in a thread of its own). Whether it warned."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    if Controller.in_async_reconcile():
        return False
    log.warning(
        "Manager.%s() called on a running asyncio event loop: the loop serves nothing until it "
        "returns, and a reconcile awaiting work handed to that loop cannot finish meanwhile "
        "(a stop then waits its whole graceful_shutdown_timeout): await mgr.a%s() instead",
        what,
        what,
    )
    return True


def _exit_at_once(signum: int) -> None:
    """A second signal while the manager stops: end the process now, exit status 1.

    The warning is written straight to stderr too (unless a handler on the way writes
    there already), and every handler is flushed, a ``QueueHandler``'s queue given up to
    half a second to drain: with the logging cookbook's QueueHandler/QueueListener
    set-up, the record would otherwise still be in the queue at ``os._exit``.
    """
    message = (
        f"signal {signal.Signals(signum).name} received again while stopping: "
        "exiting at once (exit status 1)"
    )
    log.warning("%s", message)
    if not _logged_to_stderr(log, logging.WARNING):
        with contextlib.suppress(Exception):
            sys.stderr.write(f"WARNING {log.name}: {message}\n")
    handlers = [ref() for ref in list(getattr(logging, "_handlerList", []))]
    _drain_queues([h for h in handlers if isinstance(h, logging.handlers.QueueHandler)], 0.5)
    for handler in handlers:
        if handler is not None:
            with contextlib.suppress(Exception):
                handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(1)


def _logged_to_stderr(logger: logging.Logger, level: int) -> bool:
    """Whether a record of ``level`` from ``logger`` is written to stderr by a handler on
    its way up (or by ``logging.lastResort``, when there is none)."""
    found = False
    current: logging.Logger | None = logger
    while current is not None:
        for h in current.handlers:
            found = True
            stream = getattr(h, "stream", None)
            if stream in (sys.stderr, sys.__stderr__) and level >= h.level:
                return True
        current = current.parent if current.propagate else None
    last = logging.lastResort
    return not found and last is not None and level >= last.level


def _drain_queues(handlers: list[logging.handlers.QueueHandler], timeout: float) -> None:
    """Wait up to ``timeout`` seconds for the queues' listeners to handle what is queued."""
    deadline = time.monotonic() + timeout
    for h in handlers:
        q: Any = h.queue
        while time.monotonic() < deadline:
            # a queue.Queue counts the records its listener has not finished handling
            pending = getattr(q, "unfinished_tasks", None)
            done = pending == 0 if pending is not None else q.empty()
            if done:
                break
            time.sleep(0.01)  # (no event says a listener finished a record)


def _informer_failure(error: BaseException) -> str:
    """How ``/readyz`` words an engaged cluster's failing informer: a cluster that answers and
    refuses (403, 401: its credentials) is no unreachable one."""
    what = "refused" if isinstance(error, (Forbidden, Unauthorized)) else "unreachable"
    return f"{what}: {error}"


def _take_name(cluster: Cluster, name: str) -> None:
    """Rename ``cluster`` to the name it is engaged under; one started already (under
    another name, by its user) keeps its name, said once."""
    try:
        cluster.rename(name)
    except RuntimeError:
        log.warning(
            "cluster=%s is engaged under this name but was started as %s before: its errors "
            "and threads name it %s; give a provider an unstarted Cluster",
            display_name(name),
            display_name(cluster.name),
            display_name(cluster.name),
            extra=log_fields(cluster=name),
        )
