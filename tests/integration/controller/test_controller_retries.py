"""Requeues and errors: requeue_after, rate-limited requeue and error backoff timing, TerminalError,
and a failing request that does not block the others."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, Request, RequeueAfter, Result, TerminalError
from mcruntime.cluster import Cluster
from mcruntime.controller import Controller
from mcruntime.envtest import wait_for
from mcruntime.errors import ClusterNotAnswering, NotFound, Unreachable
from mcruntime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
)
from tests._logs import logged
from tests.integration.controller._controller_helpers import Calls, configmap, run_in_thread

pytestmark = pytest.mark.timeout(30)

#: client-go's default per-item backoff: 5 ms doubling
BASE = 0.005


def run(mgr: Manager, reconcile: Callable[[Request], Any], **options: Any) -> Controller:
    builder = mcruntime.controller_managed_by(mgr).named("retries").for_("v1/ConfigMap")
    if options:
        builder = builder.with_options(**options)
    ctrl = builder.complete(reconcile)
    mgr.start()
    return ctrl


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def assert_doubling(observed: list[float], first: float) -> None:
    """Each gap is at least its backoff delay and at most a generous bound above it."""
    for i, gap in enumerate(observed):
        want = first * 2**i
        assert gap >= want * 0.95, (
            f"retry {i + 1} came after {gap * 1000:.1f}ms, before its {want * 1000:.0f}ms backoff"
        )
        assert gap <= want * 2 + 0.25, (
            f"retry {i + 1} came after {gap * 1000:.1f}ms, want ~{want * 1000:.0f}ms"
        )


def test_requeue_after_reruns_after_the_delay(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    calls = Calls()

    def reconcile(req: Request) -> Result | None:
        calls.record(req)
        return Result(requeue_after=0.4) if calls.count(req.name) == 1 else None

    run(make_manager(), reconcile)
    kube.client.create(configmap("later"))
    calls.wait_count(2, "later", timeout=5)
    (gap,) = gaps(calls.times("later"))
    assert 0.4 <= gap < 2.0


def test_an_object_deleted_while_its_requeue_after_waits_leaves_nothing_queued(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    # an hourly re-check of objects with generated names (Jobs, Pods): the delete event's
    # reconcile is the last one; its hour-long wait must not stay queued (and run again)
    calls = Calls()
    mgr = make_manager()

    def reconcile(req: Request) -> Result | None:
        calls.record(req)
        try:
            mgr.get_cluster(req.cluster_name).client.get("v1/ConfigMap", req.name, req.namespace)
        except NotFound:
            return None
        return Result(requeue_after=3600)

    ctrl = run(mgr, reconcile)
    kube.client.create(configmap("job-x7k2p"))
    calls.wait_count(1, "job-x7k2p")
    wait_for(lambda: len(ctrl.queue), equals=1, what="the hourly re-check queued")
    kube.client.delete("v1/ConfigMap", "job-x7k2p", "default")
    calls.wait_count(2, "job-x7k2p")
    wait_for(lambda: len(ctrl.queue), equals=0, what="nothing of the deleted object queued")


def test_requeue_true_reruns_with_exponential_backoff(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    calls = Calls()
    attempts = 8

    def reconcile(req: Request) -> Result:
        calls.record(req)
        return Result(requeue=calls.count(req.name) < attempts)

    ctrl = run(make_manager(), reconcile)
    kube.client.create(configmap("again"))
    calls.wait_count(attempts, "again", timeout=10)
    assert_doubling(gaps(calls.times("again")), BASE)
    wait_for(lambda: not ctrl.queue.in_flight_ages(), what="last reconcile finished")
    assert len(ctrl.queue) == 0, "a reconcile returning Result() is not requeued"
    assert ctrl.queue.num_requeues(Request("default", "again")) == 0, "success forgets the backoff"


def test_a_reconcile_that_caught_a_call_not_sent_runs_again_with_backoff_until_it_is_sent(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    # the call went to a cluster refusing calls (found not answering) and the reconcile went
    # on: it runs again though it returned None. Nothing holds that cluster back here (as
    # when it answered before the reconcile ended): at once, with backoff, not in a spin
    calls = Calls()
    refused = 6
    outside = Cluster(kube.config, name="outside")  # (a client of its own to refuse calls)
    outside.rest.refuse_calls("the cluster is not answering (a test)")

    def reconcile(req: Request) -> None:
        calls.record(req)
        try:
            outside.uncached_client.get("v1/ConfigMap", "unsent", "default")
        except ClusterNotAnswering:
            if calls.count(req.name) == refused:
                outside.rest.accept_calls()
        except NotFound:
            pass

    try:
        ctrl = run(make_manager(), reconcile)
        kube.client.create(configmap("unsent"))
        calls.wait_count(refused + 1, "unsent", timeout=10)
        assert_doubling(gaps(calls.times("unsent"))[: refused - 1], BASE)
        wait_for(lambda: not ctrl.queue.in_flight_ages(), what="last reconcile finished")
        assert len(ctrl.queue) == 0, "run again once its call was sent"
        assert ctrl.queue.num_requeues(Request("default", "unsent")) == 0
    finally:
        outside.stop()
    assert calls.count("unsent") == refused + 1


def test_errors_are_retried_with_doubling_backoff(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        raise RuntimeError("always broken")

    run(make_manager(), reconcile)
    kube.client.create(configmap("broken"))
    calls.wait_count(9, "broken", timeout=10)
    assert_doubling(gaps(calls.times("broken"))[:8], BASE)


def _terminal_once(
    kube: Cluster, make_manager: Callable[..., Manager], error: Callable[[], Exception]
) -> tuple[Manager, list[BaseException]]:
    """Run a controller whose reconcile of ``fatal`` raises ``error()``: it must run once, leave
    nothing queued or delayed, hold back no other request, and count one terminal error.
    The manager and what ``on_failure`` got."""
    calls = Calls()
    failures: list[BaseException] = []

    def reconcile(req: Request) -> None:
        calls.record(req)
        if req.name == "fatal":
            raise error()

    mgr = make_manager()
    ctrl = (
        mcruntime.controller_managed_by(mgr)
        .named("retries")
        .for_("v1/ConfigMap")
        .complete(reconcile)
    )
    ctrl.on_failure = lambda req, exc: failures.append(exc)
    mgr.start()
    kube.client.create(configmap("fatal"))
    calls.wait_count(1, "fatal")
    wait_for(lambda: not ctrl.queue.in_flight_ages(), what="terminal reconcile finished")
    assert len(ctrl.queue) == 0, "nothing queued or delayed after a terminal error"
    kube.client.create(configmap("after"))
    calls.wait_count(1, "after")
    assert calls.count("fatal") == 1
    labels = {"controller": "retries", "cluster": "local"}
    sample = mgr.metrics.registry.get_sample_value
    assert sample("controller_runtime_terminal_reconcile_errors_total", labels) == 1.0
    return mgr, failures


def test_terminal_error_is_not_retried(kube: Cluster, make_manager: Callable[..., Manager]) -> None:
    mgr, _ = _terminal_once(kube, make_manager, lambda: TerminalError("cannot be fixed"))
    # counted in both error counters, as controller-runtime counts it: the usual alert on
    # rate(controller_runtime_reconcile_errors_total) fires for terminal failures too
    labels = {"controller": "retries", "cluster": "local"}
    assert (
        mgr.metrics.registry.get_sample_value("controller_runtime_reconcile_errors_total", labels)
        == 1.0
    )


def _finalize_error() -> Exception:
    from mcruntime.finalizer import Finalizers

    def cleanup(obj: Any) -> None:
        raise TerminalError("the bucket's account is closed: nothing to clean up with")

    f = Finalizers()
    f.register("example.com/bucket", cleanup)
    obj = {"metadata": {"name": "x", "finalizers": ["example.com/bucket"]}}
    obj["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    error = f.finalize(obj).error
    assert error is not None
    return error


def _raised_from() -> Exception:
    try:
        raise TerminalError("spec.size is not a size")
    except TerminalError as exc:
        wrapped = RuntimeError("validating the spec")
        wrapped.__cause__ = exc  # raise ... from exc
        return wrapped


@pytest.mark.parametrize(
    "wrapped",
    [
        _raised_from,
        lambda: ExceptionGroup("fan-out", [ValueError("x"), TerminalError("gone for good")]),
        _finalize_error,
    ],
    ids=["raise from", "in a group", "a finalizer's cleanup"],
)
def test_an_error_wrapping_a_terminal_error_is_terminal(
    kube: Cluster, make_manager: Callable[..., Manager], wrapped: Callable[[], Exception]
) -> None:
    # Go: errors.Is(err, reconcile.TerminalError(nil)) looks through %w and errors.Join, and
    # controller-runtime's finalizer.Finalize aggregates its finalizers' errors: one wrapped
    # terminal error was retried with backoff for ever
    _, failures = _terminal_once(kube, make_manager, wrapped)
    assert type(failures[0]) is not TerminalError  # on_failure gets the error as raised


def test_an_error_raised_while_handling_a_terminal_one_is_retried(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    # its implicit __context__ is no wrapping: Go wraps only with %w
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        try:
            raise TerminalError("bad spec")
        except TerminalError:
            raise RuntimeError("reporting it failed")  # noqa: B904 (the point: no cause)

    run(make_manager(), reconcile)
    kube.client.create(configmap("retried"))
    calls.wait_count(3, "retried", timeout=10)


def test_a_failing_request_does_not_block_others(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        if req.name == "bad":
            raise RuntimeError("bad stays bad")

    run(make_manager(), reconcile, max_concurrent_reconciles=1)
    kube.client.create(configmap("bad"))
    calls.wait_count(3, "bad")
    others = [f"good-{i}" for i in range(20)]
    for name in others:
        kube.client.create(configmap(name))
    calls.wait(lambda c: all(c.count(n) >= 1 for n in others), what="every good request reconciled")
    failing_before = calls.count("bad")
    calls.wait_count(failing_before + 1, "bad", timeout=10)
    assert all(calls.count(n) == 1 for n in others)


def test_a_failed_reconcile_logs_controller_cluster_and_request(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime")
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        if calls.count(req.name) == 1:
            raise RuntimeError("first try fails")

    run(make_manager(), reconcile)
    kube.client.create(configmap("logged"))
    calls.wait_count(2, "logged")
    failures = [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR and "first try fails" in r.getMessage()
    ]
    assert failures, [r.getMessage() for r in caplog.records]
    line = failures[0].getMessage()
    for part in ("controller=retries", "cluster=local", "request=default/logged"):
        assert part in line, line
    assert failures[0].exc_info is not None, "the traceback is logged"


def test_a_reconcile_that_keeps_failing_the_same_way_logs_its_traceback_once_per_streak(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    # a request retried with backoff for hours: its traceback once, then one line a retry,
    # until it succeeds or fails another way; every failure is still counted
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    calls = Calls()
    errors = ["db down"] * 3 + ["db full"] * 2 + [""] + ["db down"] * 2

    def reconcile(req: Request) -> None:
        calls.record(req)
        n = calls.count(req.name)
        if n <= len(errors) and errors[n - 1]:
            raise RuntimeError(errors[n - 1])

    mgr = make_manager()
    run(mgr, reconcile)
    kube.client.create(configmap("flaky"))
    calls.wait_count(errors.index("") + 1, "flaky")  # it succeeded: no retry
    kube.client.patch("v1/ConfigMap", "flaky", {"data": {"again": "yes"}}, "default")
    calls.wait_count(len(errors) + 1, "flaky")
    wait_for(lambda: len(said(caplog, "flaky")) == len(errors) - 1)
    prefix = "controller=retries cluster=local request=default/flaky: "
    assert said(caplog, "flaky") == [
        (prefix + "reconcile failed (retry 1): RuntimeError: db down", True),
        (prefix + "reconcile still failing (retry 2): RuntimeError: db down", False),
        (prefix + "reconcile still failing (retry 3): RuntimeError: db down", False),
        (prefix + "reconcile failed (retry 4): RuntimeError: db full", True),
        (prefix + "reconcile still failing (retry 5): RuntimeError: db full", False),
        # it succeeded, then an update failed: a new streak
        (prefix + "reconcile failed (retry 1): RuntimeError: db down", True),
        (prefix + "reconcile still failing (retry 2): RuntimeError: db down", False),
    ]
    (sample,) = [
        s
        for metric in mgr.metrics.reconcile_errors.collect()
        for s in metric.samples
        if s.name.endswith("_total") and s.labels.get("controller") == "retries"
    ]
    assert sample.value == len(errors) - 1


def said(caplog: pytest.LogCaptureFixture, name: str) -> list[tuple[str, bool]]:
    """The errors logged about request ``default/<name>``, each with whether it has a traceback."""
    return [
        (m.split(" (its traceback")[0], r.exc_info is not None)
        for r in caplog.records
        if r.levelno == logging.ERROR and f"request=default/{name}:" in (m := r.getMessage())
    ]


def test_a_custom_rate_limiter_sets_the_retry_delays(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        raise RuntimeError("retry me")

    limiter = ItemExponentialFailureRateLimiter(base=0.1, max=0.1)
    run(make_manager(), reconcile, rate_limiter=limiter)
    kube.client.create(configmap("steady"))
    calls.wait_count(4, "steady")
    for gap in gaps(calls.times("steady")):
        assert 0.1 * 0.95 <= gap < 0.1 * 2 + 0.25


def test_the_overall_bucket_spreads_retries_of_many_requests(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        if calls.count(req.name) == 1:
            raise RuntimeError("first try fails")

    # no per-item delay, an overall bucket of 20 retries a second with a burst of 5
    limiter = MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0, 0), BucketRateLimiter(qps=20, burst=5)
    )
    run(make_manager(), reconcile, rate_limiter=limiter, max_concurrent_reconciles=4)
    names = [f"many-{i}" for i in range(15)]
    for name in names:
        kube.client.create(configmap(name))
    calls.wait(lambda c: all(c.count(n) >= 2 for n in names), timeout=10, what="every retry ran")
    retries = sorted(calls.times(n)[1] for n in names)
    # 5 retries from the burst, the other 10 at 20/s: the last one at least ~0.5s after the first
    assert retries[-1] - retries[0] >= 10 / 20 * 0.9


def test_requeue_after_accepts_a_timedelta(
    kube: Cluster, make_manager: Callable[..., Manager]
) -> None:
    calls = Calls()

    def reconcile(req: Request) -> Result | None:
        calls.record(req)
        return (
            Result(requeue_after=timedelta(milliseconds=300))
            if calls.count(req.name) == 1
            else None
        )

    run(make_manager(), reconcile)
    kube.client.create(configmap("delta"))
    calls.wait_count(2, "delta", timeout=5)
    (gap,) = gaps(calls.times("delta"))
    assert 0.3 <= gap < 2.0


def test_a_malformed_result_is_an_error_and_the_worker_survives(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    calls = Calls()

    def reconcile(req: Request) -> Result | None:
        calls.record(req)
        if req.name == "odd" and calls.count("odd") == 1:
            return Result(requeue_after="soon")  # type: ignore[arg-type]
        return None

    run(make_manager(), reconcile, max_concurrent_reconciles=1)
    kube.client.create(configmap("odd"))
    calls.wait_count(2, "odd")  # retried with backoff, like an exception
    kube.client.create(configmap("next"))
    calls.wait_count(1, "next")  # the only worker is still alive
    assert any(
        "requeue_after" in r.getMessage() and "request=default/odd" in r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR
    )


@pytest.mark.parametrize(
    ("name", "returned", "said"),
    [
        # kopf stores what a handler returns
        ("kopf-style", {"status": "done"}, "a dict, not a Result or None"),
        # ported from Go: return ctrl.Result{RequeueAfter: time.Minute}, nil
        (
            "go-style",
            (Result(requeue_after=60), None),
            "a tuple, not a Result or None (not Go's (Result, error) pair: return the Result, "
            "raise the error)",
        ),
    ],
)
def test_a_reconciler_returning_neither_a_result_nor_none_is_a_terminal_error(
    kube: Cluster,
    make_manager: Callable[..., Manager],
    caplog: pytest.LogCaptureFixture,
    name: str,
    returned: Any,
    said: str,
) -> None:
    # a return value that is not a Result is a mistake no retry fixes: logged once, not
    # retried, and the worker goes on
    calls = Calls()

    def reconcile(req: Request) -> Any:
        calls.record(req)
        return returned if req.name == name else None

    mgr = make_manager()
    run(mgr, reconcile, max_concurrent_reconciles=1)
    kube.client.create(configmap(name))
    calls.wait_count(1, name)
    kube.client.create(configmap("after"))
    calls.wait_count(1, "after")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert [m for m in errors if f"request=default/{name}" in m] == [
        f"controller=retries cluster=local request=default/{name}: terminal error, not "
        f"retried: the reconciler returned {said}"
    ]
    assert calls.count(name) == 1


def test_a_write_that_raced_is_said_at_info_until_it_keeps_failing(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    # a 409 from a stale resourceVersion is optimistic concurrency at work: the retry reads
    # anew. Only when it keeps failing is it an ERROR with its traceback.
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    calls = Calls()
    kube.client.create(configmap("stale"))
    stale = kube.uncached_client.get("v1/ConfigMap", "stale", "default")
    kube.uncached_client.patch("v1/ConfigMap", "stale", {"data": {"moved": "on"}}, "default")

    def reconcile(req: Request) -> None:
        calls.record(req)
        if req.name == "stale" and calls.count("stale") <= 5:
            kube.client.update({**stale, "data": {"mine": "x"}})  # always the stale copy

    mgr = make_manager()
    run(mgr, reconcile, max_concurrent_reconciles=1)
    calls.wait_count(6, "stale")
    lines = [
        (r.levelno, r.getMessage(), r.exc_info is not None)
        for r in caplog.records
        if "request=default/stale" in r.getMessage()
    ]
    prefix = "controller=retries cluster=local request=default/stale: "
    raced = (
        "a write raced another or a cache that was behind, retrying (retry {}): "
        '[cluster test-writer] Operation cannot be fulfilled on configmaps "stale": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    assert lines[:3] == [(logging.INFO, prefix + raced.format(n), False) for n in (1, 2, 3)]
    assert [(level, tb) for level, _, tb in lines[3:5]] == [
        (logging.ERROR, True),
        (logging.ERROR, False),
    ]
    assert lines[3][1].startswith(prefix + "reconcile failed (retry 4): ")
    assert lines[4][1].startswith(prefix + "reconcile still failing (retry 5): Conflict: ")


def test_a_raced_write_after_other_failures_is_still_said_at_info(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    # a member that refused for a while (its request retried with backoff), then a write to
    # it that meets a cache that was behind: the race is the first of its streak, not an
    # error because the request was retried before for something else
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    calls = Calls()
    kube.client.create(configmap("late"))
    stale = kube.uncached_client.get("v1/ConfigMap", "late", "default")
    kube.uncached_client.patch("v1/ConfigMap", "late", {"data": {"moved": "on"}}, "default")

    def reconcile(req: Request) -> None:
        calls.record(req)
        n = calls.count("late")
        if req.name != "late" or n > 6:
            return
        if n <= 4:  # a member that refuses (no health check here: retried with backoff)
            raise Unreachable("[cluster member] cannot reach it: refused", cluster_name="member")
        kube.client.update({**stale, "data": {"mine": "x"}})  # the stale copy: 409

    mgr = make_manager()
    run(mgr, reconcile, max_concurrent_reconciles=1)
    calls.wait_count(7, "late")
    conflicts = [
        (r.levelno, r.exc_info is not None)
        for r in caplog.records
        if "request=default/late" in r.getMessage() and "modified" in r.getMessage()
    ]
    assert conflicts == [(logging.INFO, False), (logging.INFO, False)]


def test_requeue_after_raised_from_a_helper_reruns_after_its_delay_without_an_error(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    # kopf's TemporaryError(delay=...): a helper deep down says "not yet, again in 0.3s"
    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")
    calls = Calls()

    def database_ready() -> None:
        n = calls.count("waits")
        if n < 3:
            raise RequeueAfter(timedelta(seconds=0.3), "the database is not ready")
        if n < 4:
            raise RequeueAfter(0.3, "the database is migrating")
        if n < 5:
            raise RequeueAfter(0.3)

    def reconcile(req: Request) -> None:
        calls.record(req)
        database_ready()

    mgr = make_manager()
    ctrl = run(mgr, reconcile)
    kube.client.create(configmap("waits"))
    calls.wait_count(5, "waits")
    for gap in gaps(calls.times("waits")):
        assert 0.3 <= gap < 0.3 + 0.5, f"requeued after {gap:.3f}s, not the 0.3s asked"

    def lines() -> list[tuple[int, str]]:
        prefix = "controller=retries cluster=local request=default/waits: "
        return [
            (r.levelno, r.getMessage().removeprefix(prefix))
            for r in caplog.records
            if r.getMessage().startswith(prefix)
        ]

    wait_for(lambda: len(lines()) == 5, timeout=10, what="the fifth reconcile's line")
    # its message said once while the request waits on the same thing: a fleet's objects
    # waiting for hours say it once each, not once per requeue
    assert lines() == [
        (logging.INFO, "requeued in 0.3s: the database is not ready"),
        (logging.DEBUG, "requeued in 0.3s: the database is not ready"),
        (logging.INFO, "requeued in 0.3s: the database is migrating"),
        (logging.DEBUG, "requeued in 0.3s"),  # as a returned Result(requeue_after=0.3)
        (logging.DEBUG, "reconciled (success)"),
    ]
    assert ctrl.queue.num_requeues(Request("default", "waits")) == 0  # no backoff built up


def test_a_group_made_only_of_requeue_afters_reruns_after_the_shortest_and_a_mixed_one_fails(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    """Helpers run side by side (a TaskGroup's ExceptionGroup) that each said "later":
    run again after the shortest delay, as one of them raised alone would. With any other
    error among them, it is an error, retried with backoff."""
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    calls = Calls()

    def reconcile(req: Request) -> None:
        calls.record(req)
        later: list[Exception] = [
            RequeueAfter(0.5, "the bucket is not empty"),
            RequeueAfter(0.3, "no quota yet"),
        ]
        if req.name == "mixed":
            later.append(RuntimeError("the bucket service is down"))
        if calls.count(req.name) < 3:
            raise ExceptionGroup("helpers failed", later)

    mgr = make_manager()
    ctrl = run(mgr, reconcile, rate_limiter=ItemExponentialFailureRateLimiter(BASE, 1))
    kube.client.create(configmap("later"))
    kube.client.create(configmap("mixed"))
    calls.wait_count(3, "later")
    calls.wait_count(3, "mixed")
    for gap in gaps(calls.times("later")):
        assert 0.3 <= gap < 0.3 + 0.5, f"requeued after {gap:.3f}s, not the shortest 0.3s"
    said = [
        (r.levelno, r.getMessage()) for r in caplog.records if "request=default/" in r.getMessage()
    ]
    requeued = (
        logging.INFO,
        "controller=retries cluster=local request=default/later: requeued in 0.3s: "
        "the bucket is not empty; no quota yet",
    )
    assert said.count(requeued) == 1  # (its repeat said at debug level, as one raised alone)
    mixed = [(level, text) for level, text in said if "request=default/mixed" in text]
    assert [level for level, _ in mixed] == [logging.ERROR, logging.ERROR]
    assert "reconcile failed (retry 1): ExceptionGroup: helpers failed" in mixed[0][1]
    assert ctrl.queue.num_requeues(Request("default", "later")) == 0  # no backoff built up


@pytest.mark.parametrize("delay", [0, -1, True, "5", float("nan"), float("inf")])
def test_requeue_after_needs_a_positive_delay(delay: Any) -> None:
    with pytest.raises(TypeError, match="RequeueAfter needs a positive, finite delay"):
        RequeueAfter(delay)


@pytest.mark.parametrize(
    "far",
    [Result(requeue_after=1e10), Result(requeue_after=timedelta.max), RequeueAfter(1e12)],
    ids=["centuries", "timedelta.max", "raised"],
)
def test_a_requeue_centuries_ahead_leaves_the_worker_serving(
    kube: Cluster, make_manager: Callable[..., Manager], far: Result | RequeueAfter
) -> None:
    """A delay past ``threading.TIMEOUT_MAX`` once made the work queue raise
    ``OverflowError`` in every worker's next ``get()``: with one worker, nothing was
    reconciled again. Now the request waits and the worker serves the others."""
    calls = Calls()

    def reconcile(req: Request) -> Result | None:
        calls.record(req)
        if req.name != "far":
            return None
        if isinstance(far, RequeueAfter):
            raise far
        return far

    mgr = make_manager()
    ctrl = run(mgr, reconcile, max_concurrent_reconciles=1)
    kube.client.create(configmap("far"))
    calls.wait_count(1, "far")
    kube.client.create(configmap("next"))
    calls.wait_count(1, "next")
    assert [t.is_alive() for t in ctrl._workers] == [True]
    assert calls.count("far") == 1


class _GoStyle:
    def reconcile(self, req: Request) -> None:
        return None


@pytest.mark.parametrize(
    ("reconciler", "message"),
    [
        (_GoStyle(), "is not callable: .* pass its method, _GoStyle\\(...\\).reconcile"),
        (_GoStyle.reconcile, "cannot be called with the request alone: its parameters are "),
        (lambda: None, "cannot be called with the request alone"),
        # ported from Go: func (r *R) Reconcile(ctx context.Context, req ctrl.Request)
        (lambda ctx, req: None, r"its parameters are \(ctx, req\) \(Go's ctx has no counterpart"),
    ],
)
def test_a_reconciler_that_cannot_take_a_request_is_refused_when_the_controller_is_built(
    make_manager: Callable[..., Manager], reconciler: Any, message: str
) -> None:
    builder = mcruntime.controller_managed_by(make_manager()).for_("v1/ConfigMap")
    with pytest.raises(TypeError, match=message):
        builder.complete(reconciler)


def test_without_recover_panic_an_exception_stops_the_manager_and_run_raises_it(
    srv: Any, make_manager: Any
) -> None:
    mgr = make_manager()
    trigger, boom = _crashing(mgr)
    t, raised = run_in_thread(mgr)
    trigger.send({"metadata": {"name": "x", "namespace": "default"}})
    t.join(15)
    assert not t.is_alive(), "the manager kept running after a fatal reconcile error"
    assert raised and isinstance(raised[0], boom)


def _crashing(mgr: Manager) -> tuple[Any, type[Exception]]:
    """A controller whose reconciler raises with ``recover_panic=False``; its trigger and error."""
    from mcruntime.source import Channel

    trigger = Channel()

    class Boom(Exception):
        pass

    def reconcile(req: Any) -> None:
        raise Boom(f"cannot handle {req.name}")

    mcruntime.controller_managed_by(mgr).named("crashy").watches(trigger).with_options(
        recover_panic=False
    ).complete(reconcile)
    return trigger, Boom


def test_a_with_block_raises_the_error_that_stopped_the_manager(
    srv: Any, make_manager: Any
) -> None:
    """A test of an operator inside ``with mgr:`` (kopf's ``KopfRunner``, which re-raises the
    operator's error): the reconciler's fatal error is raised at the block's end, as ``run()``
    raises it, not left to a wait that times out."""
    mgr = make_manager()
    trigger, boom = _crashing(mgr)
    with pytest.raises(boom, match="cannot handle x"), mgr:
        trigger.send({"metadata": {"name": "x", "namespace": "default"}})
        assert mgr.wait(15), "the manager kept running after a fatal reconcile error"


def test_an_error_of_the_with_block_itself_goes_on_naming_the_fatal_one(
    srv: Any, make_manager: Any
) -> None:
    mgr = make_manager()
    trigger, _ = _crashing(mgr)
    with pytest.raises(AssertionError) as raised, mgr:
        trigger.send({"metadata": {"name": "x", "namespace": "default"}})
        assert mgr.wait(15)
        raise AssertionError("what the test waited for never came")
    assert raised.value.__notes__ == [
        "(the manager had stopped on an error of its own: Boom: cannot handle x)"
    ]


def test_writes_a_failing_webhook_answers_with_500_are_one_warning_per_streak(
    kube: Cluster, make_manager: Callable[..., Manager], caplog: pytest.LogCaptureFixture
) -> None:
    """A validating webhook with ``failurePolicy: Fail`` that is down makes the API server
    answer every update with ``500 Internal error occurred: failed calling webhook``: the
    cluster's failure, whatever the object. It is said once, without a traceback, not as an
    error with a traceback for each object and an error at every retry; and its end is said."""
    for name in ("a", "b", "c"):
        kube.client.create(configmap(name))
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "policy"},
        "webhooks": [
            {
                "name": "policy.example.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 1,
                "clientConfig": {"url": "https://127.0.0.1:1/validate"},  # nothing listens
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE"],
                        "resources": ["configmaps"],
                    }
                ],
            }
        ],
    }
    kube.client.create(webhook)
    mgr = make_manager()
    calls = Calls()

    def stamp(req: Request) -> None:
        calls.record(req)
        patch = {"metadata": {"annotations": {"stamped": "yes"}}}
        mgr.get_cluster(req.cluster_name).client.patch("v1/ConfigMap", req.name, patch, "default")

    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")
    run(mgr, stamp)
    wait_for(lambda: calls.count() >= 12, what="retries of the refused writes")
    errors = logged(caplog, logging.ERROR, logger="mcruntime.controller")
    assert errors == [], errors
    (warning,) = [
        r
        for r in caplog.records
        if r.name == "mcruntime.controller" and r.levelno == logging.WARNING
    ]
    assert "controller=retries: reconciling failed: " in warning.getMessage()
    assert 'failed calling webhook "policy.example.com"' in warning.getMessage()
    assert warning.exc_info is None
    kube.client.delete("admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration", "policy")
    wait_for(
        lambda: logged(
            caplog, logging.INFO, containing="controller=retries: reconciling works again"
        ),
        what="the streak's end",
    )
