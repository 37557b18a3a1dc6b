"""Leader election against an embedded API server: take-over rules, release, losing a leader in time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.leaderelection import LeaderElector, LeaseClient, LeaseHolder, LeaseRecord

pytestmark = pytest.mark.timeout(60)

LEASE = 2.0
DEADLINE = 1.5
RETRY = 0.25


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def server(make_envtest_server: Callable[..., Any]) -> Any:
    return make_envtest_server("leader")


@pytest.fixture
def cluster(server: Any) -> Iterator[Cluster]:
    c = Cluster.from_kubeconfig(server.kubeconfig())
    yield c
    c.stop()


@pytest.fixture
def leases(cluster: Cluster) -> LeaseClient:
    return LeaseClient(cluster, "default")


def record(leases: LeaseClient, name: str = "lock") -> LeaseRecord:
    return LeaseRecord.of(leases.get(name, timeout=5))


def test_a_held_lease_is_taken_over_only_after_lease_duration_of_local_time(
    leases: LeaseClient,
) -> None:
    clock_a, clock_b = FakeClock(), FakeClock()
    a = LeaseHolder(leases, "lock", "a", lease_duration=15, clock=clock_a)
    b = LeaseHolder(leases, "lock", "b", lease_duration=15, clock=clock_b)
    assert a.try_acquire_or_renew(5)
    first = record(leases)
    assert (first.holder, first.lease_duration_seconds, first.transitions) == ("a", 15, 0)
    assert first.acquire_time and first.renew_time

    assert not b.try_acquire_or_renew(5)  # first sight: valid for 15 s from now
    assert b.taken() and b.holder == "a"
    clock_b.now += 14.9
    assert not b.try_acquire_or_renew(5)
    clock_b.now += 0.2
    assert b.try_acquire_or_renew(5)
    taken = record(leases)
    assert (taken.holder, taken.transitions) == ("b", 1)

    # the old holder's renewal now conflicts and it sees the lease taken
    assert not a.try_acquire_or_renew(5)
    assert a.taken() and not a.held


def test_renewals_keep_acquire_time_and_transitions_and_restart_the_others_clock(
    leases: LeaseClient,
) -> None:
    clock_b = FakeClock()
    a = LeaseHolder(leases, "lock", "a", lease_duration=15)
    b = LeaseHolder(leases, "lock", "b", lease_duration=15, clock=clock_b)
    assert a.try_acquire_or_renew(5)
    acquired = record(leases)
    assert not b.try_acquire_or_renew(5)
    clock_b.now += 10
    assert a.try_acquire_or_renew(5)
    renewed = record(leases)
    assert renewed.acquire_time == acquired.acquire_time
    assert renewed.renew_time != acquired.renew_time and renewed.transitions == 0
    clock_b.now += 10  # 20 s since b first saw the lease, but only 10 s since it changed
    assert not b.try_acquire_or_renew(5)


def test_release_hands_the_lease_to_the_next_holder_at_once(leases: LeaseClient) -> None:
    a = LeaseHolder(leases, "lock", "a", lease_duration=15)
    b = LeaseHolder(leases, "lock", "b", lease_duration=15)
    assert a.try_acquire_or_renew(5)
    assert not b.try_acquire_or_renew(5)
    assert a.release(5)
    released = record(leases)
    assert (released.holder, released.lease_duration_seconds) == ("", 1)
    assert b.try_acquire_or_renew(5)
    assert record(leases).holder == "b"
    assert not a.release(5)  # not ours any more: nothing written
    assert record(leases).holder == "b"


def test_a_holder_whose_lease_was_deleted_recreates_it_or_sees_it_taken(
    leases: LeaseClient,
) -> None:
    a = LeaseHolder(leases, "lock", "a", lease_duration=15)
    assert a.try_acquire_or_renew(5)
    leases.delete("lock", timeout=5)
    assert a.try_acquire_or_renew(5) and record(leases).holder == "a"
    leases.delete("lock", timeout=5)
    b = LeaseHolder(leases, "lock", "b", lease_duration=15)
    assert b.try_acquire_or_renew(5)
    assert not a.try_acquire_or_renew(5)
    assert a.taken() and not a.held


class Run:
    """An elector running in a thread, with its callbacks recorded."""

    def __init__(self, cluster: Cluster, identity: str, **kwargs: Any) -> None:
        self.events: list[tuple[str, float]] = []
        self.stop = threading.Event()
        self.elector = LeaderElector(
            cluster,
            name="lock",
            namespace="default",
            identity=identity,
            lease_duration=LEASE,
            renew_deadline=DEADLINE,
            retry_period=RETRY,
            on_started_leading=lambda: self.events.append(("started", time.monotonic())),
            on_stopped_leading=lambda: self.events.append(("stopped", time.monotonic())),
            **kwargs,
        )
        self.thread = threading.Thread(
            target=self.elector.run, args=(self.stop,), name=f"test/elector/{identity}"
        )
        self.thread.start()

    def when(self, event: str) -> float | None:
        return next((t for e, t in self.events if e == event), None)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


def test_one_of_two_electors_leads_and_a_clean_stop_hands_over_at_once(
    cluster: Cluster, leases: LeaseClient
) -> None:
    a = Run(cluster, "a")
    wait_for(a.elector.is_leader)
    b = Run(cluster, "b")
    try:
        wait_for(lambda: b.elector.leader == "a")
        assert not b.elector.is_leader()
        stopped = time.monotonic()
        a.close()
        assert a.events[0][0] == "started" and a.events[-1][0] == "stopped"
        wait_for(b.elector.is_leader, timeout=LEASE)
        # well before the old lease could have expired: the release handed it over
        assert time.monotonic() - stopped < LEASE - 0.5
        assert record(leases).holder == "b" and record(leases).transitions == 1
    finally:
        a.close()
        b.close()


def test_every_line_of_an_election_names_the_cluster_of_its_lease(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Leading, another's leadership and the release are said with the Lease's cluster, as its
    failures are (a fleet's log is searched by ``cluster=``)."""
    caplog.set_level("INFO", logger="mcruntime.leaderelection")
    a = Run(cluster, "a")
    wait_for(a.elector.is_leader)
    b = Run(cluster, "b")
    try:
        wait_for(lambda: b.elector.leader == "a")
    finally:
        a.close()
        b.close()
    said = [r.getMessage() for r in caplog.records]
    where = "cluster=local leaderelection lease=default/lock"
    assert f"{where} identity=a: leading" in said
    assert f"{where}: a is the leader" in said
    assert f"{where} identity=a: released" in said
    assert all(m.startswith("cluster=local ") for m in said), said
    # and as record attributes, for a pipeline that ships records as JSON
    fields = {(r.cluster, r.lease) for r in caplog.records}  # type: ignore[attr-defined]
    assert fields == {("local", "default/lock")}
    assert {r.identity for r in caplog.records} == {"a", "b"}  # type: ignore[attr-defined]


def test_a_leader_that_cannot_renew_stops_leading_before_the_lease_expires(
    server: Any, cluster: Cluster
) -> None:
    a = Run(cluster, "a")
    try:
        wait_for(a.elector.is_leader)
        cut = time.monotonic()  # the last renewal that reached the server was before this
        server.stop()
        wait_for(lambda: a.when("stopped"), timeout=LEASE + 2)
        lost = a.when("stopped")
        assert lost is not None
        assert lost - cut < LEASE, "others could have taken over while it still led"
        assert lost - cut < DEADLINE + 0.3
        a.thread.join(5)
        assert not a.thread.is_alive(), "run() returns once leadership is lost"
    finally:
        server.start()
        a.close()


def lost_line(run: Run, caplog: pytest.LogCaptureFixture) -> str:
    """The one error line of ``run`` losing its leadership, once it stopped leading."""
    wait_for(lambda: run.when("stopped"), timeout=LEASE + 2)
    (lost,) = [r.getMessage() for r in caplog.records if "leadership lost" in r.getMessage()]
    return lost


def test_a_leader_whose_api_server_hangs_says_the_renewal_had_no_answer_not_that_it_was_taken(
    server: Any, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("ERROR", logger="mcruntime.leaderelection")
    a = Run(cluster, "a")
    try:
        wait_for(a.elector.is_leader)
        server.freeze()  # the watchdog fires while the renewal still waits for an answer
        lost = lost_line(a, caplog)
        # no other replica exists: "taken" would send whoever is on call after a phantom leader
        assert "taken" not in lost, lost
        assert "has had no answer from cluster local" in lost, lost
    finally:
        server.thaw()
        a.close()


def lines_until_lost(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, fault: Callable[[], None]
) -> list[str]:
    """The warnings and errors of a leader from ``fault()`` (of its API server) until its
    run() returned, leadership lost."""
    caplog.set_level("WARNING", logger="mcruntime.leaderelection")
    a = Run(cluster, "a")
    try:
        wait_for(a.elector.is_leader)
        caplog.clear()
        fault()
        lost_line(a, caplog)
        a.thread.join(DEADLINE + 5)  # run() returns once its last renewal ended
        assert not a.thread.is_alive()
        return [r.getMessage() for r in caplog.records]
    finally:
        a.close()


def test_a_leader_whose_api_server_hangs_says_it_once_and_never_that_it_retries(
    server: Any, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # the renewal that waits when the deadline passes ends after the loss: it is no failure
    # retried "every 0.25s" (nothing is retried: run() returns), the loss said it
    try:
        lines = lines_until_lost(cluster, caplog, server.freeze)
    finally:
        server.thaw()
    assert len(lines) == 1 and "leadership lost" in lines[0], lines


def test_a_leader_whose_api_server_refuses_says_the_failure_it_retries_then_the_loss(
    server: Any, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        lines = lines_until_lost(cluster, caplog, server.stop)  # refused: retried till the deadline
    finally:
        server.start()
    assert len(lines) == 2, lines
    assert "taking or renewing the Lease failed" in lines[0] and "retrying" in lines[0]
    assert "leadership lost" in lines[1]


def test_a_leader_whose_lease_is_taken_over_names_the_new_holder(
    leases: LeaseClient, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("ERROR", logger="mcruntime.leaderelection")
    a = Run(cluster, "a")
    try:
        wait_for(a.elector.is_leader)
        lease = leases.get("lock", timeout=5)
        leases.update(lease, LeaseRecord(holder="b", lease_duration_seconds=15), timeout=5)
        lost = lost_line(a, caplog)
        assert lost.endswith("the Lease was taken by b)"), lost
    finally:
        a.close()


def test_on_new_leader_reports_the_current_holder(cluster: Cluster) -> None:
    a = Run(cluster, "a")
    wait_for(a.elector.is_leader)
    seen: list[str] = []
    b = Run(cluster, "b", on_new_leader=seen.append)
    try:
        wait_for(lambda: seen)
        assert seen == ["a"]
    finally:
        a.close()
        b.close()


def test_an_elector_that_may_not_touch_its_lease_says_so_once_and_leads_once_granted(
    server: Any, cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    # the replica's credentials: a service account without the rights on Leases (yet)
    denied = Cluster.from_kubeconfig(server.kubeconfig(service_account="default/replica"))
    caplog.set_level("DEBUG", logger="mcruntime.leaderelection")
    run = Run(denied, "a")
    try:
        wait_for(
            lambda: "still failing (3)" in caplog.text, what="three failed attempts on the Lease"
        )
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1, warnings
        assert warnings[0].startswith(
            "cluster=local leaderelection lease=default/lock identity=a: "
            "taking or renewing the Lease failed: "
        )
        assert 'cannot get resource "leases" in API group "coordination.k8s.io"' in warnings[0]
        assert not run.elector.is_leader()

        rules = [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]}]
        cluster.client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "lease", "namespace": "default"},
                "rules": rules,
            }
        )
        cluster.client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "lease", "namespace": "default"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "lease",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "replica", "namespace": "default"}],
            }
        )
        wait_for(run.elector.is_leader, what="leadership once the Role is bound")
        recoveries = [r.getMessage() for r in caplog.records if "works again" in r.getMessage()]
        assert len(recoveries) == 1, recoveries
        assert recoveries[0].startswith(
            "cluster=local leaderelection lease=default/lock identity=a: "
            "taking or renewing the Lease works again after "
        )
        assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
    finally:
        run.close()
        denied.stop()
