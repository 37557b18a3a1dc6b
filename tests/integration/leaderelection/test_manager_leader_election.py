"""A Manager with leader_election=True: only the leader reconciles, clean hand-over, stop on loss."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mcruntime
from mcruntime._threads import mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import ConfigError
from mcruntime.leaderelection import LeaseClient, LeaseHolder, LeaseRecord
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request

pytestmark = pytest.mark.timeout(60)

LEASE = 2.0


def options(**kw: Any) -> ManagerOptions:
    base: dict[str, Any] = {
        "leader_election": True,
        "leader_election_id": "test-manager",
        "leader_election_namespace": "default",
        "lease_duration": LEASE,
        "renew_deadline": 1.5,
        "retry_period": 0.25,
        "graceful_shutdown_timeout": 5,
    }
    base.update(kw)
    return ManagerOptions(**base)


class Replica:
    def __init__(self, server: Any, name: str, reconciled: list[tuple[str, str]]) -> None:
        self.name = name
        self.mgr = Manager(server.kubeconfig(), options=options())

        def reconcile(req: Request) -> None:
            reconciled.append((name, req.name))

        self.controller = (
            mcruntime.controller_managed_by(self.mgr).for_("v1/ConfigMap").complete(reconcile)
        )


@pytest.fixture
def replicas(server: Any) -> Iterator[tuple[list[Replica], list[tuple[str, str]]]]:
    reconciled: list[tuple[str, str]] = []
    made = [Replica(server, n, reconciled) for n in ("a", "b")]
    yield made, reconciled
    for r in made:
        r.mgr.stop(5)
    # the thread that stopped a manager after a lost election ends right after the stop
    wait_for(
        lambda: (
            not [
                t
                for t in mcruntime_threads()
                if t.name.startswith(("mcruntime/leaderelection", "mcruntime/manager"))
            ]
        ),
        timeout=5,
    )


def create_cm(server: Any, name: str) -> None:
    c = Cluster.from_kubeconfig(server.kubeconfig())
    try:
        c.client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
            }
        )
    finally:
        c.stop()


def test_only_the_leader_reconciles_and_a_clean_stop_hands_over_at_once(
    server: Any, replicas: tuple[list[Replica], list[tuple[str, str]]]
) -> None:
    (a, b), reconciled = replicas
    a.mgr.start()
    wait_for(lambda: ("a", "cm") in reconciled)
    b.mgr.start()
    # the standby's sources run (warm standby) and fill its queue, but no worker takes from it
    wait_for(lambda: len(b.controller.queue) == 1)
    create_cm(server, "cm2")
    wait_for(lambda: ("a", "cm2") in reconciled)
    wait_for(lambda: len(b.controller.queue) == 2)
    assert all(who == "a" for who, _ in reconciled)

    stopped = time.monotonic()
    a.mgr.stop(5)
    assert not a.mgr.leader_lost
    wait_for(lambda: {("b", "cm"), ("b", "cm2")} <= set(reconciled), timeout=LEASE)
    assert time.monotonic() - stopped < LEASE, (
        "the release let the standby start before the lease expired"
    )


def leading(replica: Replica) -> float | None:
    return replica.mgr.metrics.sample("leader_election_master_status", {"name": "test-manager"})


def test_leader_election_master_status_says_which_replica_leads(
    server: Any, replicas: tuple[list[Replica], list[tuple[str, str]]]
) -> None:
    # controller-runtime's gauge (client-go's leader metric): 1 on the leader, 0 on a standby,
    # so `sum(leader_election_master_status{name="..."}) != 1` alerts on none or two leaders
    (a, b), reconciled = replicas
    a.mgr.start()
    wait_for(lambda: ("a", "cm") in reconciled)
    assert leading(a) == 1
    b.mgr.start()
    wait_for(lambda: len(b.controller.queue) == 1)
    assert leading(b) == 0
    a.mgr.stop(5)
    assert leading(a) == 0
    wait_for(lambda: leading(b) == 1, timeout=LEASE)


def test_a_leader_that_loses_its_lease_stops_its_controllers_and_itself(
    server: Any, replicas: tuple[list[Replica], list[tuple[str, str]]]
) -> None:
    (a, _b), reconciled = replicas
    a.mgr.start()
    wait_for(lambda: ("a", "cm") in reconciled)
    cut = time.monotonic()
    server.stop()
    try:
        assert a.mgr.wait(LEASE + 5), "the manager stops itself when leadership is lost"
        assert a.mgr.leader_lost
        assert a.mgr.metrics.sample("leader_election_master_status", {"name": "test-manager"}) == 0
        assert time.monotonic() - cut < LEASE + 5
    finally:
        server.start()


def test_a_reconcile_still_running_after_the_graceful_timeout_keeps_the_lease_until_it_expires(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # SIGTERM while a reconcile hangs past graceful_shutdown_timeout: releasing the Lease
    # then would let the next leader reconcile beside it, in a program that goes on after
    # stop() (or until the process has exited)
    caplog.set_level("WARNING", logger="mcruntime.leaderelection")
    hold, running = threading.Event(), threading.Event()
    reader = Cluster.from_kubeconfig(server.kubeconfig())
    leases = LeaseClient(reader, "default")

    def reconcile(req: Request) -> None:
        running.set()
        hold.wait(30)

    mgr = Manager(server.kubeconfig(), options=options(graceful_shutdown_timeout=0.5))
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
    try:
        mgr.start()
        assert running.wait(10), "the leader reconciles"
        mgr.stop()
        lease = leases.get("test-manager", timeout=5)
        assert LeaseRecord.of(lease).holder, "the Lease is kept while the reconcile runs"
        (kept,) = [r.getMessage() for r in caplog.records if "not releasing" in r.getMessage()]
        assert "1 reconcile of controller configmap still running" in kept, kept
        assert kept.endswith("the next leader takes over once it expires (within 2s)"), kept
    finally:
        hold.set()
        mgr.stop(5)
        reader.stop()


def test_a_reconcile_that_stops_its_manager_is_no_work_that_keeps_the_lease(server: Any) -> None:
    # a one-shot job: its own reconcile, still running while it stops the manager, must not
    # hold the hand-over up as a reconcile past the graceful timeout does
    reader = Cluster.from_kubeconfig(server.kubeconfig())
    mgr = Manager(server.kubeconfig(), options=options(graceful_shutdown_timeout=0.5))
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: mgr.stop())
    try:
        mgr.start()
        assert mgr.wait(10), "the reconcile stopped the manager"
        lease = LeaseClient(reader, "default").get("test-manager", timeout=5)
        assert LeaseRecord.of(lease).holder == "", "released"
    finally:
        mgr.stop(5)
        reader.stop()


def test_a_local_cluster_built_with_a_name_is_elected_and_reconciles(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A program in a pod that names its hub for its logs (``Cluster.in_cluster(name="hub")``):
    the manager's local cluster is named ``local`` whatever it was built as, and the Lease is
    taken through it as renamed, not through the client its old name had (closed by the
    renaming: every attempt on the Lease said the cluster left, and the replica never led)."""
    caplog.set_level("WARNING", logger="mcruntime.leaderelection")
    reconciled: list[str] = []
    mgr = Manager(Cluster.from_kubeconfig(server.kubeconfig(), name="hub"), options=options())
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(
        lambda req: reconciled.append(req.name)
    )
    try:
        mgr.start()
        assert mgr.elected().wait(5 * LEASE), [r.getMessage() for r in caplog.records]
        assert mgr.get_cluster().name == ""
        wait_for(lambda: "cm" in reconciled, what="the leader's first reconcile")
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
    finally:
        mgr.stop(5)


def test_leader_election_needs_an_id_and_a_local_cluster_when_the_manager_is_made(
    server: Any,
) -> None:
    # when it is made, not when it starts: a unit test that builds the manager sees it
    with pytest.raises(ConfigError, match="leader_election_id"):
        Manager(server.kubeconfig(), options=options(leader_election_id=""))
    with pytest.raises(ConfigError, match="local cluster"):
        Manager(provider=Provider(), options=options())


def test_controllers_that_need_no_leader_election_run_on_every_replica(server: Any) -> None:
    seen = threading.Event()
    mgr = Manager(server.kubeconfig(), options=options(leader_election_id="held-elsewhere"))
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").with_options(
        need_leader_election=False
    ).complete(lambda req: seen.set())
    # someone else holds the lease for long: this manager never leads during the test
    other = Cluster.from_kubeconfig(server.kubeconfig())
    try:
        assert LeaseHolder(
            LeaseClient(other, "default"), "held-elsewhere", "other", lease_duration=60
        ).try_acquire_or_renew(5)
        mgr.start()
        assert seen.wait(10)
        assert (
            LeaseRecord.of(LeaseClient(other, "default").get("held-elsewhere", timeout=5)).holder
            == "other"
        )
    finally:
        mgr.stop(5)
        other.stop()


def test_a_controller_added_to_a_running_standby_waits_for_leadership(
    server: Any, replicas: tuple[list[Replica], list[tuple[str, str]]]
) -> None:
    (a, b), reconciled = replicas
    a.mgr.start()
    wait_for(lambda: ("a", "cm") in reconciled)
    b.mgr.start()
    late: list[str] = []
    ctrl = (
        mcruntime.controller_managed_by(b.mgr)
        .named("late")
        .for_("v1/ConfigMap")
        .complete(lambda req: late.append(req.name))
    )
    wait_for(lambda: len(ctrl.queue) == 1)  # engaged: its source filled the queue
    create_cm(server, "cm3")
    wait_for(lambda: ("a", "cm3") in reconciled)
    assert late == [], "a standby's late controller reconciled before this replica led"
    a.mgr.stop(5)
    wait_for(lambda: {"cm", "cm3"} <= set(late), timeout=LEASE + 2)


def test_a_with_block_raises_after_a_lost_election(
    server: Any, replicas: tuple[list[Replica], list[tuple[str, str]]]
) -> None:
    """As ``run()`` raises it: ``with mgr: mgr.wait()`` ends the replica with the error,
    not quietly (its process would exit 0 and not be restarted to stand again)."""
    from mcruntime.leaderelection import LeaderElectionLost

    (a, _b), reconciled = replicas
    try:
        with pytest.raises(LeaderElectionLost, match="lost its leader election"), a.mgr:
            wait_for(lambda: ("a", "cm") in reconciled)
            server.stop()
            assert a.mgr.wait(LEASE + 8), "the manager stops itself when leadership is lost"
    finally:
        server.start()


def test_run_raises_after_a_lost_election(
    server: Any, replicas: tuple[list[Replica], list[tuple[str, str]]]
) -> None:
    from mcruntime.leaderelection import LeaderElectionLost

    (a, _b), reconciled = replicas
    errors: list[BaseException] = []

    def run() -> None:
        try:
            a.mgr.run()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    t = threading.Thread(target=run, name="test-run")
    t.start()
    wait_for(lambda: ("a", "cm") in reconciled)
    server.stop()
    try:
        t.join(LEASE + 8)
        assert not t.is_alive()
        assert errors and isinstance(errors[0], LeaderElectionLost)
    finally:
        server.start()


class Sweeper:
    """A periodic job of the leader only (Go: a Runnable added with mgr.Add)."""

    need_leader_election = True

    def __init__(self, name: str, ran: list[str]) -> None:
        self.name, self.ran = name, ran
        self.stopped = threading.Event()

    def start(self, stop: threading.Event) -> None:
        self.ran.append(self.name)
        stop.wait()
        self.stopped.set()


def test_leader_only_runnables_start_on_the_leader_and_elected_is_set_there(
    server: Any, replicas: tuple[list[Replica], list[tuple[str, str]]]
) -> None:
    (a, b), _reconciled = replicas
    ran: list[str] = []
    everywhere: list[str] = []

    class Everywhere:  # no need_leader_election: every replica runs it, as before
        def __init__(self, name: str) -> None:
            self.name = name

        def start(self, stop: threading.Event) -> None:
            everywhere.append(self.name)
            stop.wait()

    sweepers = {r.name: Sweeper(r.name, ran) for r in (a, b)}
    for r in (a, b):
        r.mgr.add(sweepers[r.name])
        r.mgr.add(Everywhere(r.name))
    a.mgr.start()
    assert a.mgr.elected().wait(10)
    wait_for(lambda: ran == ["a"])
    b.mgr.start()
    wait_for(lambda: sorted(everywhere) == ["a", "b"])
    late = Sweeper("b-late", ran)
    b.mgr.add(late)  # added to a running standby: waits for leadership too
    assert not b.mgr.elected().wait(0.5)
    assert ran == ["a"], "a standby ran a leader-only runnable"
    a.mgr.stop(5)
    assert sweepers["a"].stopped.is_set(), "stopped before the Lease was released"
    assert b.mgr.elected().wait(LEASE + 2)
    wait_for(lambda: sorted(ran) == ["a", "b", "b-late"])


def test_elected_is_set_at_start_without_leader_election(server: Any) -> None:
    mgr = Manager(server.kubeconfig())
    ran: list[str] = []
    mgr.add(Sweeper("only", ran))  # need_leader_election means nothing without an election
    assert not mgr.elected().is_set()
    with mgr:
        assert mgr.elected().is_set()
        wait_for(lambda: ran == ["only"])


def test_a_stop_that_cannot_release_the_lease_of_a_hung_server_says_so_and_nothing_else(
    server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="mcruntime.leaderelection")
    # a renew deadline far off: the stop, not a lost election, ends the term; renewals often,
    # so one waits on the hung server when the stop comes
    mgr = Manager(
        server.kubeconfig(),
        options=options(lease_duration=15.0, renew_deadline=10.0, retry_period=0.2),
    )
    mgr.start()
    try:
        assert mgr.elected().wait(10)
        server.freeze()
        leadership = mgr._leadership
        assert leadership is not None
        wait_for(lambda: leadership.elector._attempt_sent is not None, 5, "a renewal waiting")
        mgr.stop(1)

        def warnings() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]

        # the elector's thread ends once the stop cuts its calls to the local cluster
        wait_for(lambda: any("releasing the Lease failed" in m for m in warnings()), 10)
        (released,) = [m for m in warnings() if "releasing the Lease failed" in m]
        assert released.endswith("the next leader takes over once it expires (within 15s)")
        # the renewal the stop cut is no failure to be retried every 0.2s
        assert not [m for m in warnings() if "taking or renewing the Lease failed" in m]
    finally:
        server.thaw()
        mgr.stop(5)
