from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import math
import operator
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any

from mcruntime import _held_back as held_back
from mcruntime._callables import one_argument_mismatch, takes_go_ctx
from mcruntime._lifetime import on_end
from mcruntime._local import display_name
from mcruntime._logfields import log_fields, new_reconcile_id
from mcruntime._streak import FailureStreaks, describe_error, error_text
from mcruntime._threads import described, start_thread
from mcruntime.client import deadline, remaining
from mcruntime.controller._executor import LoopThreads
from mcruntime.controller._options import (
    DEFAULT_CLUSTER_NOT_FOUND_RETRIES,
    DEFAULT_MAX_CONCURRENT_RECONCILES,
    ControllerOptions,
    EngageOptions,
    default_per_cluster_limit,
)
from mcruntime.controller._waiting import Waiting
from mcruntime.errors import (
    AlreadyExists,
    ClusterLeft,
    ClusterNotFound,
    Conflict,
    DeadlineExceeded,
    Forbidden,
    MCRuntimeError,
    NoKindMatch,
    ServerError,
    Unauthorized,
    Unreachable,
)
from mcruntime.reconcile import (
    Reconciler,
    ReconcilerFunc,
    Request,
    RequeueAfter,
    Result,
    TerminalError,
    current_request,
    reconciling,
)
from mcruntime.workqueue import (
    NOTHING,
    Queue,
    ShutDown,
)

if TYPE_CHECKING:
    from mcruntime.cache import Informer
    from mcruntime.cluster import Cluster
    from mcruntime.metrics import Metrics
    from mcruntime.source import Source, SourceHandle

log = logging.getLogger("mcruntime.controller")

#: the worker thread running the current reconcile (also seen inside async reconcilers),
#: so a reconciler that stops its controller is not waited for
_worker_of_reconcile: ContextVar[threading.Thread | None] = ContextVar(
    "mcruntime_controller_worker", default=None
)

#: the id of the reconcile the worker runs now (None between reconciles): its lines and the
#: reconciler's (`reconciling`, read by `request_logger`) carry it
_reconcile_id: ContextVar[str | None] = ContextVar("mcruntime_reconcile_id", default=None)

#: the queue's fair key; a C-level getter, as it runs on every add
_cluster_of = operator.attrgetter("cluster_name")


@dataclass(frozen=True)
class ReconcileInFlight:
    """A reconcile running now ([`Controller.in_flight_reconciles`][mcruntime.controller.Controller.in_flight_reconciles])."""

    request: Request
    #: how long it has been running
    seconds: float
    #: the name of the worker thread running it
    thread: str
    #: where it is: the reconciler's frames, outermost first, each formatted as a traceback
    #: line and its source (an ``async def`` reconciler's chain of awaits)
    stack: list[str]


def _reconciler_frames(frame: FrameType) -> list[str]:
    """The frames of a worker's stack below the controller's call of the reconciler."""
    chain: list[FrameType] = []
    f: FrameType | None = frame
    while f is not None:
        chain.append(f)
        f = f.f_back
    chain.reverse()
    for i, f in enumerate(chain):
        if f.f_code is _CALL_RECONCILER:
            chain = chain[i + 1 :]
            break
    return traceback.format_list(traceback.StackSummary.extract((f, f.f_lineno) for f in chain))


def _coroutine_frames(aw: Any) -> list[str]:
    """The frames of a coroutine and of what it awaits, down to the innermost."""
    frames: list[tuple[FrameType, int]] = []
    seen = 0
    while aw is not None and seen < 100:  # (a chain of awaits is short; a cycle is not)
        frame = getattr(aw, "cr_frame", None) or getattr(aw, "gi_frame", None)
        if frame is None:
            break
        frames.append((frame, frame.f_lineno))
        aw = getattr(aw, "cr_await", None) or getattr(aw, "gi_yieldfrom", None)
        seen += 1
    return traceback.format_list(traceback.StackSummary.extract(frames))


def _await_point(aw: Any) -> str:
    """Where a coroutine waits: its innermost frame outside asyncio (``asyncio.sleep``'s
    is no news), ``file:line in function``."""
    frame = None
    seen = 0
    while aw is not None and seen < 100:
        f = getattr(aw, "cr_frame", None) or getattr(aw, "gi_frame", None)
        if f is None:
            break
        if frame is None or not f.f_code.co_filename.startswith(_ASYNCIO_DIR):
            frame = f
        aw = getattr(aw, "cr_await", None) or getattr(aw, "gi_yieldfrom", None)
        seen += 1
    if frame is None:
        return ""
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


@dataclass
class _Engaged:
    cluster: Cluster | None
    handles: list[SourceHandle] = field(default_factory=list)
    cancel: Callable[[], None] = lambda: None


class Controller:
    """Reconciles requests from its sources with ``reconciler``, on N worker threads.

    Sources are started per engaged cluster ([`engage()`][mcruntime.controller.Controller.engage]); requests carry
    the cluster's name. The same request never runs on two workers at once.
    Exceptions are logged with the request and retried with backoff;
    [`TerminalError`][mcruntime.TerminalError] is not retried; ``Result(requeue_after=s)``
    re-runs after ``s`` seconds.
    """

    def __init__(
        self,
        name: str,
        reconciler: Reconciler | ReconcilerFunc,
        *,
        options: ControllerOptions | None = None,
        engage_options: EngageOptions | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if not name:
            raise ValueError("a controller needs a name")
        _check_reconciler(name, reconciler)
        options = options or ControllerOptions()
        _check_numbers(name, options)
        self.name = name
        self.reconciler = reconciler
        self.options = options
        self.engage_options = engage_options or EngageOptions()
        self.max_concurrent_reconciles = (
            options.max_concurrent_reconciles or DEFAULT_MAX_CONCURRENT_RECONCILES
        )
        #: how long its informers may take to sync on a cluster (seconds) before the attempt
        #: to engage it fails and is retried; None: the manager's ``engage_sync_timeout``
        self.cache_sync_timeout: float | None = options.cache_sync_timeout or None
        per_cluster = options.max_concurrent_reconciles_per_cluster
        #: workers one cluster may hold while more than one cluster is engaged
        self.max_concurrent_reconciles_per_cluster = min(
            self.max_concurrent_reconciles,
            per_cluster or default_per_cluster_limit(self.max_concurrent_reconciles),
        )
        self.reconcile_timeout = options.reconcile_timeout
        self._overruns = FailureStreaks(
            log, f"controller={name} reconcile_timeout", log_fields(controller=name)
        )
        #: async reconciles that held the event loop (per cluster of the request)
        self._loop_holds = FailureStreaks(
            log, f"controller={name} event loop", log_fields(controller=name)
        )
        self._loop_watch: threading.Thread | None = None
        self._loop_watch_stop = threading.Event()
        #: reconciles that failed because a cluster refused or could not be reached, per
        #: cluster of the request; ``_refusing`` (read without a lock on the success path)
        #: holds the requests that failed so in each cluster with a streak
        self._refusals = FailureStreaks(log, f"controller={name}", log_fields(controller=name))
        self._refusing: dict[str, set[Request]] = {}
        self._refusing_lock = threading.Lock()
        #: the error (type and message) each request failed with last, while it keeps failing
        #: with it: its traceback was logged at the first failure, the retries say less
        self._failing: dict[Request, str] = {}
        self._failing_lock = threading.Lock()
        #: the raced writes (409) in a row of each request while they go on (`_failing_lock`):
        #: the retries said at INFO are counted by them, not by its retries of other failures
        self._races: dict[Request, int] = {}
        #: the message of the RequeueAfter each request raised last, while it keeps raising it
        #: (`_failing_lock`): said at INFO once, the same again at DEBUG
        self._requeue_messages: dict[Request, str] = {}
        #: requests that failed on clusters not answering, until one answers (`_lock`)
        self._waiting: Waiting[Request] = Waiting()
        self.recover_panic = options.recover_panic is not False
        self.need_leader_election = options.need_leader_election is not False
        self._metrics = metrics
        priorities = options.use_priority_queue is not False
        self.queue: Queue = Queue(
            name,
            rate_limiter=options.rate_limiter,  # (None: the queue's default for ``priorities``)
            fair_key=_cluster_of,
            metrics=metrics.queue_metrics(name) if metrics else None,
            priorities=priorities,
        )
        self.sources: list[Source] = []
        self._lock = threading.RLock()
        #: worker thread id -> the request it took last (held by the queue while it runs)
        self._running: dict[int, Request] = {}
        #: worker thread id -> the coroutine of the ``async def`` reconcile it waits for
        self._awaiting: dict[int, Any] = {}
        #: worker thread id -> its ``async def`` reconcile on the loop (cancelled by
        #: `disengage` when its cluster leaves)
        self._runs: dict[int, _AsyncRun] = {}
        self._engaged: dict[str, _Engaged] = {}
        #: per cluster, the queued requests the stop dropped (`shut_down`), said as it is
        #: disengaged
        self._dropped_at_stop: dict[str, int] = {}
        self._workers: list[threading.Thread] = []
        self._started = False
        self._stopped = False
        self._async = _is_async(reconciler)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        #: the threads of the loop's blocking calls (``asyncio.to_thread``)
        self._loop_threads: LoopThreads | None = None
        self._has_provider = False
        self.cluster_known: Callable[[str], bool] = lambda name: False
        #: called with the exception when a reconciler raises ``SystemExit`` or
        #: ``KeyboardInterrupt``, or any exception with ``recover_panic`` off (or when a
        #: worker cannot go on); the manager stops itself (and ``run()`` re-raises it), as a
        #: crash would
        self.on_fatal: Callable[[BaseException], None] = lambda exc: None
        #: called with the request and the error after each reconcile that failed and is
        #: retried (not the first retries of a raced write) or terminal, in the worker; what
        #: it raises is logged, never retried. The builder posts ``failure_events`` by it
        self.on_failure: Callable[[Request, BaseException], None] | None = None
        #: called with the name of a cluster this controller let go of because a source
        #: `watch` added could not start there (a kind it does not serve yet): its manager
        #: engages it again, as it engages a cluster, retrying with backoff. None (a
        #: controller without a manager): `watch` raises that error instead
        self.engage_again: Callable[[str], None] | None = None
        if metrics:
            metrics.controller_started(name, self.max_concurrent_reconciles)
            metrics.register_queue(name, self.queue)
            metrics.register_waiting(name, self._waiting_counts)

    # -- wiring ---------------------------------------------------------------

    def watch(self, source: Source) -> None:
        """Add a source; it starts on every cluster engaged now or later that it accepts.

        On a cluster engaged already where it cannot start (a kind the cluster does not serve
        yet), the controller lets go of the cluster, says so in a warning, and its manager
        engages it again as it engages any cluster (each source's informers synced first,
        retried with backoff, a CRD installed meanwhile retried at once); the other clusters
        get the source as usual. A controller without a manager raises that error.
        """
        with self._lock:
            self.sources.append(source)
            engaged = list(self._engaged.items())
        for name, eng in engaged:
            if not self._accepts(source, name):
                continue
            try:
                handle = source.start(name, eng.cluster, self.queue)
            except Exception as exc:
                again = self.engage_again
                if again is None:
                    raise
                log.warning(
                    "controller=%s cluster=%s: the source %r added by watch() cannot start "
                    "there: %s; the controller lets go of the cluster and engages it again, "
                    "retrying with backoff",
                    self.name,
                    display_name(name),
                    source,
                    describe_error(exc),
                    extra=self._fields(cluster=name),
                )
                self.disengage(name, eng.cluster)
                again(name)
                continue
            with self._lock:
                eng.handles.append(handle)

    def wants(self, cluster_name: str) -> bool:
        """Whether this controller engages ``cluster_name`` (per its engage options).

        A ``cluster_filter`` that raises vetoes the cluster: its error is logged (once per
        streak of its failures for that cluster, naming the controller and the cluster, with
        its traceback), and the other controllers engage the cluster as usual.
        """
        opts = self.engage_options
        if cluster_name == "":
            if opts.local_cluster is not None:
                return opts.local_cluster
            return not self._has_provider
        if opts.provider_clusters is False:
            return False
        if opts.cluster_filter is None:
            return True
        return self._filtered(opts.cluster_filter, cluster_name, _CLUSTER_FILTER)

    def _accepts(self, source: Source, cluster_name: str) -> bool:
        """``source.accepts(cluster_name)``; one that raises (its ``cluster_filter``) does not
        accept the cluster, said as `wants` says a failing filter."""
        return self._filtered(source.accepts, cluster_name, f"the cluster_filter of {source!r}")

    def _filtered(self, accepts: Callable[[str], Any], cluster_name: str, what: str) -> bool:
        """``accepts(cluster_name)`` of a user's filter; False, logged, when it raises."""
        try:
            accepted = bool(accepts(cluster_name))
        except Exception as exc:
            self._refusals.failed(
                cluster_name,
                what,
                exc,
                retry="this controller does not engage the cluster (the others do)",
                traceback=exc,
            )
            return False
        if self._refusals.failures((cluster_name, what)):
            self._refusals.recovered(cluster_name, what)
        return accepted

    def informers_for(self, cluster_name: str, cluster: Cluster | None) -> list[Informer]:
        """The informers this controller's sources need on ``cluster`` (created, not awaited)."""
        out: list[Informer] = []
        for src in list(self.sources):
            if self._accepts(src, cluster_name):
                out.extend(src.informers(cluster))
        return out

    # -- engagement -------------------------------------------------------------

    def engage(
        self, cluster_name: str, cluster: Cluster | None, lifetime: threading.Event | None = None
    ) -> None:
        """Start this controller's sources on ``cluster`` until ``lifetime`` is set.

        Engaging a name again with another cluster replaces the engagement.
        """
        if not self.wants(cluster_name):
            return
        with self._lock:
            if self._stopped:
                return
            old = self._engaged.get(cluster_name)
            if old is not None and old.cluster is cluster:
                return
        if old is not None:
            self.disengage(cluster_name)
        eng = _Engaged(cluster)
        with self._lock:
            self._engaged[cluster_name] = eng
            sources = [s for s in self.sources if self._accepts(s, cluster_name)]
            self._update_cluster_limit()
        if self._metrics:  # before anything can disengage it (which forgets its series)
            self._metrics.cluster_engaged(self.name, cluster_name)
        try:
            for src in sources:
                eng.handles.append(src.start(cluster_name, cluster, self.queue))
        except Exception:
            self.disengage(cluster_name, cluster)
            raise
        if lifetime is not None:
            eng.cancel = on_end(
                lifetime,
                lambda: self.disengage(cluster_name, cluster),
                name=f"{self.name}/{cluster_name}",
            )
        log.info(
            "controller=%s cluster=%s engaged",
            self.name,
            display_name(cluster_name),
            extra=self._fields(cluster=cluster_name),
        )

    def disengage(self, cluster_name: str, cluster: Cluster | None = None) -> None:
        """Stop the sources of ``cluster_name`` and drop its queued requests.

        With ``cluster`` given, only that engagement ends (a newer one stays).
        In-flight ``def`` reconciles finish (the cluster's leave cuts their calls to it),
        ``async def`` ones are cancelled; their requests are not re-queued.
        """
        with self._lock:
            eng = self._engaged.get(cluster_name)
            if eng is not None and cluster is not None and eng.cluster is not cluster:
                return
            if eng is not None:
                del self._engaged[cluster_name]
                self._update_cluster_limit()
                self._waiting.drop(lambda r: r.cluster_name == cluster_name)
                # what failed on it: retried as before it waited (it left: the retry says so)
                for req, priority in self._waiting.release(cluster_name):
                    if not self.queue.shutting_down:  # (its own cluster's: dropped above)
                        self.queue.add_rate_limited(req, priority=priority)
        self._forget_filters(cluster_name)
        if eng is None:
            # not engaged here, but maybe reconciled through cross-cluster requests: the
            # series they made go with it
            self._forget_if_gone(cluster_name)
            return
        eng.cancel()
        for handle in eng.handles:
            try:
                handle.stop()
            except Exception:  # a Source of the user's: the others stop, the leave goes on
                log.exception(
                    "controller=%s cluster=%s: stopping the source handle %r failed",
                    self.name,
                    display_name(cluster_name),
                    handle,
                    extra=self._fields(cluster=cluster_name),
                )
        dropped = self.queue.drop(lambda r: r.cluster_name == cluster_name)
        with self._lock:  # (those the stop's shutdown of the queue dropped)
            dropped += self._dropped_at_stop.pop(cluster_name, 0)
        self._cancel_runs(cluster_name)
        self._overruns.forget(cluster_name)
        self._loop_holds.forget(cluster_name)
        with self._failing_lock:
            for req in [r for r in self._failing if r.cluster_name == cluster_name]:
                del self._failing[req]
            for req in [r for r in self._races if r.cluster_name == cluster_name]:
                del self._races[req]
            for req in [r for r in self._requeue_messages if r.cluster_name == cluster_name]:
                del self._requeue_messages[req]
        self._refusal_over(cluster_name)
        self._refusals.forget((cluster_name, _ON_FAILURE))
        if self._metrics and cluster_name:
            self._metrics.forget_cluster(self.name, cluster_name)
        log.info(
            "controller=%s cluster=%s disengaged (%d queued requests dropped)",
            self.name,
            display_name(cluster_name),
            dropped,
            extra=self._fields(cluster=cluster_name),
        )

    def wait_for_cluster_reconciles(
        self, cluster_name: str, timeout: float | None = None
    ) -> list[Request]:
        """Wait until no reconcile of ``cluster_name`` runs, up to ``timeout`` seconds; the
        requests of it still running then (empty: none).

        For a cluster that left ([`disengage()`][mcruntime.controller.Controller.disengage]):
        its reconciles in flight then, whose calls the leave cut, end before the manager
        calls its ``on_cluster_disengaged`` callbacks, so what they start or record is not
        left behind. Called by a worker of this controller, it does not wait for that
        worker's own reconcile; on the controller's event loop, it does not wait (the
        reconciles it runs could not end meanwhile).
        """
        if threading.current_thread() is self._loop_thread:
            return self._running_of(cluster_name)
        mine = self._running.get(threading.get_ident())
        keep = 1 if mine is not None and mine.cluster_name == cluster_name else 0
        if self.queue.wait_key_done(cluster_name, timeout, keep=keep):
            return []
        return [req for req in self._running_of(cluster_name) if req != mine]

    def _running_of(self, cluster_name: str) -> list[Request]:
        """The requests of ``cluster_name`` workers hold now."""
        return [
            req
            for req, _ in self.queue.in_flight_items()
            if isinstance(req, Request) and req.cluster_name == cluster_name
        ]

    def _forget_filters(self, cluster_name: str) -> None:
        """Drop the streaks of filters that raised for ``cluster_name`` (it left: back, it is
        asked anew, and a failure said anew)."""
        for key in self._refusals.failing():
            if (
                isinstance(key, tuple)
                and key[0] == cluster_name
                and str(key[1]).startswith(_CLUSTER_FILTER)
            ):
                self._refusals.forget(key)

    def _cancel_runs(self, cluster_name: str) -> None:
        """Cancel the ``async def`` reconciles of ``cluster_name`` in flight: its cluster
        left, and one awaiting anything but its client's calls (which the leave cuts) would
        hold its worker until it ends; and the tasks its reconciles started that still run
        (a background poll would run on for a cluster that is gone). Not while stopping:
        those are waited for."""
        loop = self._loop
        if loop is None or self._stopped:
            return
        runs = [run for run in list(self._runs.values()) if run.cluster_name == cluster_name]
        with contextlib.suppress(RuntimeError):  # (the loop closed meanwhile)
            loop.call_soon_threadsafe(self._leave_on_loop, cluster_name, runs)

    def _leave_on_loop(self, cluster_name: str, runs: list[_AsyncRun]) -> None:
        """On the loop: cancel ``runs`` (with `ClusterLeft` as their outcome), then every
        other task a reconcile of ``cluster_name`` started that still runs."""
        for run in runs:
            run.leave()
            asyncio.get_running_loop().call_later(_CANCEL_GRACE, self._left_behind, run)
        own = {run.task for run in runs}
        left = [
            task
            for task in asyncio.all_tasks()
            if (req := _request_of(task)) is not None
            and req.cluster_name == cluster_name
            and task not in own
        ]
        for task in left:
            task.cancel()
        if left:
            names = sorted({_function_of(t) for t in left})
            log.info(
                "controller=%s cluster=%s: cancelled %d task%s its reconciles started that "
                "still ran (%s): its cluster left",
                self.name,
                display_name(cluster_name),
                len(left),
                "" if len(left) == 1 else "s",
                ", ".join(names),
                extra=self._fields(cluster=cluster_name),
            )

    def _left_behind(self, run: _AsyncRun) -> None:
        """On the loop, `_CANCEL_GRACE` after ``run`` was cancelled as its cluster left: say so
        if it still runs (it caught the cancel), holding its worker, as an overrun of a
        ``reconcile_timeout`` is said."""
        if run.task is None or run.task.done():
            return
        req = run.request
        point = _await_point(run.coroutine)
        log.warning(
            "controller=%s cluster=%s request=%s: cancelled as its cluster left, the reconcile "
            "has not ended %gs later (it caught the CancelledError, or awaits what ignores a "
            "cancel): its worker is held until it ends%s",
            self.name,
            display_name(req.cluster_name),
            req.key,
            _CANCEL_GRACE,
            f"; its coroutine at {point}" if point else "",
            extra=self._fields(req),
        )

    def pause_cluster(self, cluster_name: str) -> None:
        """Hand no request of ``cluster_name`` to a worker until `resume_cluster`; they stay
        queued, and the other clusters' are served. The manager pauses a cluster its health
        check finds not answering: each request would hold a worker until its calls'
        deadlines."""
        if self.queue.pause(cluster_name):
            log.debug(
                "controller=%s cluster=%s: its requests wait until it answers",
                self.name,
                display_name(cluster_name),
                extra=self._fields(cluster=cluster_name),
            )

    def resume_cluster(self, cluster_name: str) -> None:
        """Hand the requests of ``cluster_name`` to workers again (see `pause_cluster`), and
        retry now the requests (of any cluster) that failed on it meanwhile."""
        with self._lock:
            resumed = self.queue.resume(cluster_name)
            retried = 0
            for req, priority in self._waiting.release(cluster_name):
                if not self.queue.shutting_down:  # (a disengaged cluster's were dropped)
                    self.queue.add(req, priority=priority)
                    retried += 1
        if resumed or retried:
            log.debug(
                "controller=%s cluster=%s: reconciling its requests again; %d that failed on "
                "it retried now",
                self.name,
                display_name(cluster_name),
                retried,
                extra=self._fields(cluster=cluster_name),
            )

    def set_has_provider(self, has_provider: bool) -> None:
        """Told by the manager: requests come from a fleet (a provider), not only the local cluster.

        In a fleet, one cluster's requests may hold at most
        `max_concurrent_reconciles_per_cluster` workers, so a hung cluster never
        takes them all; so they may whenever more than one cluster is engaged.
        """
        with self._lock:
            self._has_provider = has_provider
            self._update_cluster_limit()

    def _update_cluster_limit(self) -> None:
        """In a fleet, no cluster may hold every worker (lock held)."""
        limit = self.max_concurrent_reconciles_per_cluster
        fleet = self._has_provider or len(self._engaged) > 1
        want = limit if fleet and limit < self.max_concurrent_reconciles else None
        if self.queue.limit_per_key != want:
            self.queue.limit_per_key = want

    def engaged_clusters(self) -> list[str]:
        with self._lock:
            return sorted(self._engaged)

    # -- running ---------------------------------------------------------------

    def start(self) -> None:
        """Start the workers (non-blocking, idempotent)."""
        with self._lock:
            if self._started:
                return
            self._started = True
            if self._async:
                self._start_loop()
            for i in range(self.max_concurrent_reconciles):
                self._workers.append(
                    start_thread(self._worker, f"mcruntime/controller/{self.name}/worker-{i}")
                )

    def shut_down(self) -> None:
        """Start to stop: no reconcile starts from now on; those in flight go on, and
        [`stop()`][mcruntime.controller.Controller.stop] waits for them. Idempotent."""
        with self._lock:
            self._stopped = True
            self._waiting.drop(lambda r: True)
        # first: events of sources stopping now (a cluster's leave) are not run
        dropped = self.queue.shut_down()
        with self._lock:  # said by each cluster's disengagement, as a leave's are
            for req in dropped:
                name = req.cluster_name
                self._dropped_at_stop[name] = self._dropped_at_stop.get(name, 0) + 1

    def stop(self, timeout: float = 10.0) -> None:
        """Disengage every cluster, let in-flight reconciles finish, and join the workers."""
        self.shut_down()
        with self._lock:
            names = list(self._engaged)
        for name in names:
            self.disengage(name)
        deadline = time.monotonic() + timeout
        # stop() may be called by a reconcile (its worker, or the asyncio thread): never wait for it
        calling = {threading.current_thread(), _worker_of_reconcile.get()}
        busy = self.queue.in_flight - (_worker_of_reconcile.get() in self._workers)
        if busy > 0:
            log.info(
                "controller=%s stopping: waiting up to %.3gs for %d in-flight reconcile%s",
                self.name,
                timeout,
                busy,
                "" if busy == 1 else "s",
                extra=self._fields(),
            )
        for t in self._workers:
            if t not in calling:
                t.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            self._loop_watch_stop.set()
            with contextlib.suppress(RuntimeError):  # (closed already)
                loop.call_soon_threadsafe(loop.stop)
            if self._loop_thread is not None and self._loop_thread not in calling:
                self._loop_thread.join(max(0.1, deadline - time.monotonic()))
            if self._loop_watch is not None and self._loop_watch not in calling:
                self._loop_watch.join(max(0.1, deadline - time.monotonic()))
        stuck = [t for t in self._workers if t.is_alive() and t not in calling]
        calls: dict[threading.Thread, str] = {}
        if loop is not None:
            # the loop's thread (a reconcile holding it), and calls moved off it
            # (``asyncio.to_thread``) still running: daemons, but named here
            if self._loop_thread is not None and self._loop_thread.is_alive():
                stuck.append(self._loop_thread)
            if self._loop_threads is not None:
                calls = self._loop_threads.busy()
                stuck.extend(calls)
        stuck = [t for t in stuck if t not in calling]
        if stuck:
            log.warning(
                "controller=%s workers still running after %.1fs: %s%s",
                self.name,
                timeout,
                described(stuck),
                self._stuck_reconciles(stuck, calls),
                extra=self._fields(),
            )
        self._workers = [t for t in self._workers if t.is_alive()]

    def _stuck_reconciles(
        self, stuck: list[threading.Thread], calls: dict[threading.Thread, str]
    ) -> str:
        """What the ``stuck`` workers run: each one's request, and an async one's await point
        (its innermost coroutine frame); what the loop's ``calls`` (``asyncio.to_thread``)
        run; for the line saying they are still running."""
        parts: list[str] = []
        for t in stuck:
            if t in calls:
                parts.append(f"{t.name} runs {calls[t]} for an async reconcile")
                continue
            req = self._running.get(t.ident or 0)
            if req is None:
                continue
            part = f"{t.name} reconciles {req}"
            aw = self._awaiting.get(t.ident or 0)
            if aw is not None:
                point = _await_point(aw)
                part += f", its coroutine at {point}" if point else ""
            parts.append(part)
        return f" ({'; '.join(parts)})" if parts else ""

    @staticmethod
    def in_async_reconcile() -> bool:
        """Whether the caller is an ``async def`` reconcile, on its controller's event loop:
        what waits there holds the loop every other async reconcile of it needs."""
        if _worker_of_reconcile.get() is None:
            return False
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return False
        return True

    def _start_loop(self) -> None:
        loop = asyncio.new_event_loop()
        # a Cluster's AsyncClient runs its calls on threads of that cluster's own; this one
        # serves asyncio.to_thread and an AsyncClient made by hand: one thread per worker, so
        # every worker's coroutine can have one in flight (the default: min(32, cpus + 4))
        # (daemon threads the controller owns: a blocking call never holds its stop, nor the
        # process's exit; see `LoopThreads`)
        executor = self._loop_threads = LoopThreads(
            max(4, self.max_concurrent_reconciles), f"mcruntime/controller/{self.name}/io"
        )
        loop.set_default_executor(executor)
        loop.set_task_factory(self._new_task)
        loop.set_exception_handler(self._task_failed)
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                while True:
                    try:
                        loop.run_forever()
                        break  # stopped by stop()
                    except (SystemExit, KeyboardInterrupt) as exc:
                        # raised by a task a reconcile started (its own coroutine's are
                        # carried to its worker): the loop goes on, the manager stops
                        log.critical(
                            "controller=%s: a task an async reconcile started raised %s: the "
                            "manager stops",
                            self.name,
                            type(exc).__name__,
                            exc_info=exc,
                            extra=self._fields(),
                        )
                        self.on_fatal(exc)
            finally:
                # release workers still waiting on a coroutine, then close
                loop.run_until_complete(_cancel_all(asyncio.all_tasks(loop)))
                # not loop.shutdown_default_executor(): it waits for every blocking call
                executor.shutdown(wait=False, cancel_futures=True)
                loop.close()

        self._loop_thread = start_thread(run, f"mcruntime/controller/{self.name}/asyncio")
        self._loop_watch = start_thread(
            lambda: self._watch_loop(loop), f"mcruntime/controller/{self.name}/asyncio-watch"
        )

    def _watch_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Say when a reconcile holds the event loop: a coroutine that computes without
        awaiting (or calls something that blocks) stalls every async reconcile of the
        controller. The loop is asked to run a no-op every `LOOP_HELD_AFTER` / 2 s; one that
        waits longer than `LOOP_HELD_AFTER` finds the loop held, by the reconcile whose
        coroutine is running (a warning, once per streak in its cluster)."""
        stop = self._loop_watch_stop
        while not stop.wait(LOOP_HELD_AFTER / 2):
            ran = threading.Event()
            try:
                loop.call_soon_threadsafe(ran.set)
            except RuntimeError:  # (the loop closed)
                return
            if ran.wait(LOOP_HELD_AFTER):
                continue
            self._loop_held(loop)
            while not ran.wait(0.05):  # until it is free again
                if stop.is_set():
                    return

    def _new_task(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
    ) -> asyncio.Task[Any]:
        """The loop's task factory: a task a reconcile starts (a ``TaskGroup``'s child,
        ``gather``'s, a detached one) is noted with its request, read in the task's context
        (a copy of the reconcile's unless given), so a hold of the loop by it names the
        request (`_loop_held`) as one by the reconcile's own coroutine does, its cluster's
        leave cancels it (`_leave_on_loop`) and a failure nothing awaited names it
        (`_task_failed`)."""
        task = _RequestTask(coro, loop=loop, **kwargs)
        # the task's own context: create_task(..., context=contextvars.Context()) starts one
        # that serves no request (a controller-wide refresher), whoever starts it
        context: contextvars.Context | None = kwargs.get("context")
        try:
            task.request = current_request() if context is None else context.run(current_request)
        except RuntimeError:  # (a context entered elsewhere now: not read)
            task.request = current_request()
        return task

    def _task_failed(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler: what asyncio says of a failure nothing awaited (a
        task a reconcile started and forgot: "Task exception was never retrieved"), said by
        the controller, with the request whose reconcile started the task."""
        task = context.get("task") or context.get("future")
        exc = context.get("exception")
        req = _request_of(task)
        what = str(context.get("message") or "an error of its event loop")
        if req is not None and isinstance(exc, BaseException):
            name = _function_of(task)
            log.error(
                "controller=%s cluster=%s request=%s: a task the reconcile started (%s) failed "
                "and nothing awaited it: %s",
                self.name,
                display_name(req.cluster_name),
                req.key,
                name,
                describe_error(exc),
                exc_info=exc,
                extra=self._fields(req),
            )
            return
        prefix = f"controller={self.name}"
        if req is not None:
            prefix += f" cluster={display_name(req.cluster_name)} request={req.key}"
        log.error(
            "%s: its event loop: %s%s",
            prefix,
            what,
            f" ({task!r})" if task is not None else "",
            exc_info=exc if isinstance(exc, BaseException) else None,
            extra=self._fields(req),
        )

    def _loop_held(self, loop: asyncio.AbstractEventLoop) -> None:
        runs = [(ident, run) for ident, run in list(self._runs.items()) if run.coroutine_running()]
        child = ""
        if not runs:  # a task a reconcile started, maybe: its request, by the task factory
            task = asyncio.current_task(loop)  # (a read of asyncio's table, from this thread)
            req = _request_of(task)
            if req is not None:
                runs = [(i, r) for i, r in list(self._runs.items()) if r.request == req]
                child = " in a task it started"
        thread = self._loop_thread
        frame = sys._current_frames().get(thread.ident) if thread and thread.ident else None
        at = ""
        if frame is not None:
            where = traceback.extract_stack(frame, limit=1)
            if where:
                at = f" (at {where[-1].filename}:{where[-1].lineno} in {where[-1].name})"
        if not runs:
            log.warning(
                "controller=%s: its event loop has been held for over %.3gs%s, not by a "
                "reconcile's own coroutine: every async reconcile of the controller waits",
                self.name,
                LOOP_HELD_AFTER,
                at,
                extra=self._fields(),
            )
            return
        _, run = runs[0]
        run.held = True
        req = run.request
        n = self._loop_holds.fail(req.cluster_name)
        level = logging.WARNING if n == 1 else logging.DEBUG
        if log.isEnabledFor(level):
            log.log(
                level,
                "controller=%s cluster=%s request=%s: the reconcile has held the event loop for "
                "over %.3gs without awaiting%s%s (hold %d): every async reconcile of the "
                "controller waits meanwhile; run CPU-bound or blocking work with "
                "asyncio.to_thread, or use a def reconciler%s",
                self.name,
                display_name(req.cluster_name),
                req.key,
                LOOP_HELD_AFTER,
                child,
                at,
                n,
                "; further holds are logged at debug level until a reconcile of the cluster "
                "ends without one"
                if n == 1
                else "",
                extra=self._fields(req),
            )

    def _worker(self) -> None:
        # this thread's context names it for every reconcile it runs (and their coroutines)
        _worker_of_reconcile.set(threading.current_thread())
        queue = self.queue
        get = queue.get
        done_and_take = queue.done_and_take
        engaged = self._engaged
        reconcile = self._reconcile_handler
        running, me = self._running, threading.get_ident()
        req: Any = NOTHING
        while True:
            if req is NOTHING:
                running.pop(me, None)  # (idle: holds no request, of a cluster gone or not)
                try:
                    req = get()
                except ShutDown:
                    return
                except BaseException as exc:  # noqa: BLE001 - never end silently
                    log.critical(
                        "controller=%s: internal error of mcruntime: %s cannot take requests "
                        "from the work queue (please report it): %s",
                        self.name,
                        threading.current_thread().name,
                        describe_error(exc),
                        exc_info=exc,
                        extra=self._fields(),
                    )
                    self.on_fatal(exc)
                    return
            running[me] = req
            engagement = engaged.get(req.cluster_name)
            finished = False
            reconcile_id = _reconcile_id.set(new_reconcile_id())
            try:
                reconcile(req, engagement)
                # done, and the next request if one is ready: one lock round trip
                nxt = done_and_take(req)
                finished = True
            except _Fatal as fatal:  # the reconciler's error stops the manager
                log.critical(
                    "controller=%s cluster=%s request=%s: %s: %s",
                    self.name,
                    display_name(req.cluster_name),
                    req.key,
                    fatal.why,
                    describe_error(fatal.error),
                    exc_info=fatal.error,
                    extra=self._fields(req),
                )
                self.on_fatal(fatal.error)
                return
            except BaseException as exc:  # noqa: BLE001 - the worker must go on
                # not the reconciler's (the handler takes all it raises): mcruntime's own
                self._internal_failure(req, engagement, exc)
                nxt = NOTHING
            finally:
                _reconcile_id.reset(reconcile_id)
                if not finished:
                    queue.done(req)
                if engagement is not None or not self.cluster_known(req.cluster_name):
                    self._forget_if_gone(req.cluster_name)
            # not kept while the next get() blocks: it would keep a cluster that left alive
            engagement = None
            req = nxt

    def _requeue(
        self,
        req: Request,
        engagement: _Engaged | None,
        after: float | None = None,
        priority: int | None = None,
        failed_on: frozenset[str] = frozenset(),
    ) -> bool:
        """Queue ``req`` again, unless the engagement it came from ended while it ran or the
        controller is stopping; whether it was.

        A request that ``failed_on`` clusters that are all held back (the health check found
        them not answering) waits for one of them to answer instead (`resume_cluster`),
        out of the queue and without backoff.

        Checked under the lock [`disengage()`][mcruntime.controller.Controller.disengage] takes, so a request is either
        re-queued before the cluster's queued requests are dropped, or not at all.
        It keeps the priority it was handed out with unless ``priority`` is given
        (``Result.priority``).
        """
        with self._lock:
            if self.queue.shutting_down or (
                engagement is not None and self._engaged.get(req.cluster_name) is not engagement
            ):
                self.queue.forget(req)
                log.debug(
                    "controller=%s cluster=%s request=%s: %s while reconciling, not requeued",
                    self.name,
                    display_name(req.cluster_name),
                    req.key,
                    "the controller stopped" if self._stopped else "cluster disengaged",
                    extra=self._fields(req),
                )
                return False
            if priority is None:
                priority = self.queue.held_priority(req)
            if failed_on and failed_on <= self.queue.paused():
                self._waiting.park(req, failed_on, priority)
            elif after is None:
                self.queue.add_rate_limited(req, priority=priority)
            else:
                self.queue.add_after(req, after, priority=priority)
            return True

    def _wait_also(
        self,
        req: Request,
        engagement: _Engaged | None,
        met: held_back.Met,
        *,
        backed_off: bool = False,
    ) -> bool:
        """``req``'s reconcile had calls fail to reach clusters, and went on (or failed):
        whatever it returned, it runs again at the first answer of each the manager holds
        back now (found not answering: it waits on them). A cluster not held back (it
        answered before the reconcile ended, or the health check has not found it silent
        yet) runs it again now, with backoff, unless it was ``backed_off`` already: a retry
        made once the cluster is held back waits for its answer. Whether it was queued so
        (its backoff is then kept, not forgotten)."""
        with self._lock:
            if self.queue.shutting_down or (
                engagement is not None and self._engaged.get(req.cluster_name) is not engagement
            ):
                return False
            paused = self.queue.paused()
            priority = self.queue.held_priority(req)
            held = frozenset(met.failed) & paused
            if held:
                self._waiting.park(req, held | self._waiting.clusters(req), priority)
            if backed_off or met.failed <= paused:
                return False
            self.queue.add_rate_limited(req, priority=priority)
            return True

    def _fields(self, req: Request | None = None, *, cluster: str | None = None) -> dict[str, str]:
        """The fields of a line of this controller's about ``req`` (with the id of its
        reconcile when one runs it in this context), about ``cluster``, or about itself."""
        if req is None:
            return log_fields(cluster=cluster, controller=self.name)
        return log_fields(
            cluster=req.cluster_name,
            controller=self.name,
            namespace=req.namespace,
            name=req.name,
            reconcile_id=_reconcile_id.get(),
        )

    def _forget_if_gone(self, cluster_name: str) -> None:
        """Drop the metrics series of a cluster not engaged here: those a reconcile finishing
        after its cluster's disengagement re-created, or cross-cluster requests made for a
        cluster this controller does not engage (gone, or never there)."""
        if self._metrics and cluster_name and cluster_name not in self._engaged:
            self._metrics.forget_cluster(self.name, cluster_name)

    def _call(self, req: Request, met: held_back.Met) -> Any:
        noted = held_back.noting(met)  # the clusters its calls fail to reach
        try:
            # an async reconciler's task copies this context too
            with reconciling(req, controller=self.name, reconcile_id=_reconcile_id.get()):
                return self._call_reconciler(req)
        finally:
            held_back.stop_noting(noted)

    def _call_reconciler(self, req: Request) -> Any:
        timeout = self.reconcile_timeout
        if timeout is None:
            result = self.reconciler(req)
            if result is None or result.__class__ is Result or not inspect.isawaitable(result):
                return result
            return self._run_async(result, None, req)
        # the deadline is a context variable: the coroutine's task copies it from here
        with deadline(timeout):
            try:
                return self._call_within(req, timeout)
            finally:
                left = remaining()
                if self._metrics and left is not None and left <= 0:
                    # it reached its deadline (controller_runtime_reconcile_timeouts_total)
                    self._metrics.reconcile_timed_out(self.name, req.cluster_name)

    def _call_within(self, req: Request, timeout: float) -> Any:
        """The reconcile of `_call_reconciler` within ``timeout``, whose deadline is set."""
        began = time.monotonic()
        try:
            result = self.reconciler(req)
        except BaseException:
            self._check_overrun(req, time.monotonic() - began, timeout)
            raise
        if result is None or result.__class__ is Result or not inspect.isawaitable(result):
            self._check_overrun(req, time.monotonic() - began, timeout)
            return result
        try:
            return self._run_async(result, timeout, req)
        finally:
            # cancelled at its deadline, a coroutine ends at once unless it catches the
            # CancelledError or holds the loop (its cleanup's awaits get a grace)
            took = time.monotonic() - began
            if took <= timeout or took > timeout + _CANCEL_GRACE:
                self._check_overrun(req, took, timeout)

    def _check_overrun(self, req: Request, took: float, timeout: float) -> None:
        """Say when a plain ``def`` reconciler ran past its ``reconcile_timeout``: it cannot be
        interrupted, only its client calls fail after the deadline, so without this line a
        reconcile that overruns without calling the API would be silent. Once per streak of
        overruns in a cluster; a reconcile that ends in time ends the streak."""
        key = req.cluster_name
        if took <= timeout:
            if self._overruns.failures(key):
                self._overruns.succeed(key)
            return
        n = self._overruns.fail(key)
        if key and key not in self._engaged:  # it left while this reconcile ran
            self._overruns.forget(key)
        level = logging.WARNING if n == 1 else logging.DEBUG
        if log.isEnabledFor(level):
            log.log(
                level,
                "controller=%s cluster=%s request=%s: the reconcile ran %.3gs, past its "
                "reconcile_timeout of %.3gs (overrun %d): %s%s",
                self.name,
                display_name(req.cluster_name),
                req.key,
                took,
                timeout,
                n,
                "an async def reconciler is cancelled at it, and this one did not end in time "
                "(it caught the CancelledError, or the event loop was held, by it or another "
                "reconcile: a warning names the one that held it); it failed with the timeout"
                if self._async
                else "a def reconciler is not interrupted, its client calls after the deadline "
                "fail",
                "; further overruns are logged at debug level until a reconcile ends in time"
                if n == 1
                else "",
                extra=self._fields(req),
            )

    def _refused(self, req: Request, retry: int, exc: BaseException) -> None:
        """A reconcile failed because a cluster refused (401, 403), could not be reached, does
        not serve a kind or fails whatever the request (a 503, a webhook it cannot call): the
        cluster's fault, not the request's, and every request
        of the cluster meets it. One warning (without a traceback) per streak of such
        failures in the request's cluster, ended when one of the requests that failed so
        succeeds (not by one that needed no call: a read from the cache)."""
        with self._refusing_lock:
            self._refusing.setdefault(req.cluster_name, set()).add(req)
        with self._lock:
            waits_on = self._waiting.clusters(req)
        # (a request that waits for a cluster's answer is not retried with backoff: no count)
        count = "" if waits_on else f", retry {retry}"
        self._refusals.failed(
            req.cluster_name,
            _RECONCILING,
            f"{describe_error(exc)} (request {req.key}{count})",
            retry=f"retried as soon as {_named(waits_on)} answers again"
            if waits_on
            else "each request is retried with backoff",
            key=req.cluster_name,
        )
        if req.cluster_name and req.cluster_name not in self._engaged:  # it left meanwhile
            self._refusal_over(req.cluster_name)

    def _refusal_ended(self, req: Request, met: held_back.Met) -> None:
        """``req`` of a cluster with a streak of refused reconciles succeeded. The streak ends
        (one line) if a call of it was answered with success (by the cluster that refused it:
        its own, or another it writes to) and ``req`` was refused before, or none of the
        requests refused is left to retry; a reconcile that made no call (its object deleted
        meanwhile, read from the cache) proves nothing: it leaves the requests that wait, so
        they are not kept for every object of a churn."""
        cluster = req.cluster_name
        with self._refusing_lock:
            refused = self._refusing.get(cluster)
            if refused is None:
                return
            was_refused = req in refused
            refused.discard(req)
            works = bool(met.answered) and (was_refused or not refused)
        if works:
            self._refusal_over(cluster, recovered=True)

    def _refusal_over(self, cluster_name: str, *, recovered: bool = False) -> None:
        """End the streak of refused reconciles in ``cluster_name`` (logged if ``recovered``)."""
        with self._refusing_lock:
            if self._refusing.pop(cluster_name, None) is None:
                return
        if recovered:
            self._refusals.recovered(cluster_name, _RECONCILING, key=cluster_name)
        else:
            self._refusals.forget(cluster_name)

    def _run_async(self, aw: Any, timeout: float | None, req: Request) -> Any:
        with self._lock:
            if self._loop is None:
                self._start_loop()
            loop = self._loop
        assert loop is not None
        me = threading.get_ident()
        self._awaiting[me] = aw
        run = self._runs[me] = _AsyncRun(req, aw)
        try:
            return asyncio.run_coroutine_threadsafe(_await(aw, timeout, run), loop).result()
        except _Escaped as escaped:
            raise escaped.error from None
        finally:
            self._awaiting.pop(me, None)
            self._runs.pop(me, None)
            if not run.held and self._loop_holds.failures(req.cluster_name):
                self._loop_holds.succeed(req.cluster_name)

    def waiting_requests(self) -> dict[str, list[Request]]:
        """The requests that failed on a cluster found not answering (or whose reconcile
        caught such a failure and went on) and wait for it, retried at its first answer, by
        that cluster; one that failed on two waits on both."""
        with self._lock:
            return self._waiting.by_cluster()

    def _waiting_counts(self) -> dict[str, int]:
        with self._lock:
            return self._waiting.counts()

    def in_flight_reconciles(self) -> list[ReconcileInFlight]:
        """The reconciles running now, the longest first: each request, how long it has
        run, its worker thread and where it is (what `ManagerOptions.debug_bind_address`'s
        ``/debug/reconciles`` shows, to find a stuck reconcile). Reading it costs the
        workers nothing: their frames are read as they are."""
        held = dict(self.queue.in_flight_items())
        frames = sys._current_frames()
        names = {t.ident: t.name for t in threading.enumerate()}
        out: list[ReconcileInFlight] = []
        for ident, req in list(self._running.items()):
            seconds = held.get(req)
            frame = frames.get(ident)
            if seconds is None or frame is None:  # it ended: the worker waits for the next
                continue
            aw = self._awaiting.get(ident)
            stack = _coroutine_frames(aw) if aw is not None else _reconciler_frames(frame)
            out.append(ReconcileInFlight(req, seconds, names.get(ident, "?"), stack))
        out.sort(key=lambda r: -r.seconds)
        return out

    def _reconcile_handler(self, req: Request, engagement: _Engaged | None = None) -> None:
        m = self._metrics
        start = time.perf_counter() if m else 0.0
        outcome = "success"
        failing = False  # still failing with the error of its last failure, or a new one
        raced = False  # failed with a raced write (409)
        requeued = False  # raised RequeueAfter
        met = held_back.Met()  # the clusters its calls failed to reach
        if self._waiting:  # (read without the lock: mostly empty)
            with self._lock:
                self._waiting.unpark(req)  # run again (an event): it waits no longer
        try:
            try:
                result = self._call(req, met)
            except (TerminalError, RequeueAfter, ClusterLeft):
                raise
            except Exception as exc:
                if _wraps_terminal(exc):  # Go: errors.Is(err, reconcile.TerminalError(nil))
                    raise _WrappedTerminal(exc) from exc
                if (later := _made_of_requeue_after(exc)) is not None:
                    raise later from exc  # (a failed finalizer's cleanups that each said "later")
                raise
            if result is not None and not isinstance(result, Result):
                # a programming error no retry fixes (kopf stores what a handler returns)
                # (its value is not shown: it may hold what a Secret holds)
                what = f"a {type(result).__name__}"
                if isinstance(result, bool | int | float):
                    what = f"{result!r} ({what})"
                hint = ""
                if isinstance(result, tuple) and len(result) == 2:
                    hint = " (not Go's (Result, error) pair: return the Result, raise the error)"
                raise TerminalError(f"the reconciler returned {what}, not a Result or None{hint}")
            delay = None if result is None else _requeue_after(result)
        except RequeueAfter as exc:  # Result(requeue_after=...), raised from deeper down
            outcome = "requeue_after"
            requeued = True
            if not (met and self._wait_also(req, engagement, met)):
                self.queue.forget(req)
            self._requeue(req, engagement, exc.delay, None)
            said = bool(exc.message) and self._say_requeue(req, exc.message)
            log.log(
                logging.INFO if said else logging.DEBUG,
                "controller=%s cluster=%s request=%s: requeued in %gs%s",
                self.name,
                display_name(req.cluster_name),
                req.key,
                exc.delay,
                f": {exc.message}" if exc.message else "",
                extra=self._fields(req),
            )
        except TerminalError as caught:
            # one wrapped (a cause, a group, a failed finalizer's cleanups) is said and
            # handed on as raised
            raised: Exception = caught.wrapper if isinstance(caught, _WrappedTerminal) else caught
            outcome = "error"
            self.queue.forget(req)
            log.error(
                "controller=%s cluster=%s request=%s: terminal error, not retried: %s",
                self.name,
                display_name(req.cluster_name),
                req.key,
                error_text(raised),
                extra=self._fields(req),
            )
            self._failed(req, raised)
            if m:  # both counters, as controller-runtime counts a terminal error
                m.terminal_error(self.name, req.cluster_name)
                m.reconcile_error(self.name, req.cluster_name)
        except ClusterLeft as exc:
            # the cluster left on purpose: not a failure; a retry happens only if it is back
            outcome = "error"
            self._requeue(req, engagement)
            log.debug(
                "controller=%s cluster=%s request=%s: cluster left during the reconcile (%s)",
                self.name,
                display_name(req.cluster_name),
                req.key,
                exc,
                extra=self._fields(req),
            )
        except ClusterNotFound as exc:
            outcome = "error"
            known = self.cluster_known(req.cluster_name)
            if known or self.queue.num_requeues(req) < DEFAULT_CLUSTER_NOT_FOUND_RETRIES:
                self._requeue(req, engagement)
                if known and exc.name != req.cluster_name:
                    # a cluster the reconcile named (mistyped, not engaged yet, gone) while
                    # its own is here: its failure, said and counted as any other
                    failing = True
                    self._log_failure(req, self.queue.num_requeues(req), exc, engagement)
                    self._failed(req, exc)
                    if m:
                        m.reconcile_error(self.name, req.cluster_name)
            else:
                self.queue.forget(req)
                log.info(
                    "controller=%s cluster=%s request=%s: cluster is gone, request dropped (%s)",
                    self.name,
                    display_name(req.cluster_name),
                    req.key,
                    exc,
                    extra=self._fields(req),
                )
        except (SystemExit, KeyboardInterrupt) as exc:
            # sys.exit() or a raised KeyboardInterrupt (a signal's reaches the main thread
            # only, never a worker) means: stop; not retried, whatever recover_panic says
            outcome = "error"
            self.queue.forget(req)
            if m:
                m.reconcile_error(self.name, req.cluster_name)
            raise _Fatal(exc, "the reconciler raised it: the manager stops") from None
        except BaseException as exc:  # noqa: BLE001 - a CancelledError of its own, GeneratorExit
            outcome = "error"
            if not self.recover_panic:
                raise _Fatal(exc, "reconciler raised and recover_panic is off") from None
            if self._requeue(req, engagement, failed_on=_failed_on(exc)):
                if met:
                    self._wait_also(req, engagement, met, backed_off=True)
                retry = self.queue.num_requeues(req)
                if _refused(exc):
                    self._refused(req, retry, exc)
                    self._failed(req, exc)
                elif (raced := _raced(exc)) and self._raced_again(req) <= RACE_RETRIES_QUIET:
                    # optimistic concurrency at work, not a fault: the retry reads anew
                    log.info(
                        "controller=%s cluster=%s request=%s: a write raced another or a "
                        "cache that was behind, retrying (retry %d): %s",
                        self.name,
                        display_name(req.cluster_name),
                        req.key,
                        retry,
                        describe_error(exc),
                        extra=self._fields(req),
                    )
                else:
                    failing = True
                    self._log_failure(req, retry, exc, engagement)
                    self._failed(req, exc)
            else:  # what stopping cut short (a call cancelled, a deadline shortened)
                log.info(
                    "controller=%s cluster=%s request=%s: reconcile failed while %s, not "
                    "retried: %s",
                    self.name,
                    display_name(req.cluster_name),
                    req.key,
                    "the controller stopped" if self._stopped else "its cluster was disengaged",
                    describe_error(exc),
                    extra=self._fields(req),
                )
            if m:
                m.reconcile_error(self.name, req.cluster_name)
        else:
            if self._refusing and req.cluster_name in self._refusing:
                self._refusal_ended(req, met)
            requeue = delay is None and isinstance(result, Result) and result.requeue
            # it caught what a cluster not reached raised, and went on: it runs again when
            # that cluster answers (and its backoff is kept)
            retried = bool(met) and self._wait_also(req, engagement, met, backed_off=requeue)
            if result is None:
                if not retried:
                    self.queue.forget(req)
            elif delay is not None:
                outcome = "requeue_after"
                if not retried:
                    self.queue.forget(req)
                self._requeue(req, engagement, delay, result.priority)
            elif requeue:
                outcome = "requeue"
                self._requeue(req, engagement, None, result.priority)
            elif not retried:
                self.queue.forget(req)
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "controller=%s cluster=%s request=%s: reconciled (%s)",
                    self.name,
                    display_name(req.cluster_name),
                    req.key,
                    outcome,
                    extra=self._fields(req),
                )
        finally:
            if not failing and self._failing:  # (read without the lock: mostly empty)
                with self._failing_lock:
                    self._failing.pop(req, None)
            if not raced and self._races:  # (likewise)
                with self._failing_lock:
                    self._races.pop(req, None)
            if not requeued and self._requeue_messages:  # (likewise)
                with self._failing_lock:
                    self._requeue_messages.pop(req, None)
            if m:
                m.reconciled(self.name, req.cluster_name, outcome, time.perf_counter() - start)

    def _log_failure(
        self, req: Request, retry: int, exc: BaseException, engagement: _Engaged | None
    ) -> None:
        """Log a reconcile that raised: with its traceback the first time, then one line per
        retry, without it, while the request keeps failing with the same error (type and
        message). Its metrics and ``on_failure`` count every failure."""
        error = f"{type(exc).__name__}: {error_text(exc)}"
        with self._failing_lock:
            same = self._failing.get(req) == error
            # kept only while its engagement lasts: `disengage` drops the cluster's streaks
            # after it ends it, so one recorded once it ended would outlive it
            if engagement is None or self._engaged.get(req.cluster_name) is engagement:
                self._failing[req] = error
        if same:
            log.error(
                "controller=%s cluster=%s request=%s: reconcile still failing (retry %d): %s "
                "(its traceback was logged at its first failure)",
                self.name,
                display_name(req.cluster_name),
                req.key,
                retry,
                error,
                extra=self._fields(req),
            )
            return
        log.error(
            "controller=%s cluster=%s request=%s: reconcile failed (retry %d): %s",
            self.name,
            display_name(req.cluster_name),
            req.key,
            retry,
            error,
            exc_info=exc,
            extra=self._fields(req),
        )

    def _internal_failure(
        self, req: Request, engagement: _Engaged | None, exc: BaseException
    ) -> None:
        """What handling ``req`` raised outside the reconciler (which the handler takes all
        of): a fault of mcruntime, not of the reconciler nor ``recover_panic``. Said as such,
        with its traceback; the request is retried with backoff and the worker goes on, so
        one request never takes a worker, and with it every cluster's reconciles, away."""
        log.error(
            "controller=%s cluster=%s request=%s: internal error of mcruntime while handling "
            "the reconcile (not raised by the reconciler; please report it), retried with "
            "backoff: %s",
            self.name,
            display_name(req.cluster_name),
            req.key,
            describe_error(exc),
            exc_info=exc,
            extra=self._fields(req),
        )
        with contextlib.suppress(Exception):
            self._requeue(req, engagement)

    def _say_requeue(self, req: Request, message: str) -> bool:
        """Whether the ``message`` of a RequeueAfter ``req`` raised is news: not the one its
        last reconcile raised (a request waiting on the same thing says it once)."""
        with self._failing_lock:
            last = self._requeue_messages.get(req)
            # kept only while its cluster is engaged: `disengage` drops the cluster's
            if req.cluster_name in self._engaged:
                self._requeue_messages[req] = message
        return last != message

    def _raced_again(self, req: Request) -> int:
        """Count a raced write of ``req``; how many in a row now."""
        with self._failing_lock:
            n = self._races[req] = self._races.get(req, 0) + 1
        return n

    def _failed(self, req: Request, exc: BaseException) -> None:
        hook = self.on_failure
        if hook is None:
            return
        try:
            hook(req, exc)
        except Exception as hook_exc:
            # once per streak in the cluster: a hook that cannot work fails at every retry
            self._refusals.failed(
                req.cluster_name,
                _ON_FAILURE,
                f"{describe_error(hook_exc)} (request {req.key})",
                retry="it is called again at each failed reconcile",
            )
        else:
            self._refusals.recovered(req.cluster_name, _ON_FAILURE)

    def __repr__(self) -> str:
        return f"Controller({self.name!r})"


#: the raced writes (409) in a row of a request said only at INFO, without a traceback (its
#: retries of other failures before them, a member that refused, say, do not count): a
#: race that keeps failing is an ERROR like any other failure
RACE_RETRIES_QUIET = 3


#: what a controller's streak of reconciles failing on a cluster's refusal is about
_RECONCILING = "reconciling"
_ON_FAILURE = "on_failure"
#: what a streak of its engage options' ``cluster_filter`` raising is about
_CLUSTER_FILTER = "the cluster_filter"


def _refused(exc: BaseException) -> bool:
    """A failure of a cluster, not of the request: a call refused for the controller's
    credentials (401, 403), a cluster not reached (refused, hung, TLS, its credential
    plugin), a kind it does not serve (a CRD not installed), a server failing whatever the
    request (`_server_failing`); or a group of such failures (a reconcile that walks every
    member raises its members' errors together). A call not sent because its deadline had
    passed is none: the reconcile was late."""
    return all(
        isinstance(e, (Forbidden, Unauthorized, Unreachable, NoKindMatch, ServerError))
        and (not isinstance(e, ServerError) or _server_failing(e))
        and e.cluster_name is not None
        and not _late(e)
        and not _refused_object(e)
        for e in _leaves(exc)
    )


#: 5xx statuses of a server failing whatever the request: a proxy or load balancer with no
#: backend (502), a server unavailable (503), its storage not answering (504 ``Timeout``)
_SERVER_FAILING = frozenset({502, 503, 504})
#: kube-apiserver's 500 for an admission webhook it could not call (down, timed out): with
#: ``failurePolicy: Fail`` every write the webhook matches fails so, whatever the object
_WEBHOOK_NOT_CALLED = re.compile(r"\bfailed calling webhook\b")


def _server_failing(exc: BaseException) -> bool:
    """A 5xx that is the server's, not the request's: 502, 503, 504, or a 500 for an admission
    webhook it could not call. Any other 500 may be about the object (a conversion of it
    failing): the request's error, logged with its traceback."""
    return isinstance(exc, ServerError) and (
        exc.status in _SERVER_FAILING
        or (exc.status == 500 and _WEBHOOK_NOT_CALLED.search(exc.message) is not None)
    )


#: kube-apiserver's authorizer's refusal (``User "x" cannot list resource ...``, ``cannot get
#: path ...``): the controller's credentials, refused whatever the request
_AUTHORIZER_REFUSAL = re.compile(r'\bUser "[^"]*" cannot [a-z*]+ (resource|path) ')


def _refused_object(exc: BaseException) -> bool:
    """A 403 of the request's own object, not the credentials': an admission webhook's or
    policy's denial, an exceeded quota, a namespace being terminated. Those are the
    request's errors (each logged with its own message), not its cluster's."""
    return isinstance(exc, Forbidden) and not _AUTHORIZER_REFUSAL.search(exc.message)


def _late(exc: BaseException) -> bool:
    """A call its caller's side ended: not sent because its deadline (the reconcile's, say)
    had passed before it was made, or cut by its caller. No failure of the cluster."""
    return isinstance(exc, DeadlineExceeded) and exc.by_caller


def _failed_on(exc: BaseException) -> frozenset[str]:
    """The clusters a failure is theirs: the cluster an `Unreachable` (hung, refused, a call
    not sent to a cluster found not answering) names, or those of every error of a group
    (an ``asyncio.TaskGroup`` of calls to several clusters) when each is one; else none."""
    names: set[str] = set()
    for e in _leaves(exc):
        if not isinstance(e, Unreachable) or e.cluster_name is None or _late(e):
            return frozenset()
        names.add(e.cluster_name)
    return frozenset(names)


def _leaves(exc: BaseException) -> list[BaseException]:
    """``exc``, or the errors of a group (of groups), or of an error made of several
    (``MCRuntimeError.parts``: a failed finalizer's cleanups), each on its own."""
    subs = _parts(exc)
    return [leaf for sub in subs for leaf in _leaves(sub)] if subs else [exc]


def _parts(exc: BaseException) -> list[BaseException]:
    """The errors ``exc`` is made of: a group's, or a `MCRuntimeError`'s ``parts``; else none."""
    if isinstance(exc, BaseExceptionGroup):
        return list(exc.exceptions)
    if isinstance(exc, MCRuntimeError) and exc.parts:
        return list(exc.parts)
    return []


class _WrappedTerminal(TerminalError):
    """A reconcile's error that wraps a `TerminalError`, carried to the terminal branch."""

    def __init__(self, wrapper: Exception) -> None:
        super().__init__(str(wrapper))
        self.wrapper = wrapper


def _wraps_terminal(exc: BaseException) -> bool:
    """Whether ``exc`` wraps a `TerminalError`, as Go's ``errors.Is`` looks through ``%w`` and
    ``errors.Join``: its explicit cause (``raise ... from``), the errors of a group, the parts
    of an error made of several (a failed finalizer's cleanups, as controller-runtime's
    ``finalizer.Finalize`` aggregates them). An error raised while handling one (its implicit
    ``__context__``) does not wrap it."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, TerminalError):
            return True
        todo.extend(_parts(e))
        if e.__cause__ is not None:
            todo.append(e.__cause__)
    return False


def _made_of_requeue_after(exc: BaseException) -> RequeueAfter | None:
    """A `RequeueAfter` standing for ``exc`` when every error it is made of (a failed
    finalizer's cleanups, a group's errors, at any depth) is one: raised "from any depth", it
    asks for a later run, not an error's backoff. The shortest delay, their messages. None
    when ``exc`` is made of nothing, or of any other error as well."""
    parts = _parts(exc)
    if not parts:
        return None
    later: list[RequeueAfter] = []
    seen: set[int] = set()
    while parts:
        e = parts.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, RequeueAfter):
            later.append(e)
            continue
        inner = _parts(e)
        if not inner:
            return None
        parts.extend(inner)
    if not later:
        return None
    said = dict.fromkeys(e.message for e in reversed(later) if e.message)
    return RequeueAfter(min(e.delay for e in later), "; ".join(said))


def _named(clusters: frozenset[str]) -> str:
    """``cluster a`` or ``one of clusters a, b``."""
    names = sorted(display_name(n) for n in clusters)
    return f"cluster {names[0]}" if len(names) == 1 else f"one of clusters {', '.join(names)}"


def _raced(exc: BaseException) -> bool:
    """A 409 that a retry with a fresh read resolves: a stale resourceVersion, or a create
    of what a cache that was behind did not show yet (not a server-side apply's field
    conflict, which is another manager's ownership)."""
    if isinstance(exc, AlreadyExists):
        return True
    return isinstance(exc, Conflict) and not exc.field_conflicts


def _requeue_after(result: Result) -> float | None:
    """``result.requeue_after`` in seconds; None when unset or not positive (checked when
    the `Result` was made)."""
    after = result.requeue_after
    if after is None:
        return None
    seconds = after.total_seconds() if isinstance(after, timedelta) else float(after)
    return seconds if seconds > 0 else None


class _Fatal(Exception):
    """What a reconciler raised, to stop the manager with (``SystemExit`` or
    ``KeyboardInterrupt``; any exception with ``recover_panic`` off): carried from the
    reconcile handler to its worker, which logs it, and the reason, and hands it to
    ``on_fatal``."""

    def __init__(self, error: BaseException, why: str) -> None:
        super().__init__(why)
        self.error = error
        self.why = why


class _AsyncRun:
    """An ``async def`` reconcile on the controller's loop, cancelled if its cluster leaves."""

    __slots__ = ("cluster_name", "coroutine", "held", "left", "request", "task")

    def __init__(self, request: Request, coroutine: Any) -> None:
        self.request = request
        self.cluster_name = request.cluster_name
        self.coroutine = coroutine
        self.task: asyncio.Task[Any] | None = None
        self.left = False
        #: it held the event loop (`Controller._watch_loop` found it running)
        self.held = False

    def coroutine_running(self) -> bool:
        """Whether its coroutine is executing now (on the loop's thread)."""
        return bool(getattr(self.coroutine, "cr_running", False))

    def leave(self) -> None:
        """Its cluster left: cancel it (on the loop)."""
        self.left = True
        if self.task is not None:
            self.task.cancel()

    def error(self) -> ClusterLeft:
        return ClusterLeft(
            f"[cluster {display_name(self.cluster_name)}] the cluster left: the reconcile "
            "was cancelled",
            name=self.cluster_name,
        )


class _RequestTask(asyncio.Task[Any]):
    """A task of a controller's loop, with the request of the reconcile that started it
    (None: started by none), read where it is created: its context is a copy of the
    reconcile's."""

    request: Request | None = None


def _request_of(task: object) -> Request | None:
    """The request whose reconcile started ``task`` (None: none, or not a task)."""
    return getattr(task, "request", None) if isinstance(task, _RequestTask) else None


def _function_of(task: object) -> str:
    """The function ``task`` runs, for a log line: ``Class.method``, a nested function by its
    own name."""
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    return str(getattr(coro, "__qualname__", "?")).split("<locals>.")[-1]


class _Escaped(Exception):
    """A ``SystemExit`` or ``KeyboardInterrupt`` an ``async def`` reconcile raised, carried
    out of its task to its worker (which raises it again): escaping a task, asyncio raises
    them out of the loop's ``run_forever``, which would end the loop every reconcile of the
    controller runs on."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(type(error).__name__)
        self.error = error


async def _await(aw: Any, timeout: float | None = None, run: _AsyncRun | None = None) -> Any:
    """Await a reconcile's coroutine (see `_await_run`); a ``SystemExit`` or
    ``KeyboardInterrupt`` it raises is carried to its worker in an `_Escaped`. A
    ``CancelledError`` mcruntime did not cause (not its stop, its cluster's leave nor the
    ``reconcile_timeout``: the task is not being cancelled) is a failure of the request, a
    ``RuntimeError`` raised from it: the task's own would reach the worker as a fresh
    ``concurrent.futures.CancelledError``, without the reconcile's frames and message."""
    try:
        return await _await_run(aw, timeout, run)
    except (SystemExit, KeyboardInterrupt) as exc:
        raise _Escaped(exc) from None
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is None or task.cancelling():  # mcruntime cancelled it (a stop)
            raise
        # it raised one nobody asked for (it awaited a task something cancelled): the task
        # would end cancelled, and its worker meet a bare CancelledError without its frames
        raise RuntimeError(
            "the reconcile raised CancelledError without being cancelled (it awaited a task "
            "that was cancelled, or raised it itself): see the traceback above"
        ) from exc


async def _await_run(aw: Any, timeout: float | None = None, run: _AsyncRun | None = None) -> Any:
    """Await a reconcile's coroutine, cancelled at ``timeout`` or when its cluster leaves
    (``run``): it fails with `ClusterLeft` then, whatever it did once cancelled."""
    if run is None:
        return await _await_in_time(aw, timeout)
    run.task = asyncio.current_task()
    if run.left:
        if inspect.iscoroutine(aw):
            aw.close()
        raise run.error()
    try:
        result = await _await_in_time(aw, timeout)
    except (Exception, asyncio.CancelledError) as exc:
        if run.left:
            raise run.error() from exc
        raise
    if run.left:
        raise run.error()
    return result


async def _await_in_time(aw: Any, timeout: float | None = None) -> Any:
    """Await a reconcile's coroutine; at ``timeout`` cancel it. Once it was cancelled so, its
    outcome is the timeout's `DeadlineExceeded` whatever it did then: a coroutine that caught
    the `CancelledError` and returned did not succeed in time (a retry must run), and what
    its cleanup raised (a write in ``finally:`` not sent, the deadline having passed) is not
    why it failed."""
    if timeout is None:
        return await aw
    began = time.monotonic()
    scope = asyncio.timeout(timeout)
    try:
        async with scope:
            result = await aw
    except BaseException as exc:
        if not scope.expired() or not isinstance(exc, Exception):
            raise
        raise _timed_out(timeout, began) from (None if isinstance(exc, TimeoutError) else exc)
    if scope.expired():
        raise _timed_out(timeout, began)
    return result


def _timed_out(timeout: float, began: float) -> DeadlineExceeded:
    took = time.monotonic() - began
    late = f" (it ended {took:.3g}s after it began)" if took > timeout + _CANCEL_GRACE else ""
    return DeadlineExceeded(
        f"the reconcile did not finish within its deadline ({timeout:g}s) and was cancelled{late}"
    )


#: how long an async reconcile may hold the event loop (run without awaiting) before it is said
LOOP_HELD_AFTER = 0.5

#: how long a coroutine cancelled at its reconcile_timeout may take to end before the
#: overrun is said (its cleanup's awaits, a finally's write)
_CANCEL_GRACE = 1.0


async def _cancel_all(tasks: set[asyncio.Task[Any]]) -> None:
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(0)  # let finished tasks hand their results to waiting workers


def _check_numbers(name: str, options: ControllerOptions) -> None:
    """Refuse, when the controller is built, a numeric option every reconcile would fail on
    (``reconcile_timeout=nan``: each call's deadline refused) or that fails later without
    naming itself (``max_concurrent_reconciles=2.5``: ``range()``'s bare ``TypeError``), as
    read from the environment (``float(os.getenv(...))``). Each error names the controller,
    the option and the value."""
    counts = {
        # 0: the default
        "max_concurrent_reconciles": (options.max_concurrent_reconciles, 0, "(0 for the default)"),
        "max_concurrent_reconciles_per_cluster": (
            options.max_concurrent_reconciles_per_cluster,
            1,
            "",
        ),
    }
    for option, (value, least, note) in counts.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(
                f"controller {name!r}: {option} must be an int, got {value!r} "
                f"({type(value).__name__})"
            )
        if value < least:
            raise ValueError(
                f"controller {name!r}: {option} must be at least 1{' ' + note if note else ''}, "
                f"got {value}"
            )
    seconds = {
        "reconcile_timeout": options.reconcile_timeout,
        "cache_sync_timeout": options.cache_sync_timeout,  # (0: the default)
    }
    for option, timeout in seconds.items():
        if timeout is None:
            continue
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError(
                f"controller {name!r}: {option} must be a number of seconds, got {timeout!r}"
            )
        zero_ok = option == "cache_sync_timeout"
        if not math.isfinite(timeout) or timeout < 0 or (timeout == 0 and not zero_ok):
            raise ValueError(
                f"controller {name!r}: {option} must be positive (a finite number of seconds), "
                f"got {timeout}"
            )


def _check_reconciler(name: str, reconciler: object) -> None:
    """Refuse, when the controller is built, a reconciler that every request would fail on:
    one that is not callable (an object whose ``reconcile`` method was meant), or that
    cannot be called with the request alone."""
    if not callable(reconciler):
        hint = (
            f"; pass its method, {type(reconciler).__name__}(...).reconcile"
            if callable(getattr(reconciler, "reconcile", None))
            else ""
        )
        raise TypeError(
            f"controller {name!r}: the reconciler {reconciler!r} is not callable: pass a "
            f"function of the request, or an object with __call__(self, request){hint}"
        )
    signature = one_argument_mismatch(reconciler)
    if signature is not None:
        hint = (
            " (Go's ctx has no counterpart: take the request only; the reconcile's deadline "
            "(reconcile_timeout) applies to its client calls by itself)"
            if takes_go_ctx(signature)
            else ""
        )
        raise TypeError(
            f"controller {name!r}: the reconciler {reconciler!r} cannot be called with the "
            f"request alone: its parameters are {signature}{hint}"
        )


#: where a worker's stack enters the reconciler (`ReconcileInFlight.stack` starts below it)
_CALL_RECONCILER = Controller._call_reconciler.__code__
