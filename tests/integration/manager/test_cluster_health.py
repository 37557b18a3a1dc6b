"""Hung and dead clusters are noticed within a bound, reported by name, and recover promptly."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import Fleet, wait_for
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.manager._health import _MAX_RETRY_PROBES, ClusterHealth
from mcruntime.providers.clusters import Provider
from tests._httpserver import Handler, serving
from tests._logs import logged
from tests.integration.manager._http import get

pytestmark = pytest.mark.timeout(90)

#: short health timings so the test runs in seconds; the bound is interval + timeout + tick
INTERVAL, TIMEOUT, RETRY = 1.0, 0.5, 0.2
BOUND = INTERVAL + TIMEOUT + RETRY + 1.0


def cm(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


class Setup:
    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.provider = Provider()
        for name in fleet.names:
            self.provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
        self.mgr = Manager(
            provider=self.provider,
            options=ManagerOptions(
                health_probe_bind_address="127.0.0.1:0",
                cluster_health_interval=INTERVAL,
                cluster_health_timeout=TIMEOUT,
                cluster_health_retry_interval=RETRY,
            ),
        )
        self.seen: dict[tuple[str, str], float] = {}

        def reconcile(req: mcruntime.Request) -> None:
            self.seen.setdefault((req.cluster_name, req.name), time.monotonic())

        mcruntime.controller_managed_by(self.mgr).for_("v1/ConfigMap").complete(reconcile)

    def create(self, cluster: str, name: str) -> float:
        c = Cluster.from_kubeconfig(self.fleet[cluster].kubeconfig(), name="test-writer")
        try:
            c.client.create(cm(name))
        finally:
            c.stop()
        return time.monotonic()

    def healthy(self, cluster: str) -> float | None:
        return self.mgr.metrics.sample("mcruntime_cluster_healthy", {"cluster": cluster})


@pytest.fixture
def setup(make_envtest_fleet: Callable[..., Fleet]) -> Iterator[Setup]:
    s = Setup(make_envtest_fleet(2, prefix="h"))
    s.mgr.start()
    wait_for(lambda: len(s.mgr.engaged_clusters()) == 2, 15, "both clusters engaged")
    try:
        yield s
    finally:
        for server in s.fleet:
            server.thaw()
        s.mgr.stop(10)


def test_a_hung_cluster_is_reported_by_name_within_the_bound_and_recovers_promptly(
    setup: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    hung, ok = setup.fleet.names
    assert setup.healthy(hung) == 1.0
    caplog.set_level(logging.INFO, logger="mcruntime.manager")

    def lines(level: int) -> list[str]:
        return logged(caplog, level, starting=f"cluster={hung} ")

    frozen_at = time.monotonic()
    setup.fleet.freeze(hung)
    wait_for(lambda: setup.healthy(hung) == 0.0, BOUND + 2, "the hung cluster flagged")
    detected = time.monotonic() - frozen_at
    assert detected < BOUND, detected
    # the state (and so the gauge) changes first, then the prober logs
    wait_for(lambda: lines(logging.WARNING), 5, "the hung cluster's warning")
    warnings = lines(logging.WARNING)
    assert len(warnings) == 1, warnings  # one warning per failure streak, with the reason
    assert warnings[0].startswith(f"cluster={hung} health: probing GET /readyz failed: ")
    assert "within 0.5s" in warnings[0]
    # shown in /readyz detail without failing readiness (a provider cluster), healthy one fine
    address = setup.mgr.health_probe_address
    assert address is not None
    status, body = get(address, "/readyz?verbose")
    assert status == 200, body
    assert f"[!]cluster/{hung} not answering" in body and f"[+]cluster/{ok} ok" in body
    assert setup.healthy(ok) == 1.0
    assert setup.mgr.metrics.sample(
        "mcruntime_cluster_engagement_state", {"cluster": hung, "state": "engaged"}
    )
    # the healthy cluster keeps being served meanwhile
    t_ok = setup.create(ok, "while-hung")
    wait_for(lambda: (ok, "while-hung") in setup.seen, 5, "the healthy cluster served")
    assert setup.seen[(ok, "while-hung")] - t_ok < 2
    # no more warnings while the streak goes on (several failed probes later)
    wait_for(lambda: time.monotonic() - frozen_at > detected + 3 * RETRY, 5, "a few more probes")
    assert len(lines(logging.WARNING)) == 1
    # thaw: healthy again within about one retry interval, and new objects reach the reconciler
    setup.fleet.thaw(hung)
    thawed = time.monotonic()
    wait_for(lambda: setup.healthy(hung) == 1.0, 5, "recovery noticed")
    assert time.monotonic() - thawed < RETRY + TIMEOUT + 1
    wait_for(lambda: [m for m in lines(logging.INFO) if "works again" in m], 5, "recovery logged")
    (recovery,) = [m for m in lines(logging.INFO) if "works again" in m]
    assert recovery.startswith(f"cluster={hung} health: probing GET /readyz works again after ")
    assert recovery.endswith("failed attempts; re-watching")
    assert len(lines(logging.WARNING)) == 1
    t_new = setup.create(hung, "after-thaw")
    wait_for(lambda: (hung, "after-thaw") in setup.seen, 5, "the recovered cluster served")
    assert setup.seen[(hung, "after-thaw")] - t_new < 2


def test_a_dead_api_server_that_returns_is_rewatched_in_seconds_not_after_the_backoff(
    setup: Setup,
) -> None:
    dead, _ = setup.fleet.names
    server = setup.fleet[dead]
    server.stop()
    # long enough for the informers' reconnect backoff to grow past several seconds
    wait_for(lambda: setup.healthy(dead) == 0.0, BOUND + 2, "the dead cluster flagged")
    informers = setup.mgr.get_cluster(dead).cache.informers().values()
    wait_for(lambda: all(i.last_error for i in informers), 15, "the informers failing")
    # the fault itself: down ~8 s, so the informers' next reconnect attempt is ~4 s away
    # (backoff 0.2 s doubling: attempts at 0, 0.2, 0.6, 1.4, 3.0, 6.2, 12.6 s)
    time.sleep(6.5)
    server.start()
    back = time.monotonic()
    wait_for(lambda: setup.healthy(dead) == 1.0, 5, "recovery noticed")
    t_new = setup.create(dead, "after-restart")
    wait_for(lambda: (dead, "after-restart") in setup.seen, 10, "the restarted cluster served")
    assert setup.seen[(dead, "after-restart")] - back < 2.0
    assert setup.seen[(dead, "after-restart")] - t_new < 1.5


def test_readyz_counts_a_hung_cluster_silent_since_its_last_answer_not_since_the_probe_failed(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    # longer timings than the fixture's: the silence before detection is interval + timeout
    interval, timeout = 2.0, 2.0
    fleet = make_envtest_fleet(1, prefix="silent")
    (name,) = fleet.names
    provider = Provider()
    provider.add(name, Cluster.from_kubeconfig(fleet[name].kubeconfig(), name=name))
    mgr = Manager(
        provider=provider,
        options=ManagerOptions(
            health_probe_bind_address="127.0.0.1:0",
            cluster_health_interval=interval,
            cluster_health_timeout=timeout,
            cluster_health_retry_interval=RETRY,
        ),
    )
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    mgr.start()
    try:
        wait_for(lambda: mgr.engaged_clusters() == [name], 15, "the cluster engaged")
        fleet.freeze(name)
        frozen_at = time.monotonic()
        wait_for(
            lambda: mgr.metrics.sample("mcruntime_cluster_healthy", {"cluster": name}) == 0.0,
            interval + timeout + 5,
            "the hung cluster flagged",
        )
        address = mgr.health_probe_address
        assert address is not None
        status, body = get(address, "/readyz?verbose")
        silent = time.monotonic() - frozen_at
        assert status == 200, body
        match = re.search(rf"\[!\]cluster/{name} not answering for (\d+)s: ", body)
        assert match is not None, body
        # what an SRE reads is how long it has been silent (at least interval + timeout),
        # not how long ago the probe that noticed it gave up (about 0 s); it was last heard
        # at most one interval before the freeze
        assert timeout + 1 <= int(match.group(1)) <= silent + interval + 1, (match.group(1), silent)
    finally:
        fleet.thaw(name)
        mgr.stop(10)


def test_a_cluster_that_stops_answering_is_noticed_in_time_however_many_are_down_already(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    """A region cut off is many hung clusters at once, and each of their probes holds a
    thread for its whole deadline: neither the outage itself (60 at once) nor the re-probes
    of the clusters known to be down may delay noticing the next ones that stop answering.
    (Eight probe threads flagged the last of the 60 after 8 s; 64 of them without a cap on
    re-probes, the later clusters after 5.9 s: the bound is 4.7 s.)"""
    interval, timeout, retry = 0.5, 3.0, 0.2
    fleet = make_envtest_fleet(68, prefix="r", tls=False)
    flagged: dict[str, float] = {}
    health = ClusterHealth(
        interval=interval,
        timeout=timeout,
        retry_interval=retry,
        on_unhealthy=lambda name, cluster: flagged.setdefault(name, time.monotonic()),
    )
    with _probing(fleet, health):
        # bound: silent for `interval`, then one probe's deadline, a scheduler tick and slack
        bound = interval + timeout + retry + 1.0

        def freeze_and_time(names: list[str]) -> float:
            """Freeze ``names``; how long until the last of them was flagged."""
            frozen_at = time.monotonic()
            for name in names:
                fleet.freeze(name)
            wait_for(lambda: set(names) <= set(flagged), 20, f"{len(names)} clusters flagged")
            return max(flagged[n] for n in names) - frozen_at

        slowest = freeze_and_time(fleet.names[:60])
        assert slowest < bound, f"the last of the region flagged after {slowest:.1f}s"
        # the region stays down and is re-probed; more clusters stop answering meanwhile
        slowest = freeze_and_time(fleet.names[60:])
        assert slowest < bound, f"a cluster that stopped later flagged after {slowest:.1f}s"


def test_a_cluster_hung_from_the_start_is_noticed_after_the_probe_timeout_not_the_interval(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    """A member engaged hung (its discovery and first lists due at once, none answered)
    holds a manager's start until it is flagged: it is probed once silent for the probe's
    timeout, not for the whole interval (10 + 5 s by default; now 5 + 5)."""
    interval, timeout, retry = 30.0, 0.5, 0.2
    fleet = make_envtest_fleet(2, prefix="s", tls=False)
    fleet.freeze(fleet.names[0])
    flagged: dict[str, float] = {}
    health = ClusterHealth(
        interval=interval,
        timeout=timeout,
        retry_interval=retry,
        on_unhealthy=lambda name, cluster: flagged.setdefault(name, time.monotonic()),
    )
    began = time.monotonic()
    with _probing(fleet, health):
        wait_for(lambda: fleet.names[0] in flagged, 20, "the hung cluster flagged")
        assert flagged[fleet.names[0]] - began < 2 * timeout + retry + 1.5
        # the one that answers its probe keeps the interval from then on
        assert fleet.names[1] not in flagged


@contextlib.contextmanager
def _probing(fleet: Fleet, health: ClusterHealth) -> Iterator[None]:
    """``health`` probing a cluster of each server of ``fleet``; all thawed and stopped after."""
    clusters = {n: Cluster.from_kubeconfig(fleet[n].kubeconfig(), name=n) for n in fleet.names}
    try:
        for name, cluster in clusters.items():
            health.track(name, cluster)
        health.start()
        yield
    finally:
        for server in fleet:
            server.thaw()
        health.stop()
        for cluster in clusters.values():
            cluster.stop()


def test_with_more_clusters_down_than_re_probes_may_run_each_is_re_probed_in_turn(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    """The re-probes of clusters known to be down are capped (16 at once): with more down,
    they take turns, so one that answers again is noticed within a few probe deadlines,
    whichever it is (the first clusters tracked took every turn: a later one that came back
    stayed flagged, its watches and reconciles waiting, as long as they were down)."""
    interval, timeout, retry = 0.5, 1.0, 0.2
    fleet = make_envtest_fleet(_MAX_RETRY_PROBES + 4, prefix="t", tls=False)
    flagged: set[str] = set()
    recovered: dict[str, float] = {}
    health = ClusterHealth(
        interval=interval,
        timeout=timeout,
        retry_interval=retry,
        on_unhealthy=lambda name, cluster: flagged.add(name),
        on_recovered=lambda name, cluster: recovered.setdefault(name, time.monotonic()),
    )
    with _probing(fleet, health):
        for name in fleet.names:
            fleet.freeze(name)
        wait_for(lambda: flagged == set(fleet.names), 20, "every cluster flagged")
        last = fleet.names[-1]  # tracked last: the last in line
        fleet.thaw(last)
        back = time.monotonic()
        # two rounds of re-probes (20 down, 16 at a time), a tick and slack
        wait_for(lambda: last in recovered, 4 * timeout + 2, f"{last} noticed answering again")
        assert recovered[last] - back < 2 * timeout + retry + 1.5


def test_a_cluster_is_flagged_stuck_when_its_probe_got_no_answer_or_its_storage_is_down(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    """``stuck`` decides whether the manager cuts a flagged cluster's calls in flight: a hung
    cluster's would wait for their deadlines, and one whose storage is down for the server's
    request timeout; a refusing one's fail at once by themselves."""
    fleet = make_envtest_fleet(3, names=["hung", "dead", "etcd-down"], tls=False)
    flagged: dict[str, str] = {}
    health = ClusterHealth(interval=0.3, timeout=0.5, retry_interval=0.2)

    def on_unhealthy(name: str, cluster: Cluster) -> None:
        state = health.state(name)
        assert state is not None
        flagged[name] = state.stuck

    health.on_unhealthy = on_unhealthy
    with _probing(fleet, health):
        fleet.freeze("hung")
        fleet["dead"].stop()
        fleet.storage_outage("etcd-down")
        wait_for(lambda: len(flagged) == 3, 10, "the three clusters flagged")
        fleet["dead"].start()
        fleet.storage_restored("etcd-down")
    assert flagged == {
        "hung": "the cluster is not answering (its health probe, GET /readyz, got no answer "
        "within 0.5s)",
        "dead": "",
        "etcd-down": "the cluster's storage is down (its health probe, GET /readyz: not ready: "
        "etcd, etcd-readiness failed)",
    }


def test_a_refusing_cluster_that_then_stops_answering_is_flagged_stuck_then(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    """A cluster flagged while it refused (its calls fail at once, nothing to cut) that comes
    back hung: its calls in flight now wait in vain, so the hook is called again to cut them."""
    fleet = make_envtest_fleet(1, names=["flaky"], tls=False)
    flagged: list[str] = []
    health = ClusterHealth(interval=0.3, timeout=0.5, retry_interval=0.2)

    def on_unhealthy(name: str, cluster: Cluster) -> None:
        state = health.state(name)
        assert state is not None
        flagged.append(state.stuck)

    health.on_unhealthy = on_unhealthy
    server = fleet["flaky"]
    with _probing(fleet, health):
        server.stop()
        wait_for(lambda: flagged == [""], 10, "the refusing cluster flagged")
        server.freeze()  # (held across the start: it starts hung)
        server.start()
        wait_for(lambda: len(flagged) == 2, 10, "the hung cluster flagged stuck")
        server.thaw()
        wait_for(lambda: getattr(health.state("flaky"), "healthy", False), 10, "healthy again")
    assert flagged == [
        "",
        "the cluster is not answering (its health probe, GET /readyz, got no answer within 0.5s)",
    ]


class _ShuttingDown(Handler):
    """An API server in its graceful shutdown, as kube-apiserver answers ``/readyz`` then: its
    ``shutdown`` check fails (load balancers move away) while it still serves requests."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        path, _, query = self.path.partition("?")
        if path != "/readyz":
            self.answer(200, b'{"kind":"Status"}')
        elif "exclude=shutdown" in query.split("&"):
            self.answer(200, b"ok", "text/plain")
        else:
            self.answer(
                500,
                b"[+]ping ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n",
                "text/plain",
            )


def test_an_api_server_in_its_graceful_shutdown_still_serving_is_not_flagged() -> None:
    # a replica going away behind a load balancer (an upgrade rolling through) still serves
    # for --shutdown-delay-duration: its cluster is not held back for it
    health = ClusterHealth(interval=0.1, timeout=1.0, retry_interval=0.1)
    flagged: list[str] = []
    health.on_unhealthy = lambda name, cluster: flagged.append(name)
    with serving(_ShuttingDown, "draining") as cluster:
        health.track("draining", cluster)
        health.start()
        try:
            wait_for(lambda: cluster.rest.last_response > 0, 5, "a probe answered")
            state = health.state("draining")
            assert state is not None and state.healthy and not flagged
        finally:
            health.stop()


def test_a_manager_left_running_as_the_interpreter_exits_ends_its_probes_quietly(
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    """A program that exits (a crash, ``sys.exit``) without stopping its manager: once
    concurrent.futures' atexit hook has run, its pools take no more work. The scheduler
    printed ``Exception in thread mcruntime/health/local: RuntimeError: cannot schedule new
    futures after shutdown`` over the program's own last words; it now ends quietly."""
    fleet = make_envtest_fleet(1, prefix="x", tls=False)
    failures: list[BaseException | None] = []
    hook = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)
    health = ClusterHealth(interval=INTERVAL, timeout=TIMEOUT, retry_interval=RETRY)
    try:
        with _probing(fleet, health):
            assert health._pool is not None and health._thread is not None
            health._pool.shutdown(wait=False)  # what the atexit hook does to every pool
            health.probe_all()  # a probe of the cluster is due at once
            thread = health._thread
            wait_for(lambda: not thread.is_alive(), 10, "the scheduler ended")
    finally:
        threading.excepthook = hook
    assert failures == []
