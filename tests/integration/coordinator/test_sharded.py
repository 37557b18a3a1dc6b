"""The sharded coordinator in one process: managers sharing a fleet through peer and fence Leases."""

from __future__ import annotations

import http.client
import json
import logging
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import mcruntime
from mcruntime._threads import mcruntime_threads
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet, Proxy, wait_for
from mcruntime.errors import ClusterLeft, ClusterNotFound, NotFound
from mcruntime.leaderelection import LeaseClient, LeaseHolder, LeaseRecord, micro_time
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.manager.coordinator import Basic, Sharded, lease_name
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request, Result
from mcruntime.webhook import AdmissionRequest, WebhookServer, WebhookServerOptions, allowed
from tests._logs import logged

pytestmark = pytest.mark.timeout(90)

LEASE = 2.0
TIMINGS: dict[str, float] = {
    "lease_duration": LEASE,
    "renew_period": 0.5,
    "renew_deadline": 1.3,
    "probe_interval": 0.5,
}


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    with Fleet(6, prefix="shard") as f:
        for s in f:
            c = Cluster.from_kubeconfig(s.kubeconfig())
            c.client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "default"},
                }
            )
            c.stop()
        yield f


@pytest.fixture
def mgmt(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    return make_envtest_server("mgmt")


class Log:
    """Reconcile intervals per cluster: (peer, start, end)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[str, list[tuple[str, float, float]]] = {}

    def add(self, peer: str, cluster: str, start: float, end: float) -> None:
        with self.lock:
            self.runs.setdefault(cluster, []).append((peer, start, end))

    def peers_since(self, cluster: str, since: float) -> set[str]:
        with self.lock:
            return {p for p, s, _ in self.runs.get(cluster, []) if s >= since}

    def assert_no_overlap(self) -> None:
        with self.lock:
            for cluster, runs in self.runs.items():
                runs = sorted(runs, key=lambda r: r[1])
                for (p1, _s1, e1), (p2, s2, _e2) in zip(runs, runs[1:], strict=False):
                    assert p1 == p2 or e1 <= s2, (
                        f"{cluster}: {p1} and {p2} reconciled at the same time"
                    )


class Replica:
    def __init__(
        self,
        mgmt: APIServer,
        fleet: Fleet,
        peer: str,
        log: Log,
        lease_path: Proxy | None = None,
        webhook_server: WebhookServer | None = None,
        busy: float = 0.0,
        **kw: Any,
    ) -> None:
        self.peer = peer
        self.provider = Provider()
        for s in fleet:
            self.provider.add(s.name, Cluster.from_kubeconfig(s.kubeconfig(), name=s.name))
        via = lease_path if lease_path is not None else mgmt
        self.lease_cluster = Cluster.from_kubeconfig(via.kubeconfig())
        self.coordinator = Sharded(
            self.lease_cluster, peer_id=peer, **{"namespace": "default", **TIMINGS, **kw}
        )
        self.mgr = Manager(
            provider=self.provider,
            options=ManagerOptions(
                coordinator=self.coordinator,
                graceful_shutdown_timeout=5,
                webhook_server=webhook_server,
                health_probe_bind_address="127.0.0.1:0",
            ),
        )

        def reconcile(req: Request) -> Result:
            start = time.monotonic()
            self.mgr.get_cluster(req.cluster_name).client.get(
                "v1/ConfigMap", req.name, req.namespace
            )
            if busy:
                time.sleep(busy)  # a long reconcile: in flight when its cluster is handed off
            log.add(peer, req.cluster_name, start, time.monotonic())
            return Result(requeue_after=0.05)

        mcruntime.controller_managed_by(self.mgr).for_("v1/ConfigMap").complete(reconcile)

    def engaged(self) -> set[str]:
        return set(self.mgr.engaged_clusters())

    def readyz(self) -> tuple[int, str]:
        """The status and body of the manager's ``/readyz?verbose``."""
        address = self.mgr.health_probe_address
        assert address is not None
        try:
            with urllib.request.urlopen(
                f"http://{address[0]}:{address[1]}/readyz?verbose", timeout=5
            ) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def close(self) -> None:
        self.mgr.stop(5)
        self.lease_cluster.stop()


@pytest.fixture
def make_replica(mgmt: APIServer, fleet: Fleet) -> Iterator[Callable[..., Replica]]:
    made: list[Replica] = []

    def make(peer: str, log: Log | None = None, **kw: Any) -> Replica:
        r = Replica(mgmt, fleet, peer, log or Log(), **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()
    leaked = [t.name for t in mcruntime_threads() if t.name.startswith("mcruntime/coordinator/")]
    assert not leaked, f"shard workers left running: {leaked}"


def partitioned(replicas: list[Replica], names: list[str]) -> bool:
    sets = [r.engaged() for r in replicas]
    return sorted(n for s in sets for n in s) == sorted(names)


def settled(replicas: list[Replica], names: list[str]) -> bool:
    """Each cluster runs on the replica that owns it, every replica seeing all of them."""
    by_peer = {r.peer: r for r in replicas}
    return (
        all(len(r.coordinator.peers()) == len(replicas) for r in replicas)
        and all(
            name in by_peer[str(replicas[0].coordinator.owner_of(name))].engaged() for name in names
        )
        and partitioned(replicas, names)
    )


def fence(mgmt: APIServer, cluster: str) -> LeaseRecord:
    c = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        return LeaseRecord.of(
            LeaseClient(c, "default").get(lease_name("mcr-shard-", cluster), timeout=5)
        )
    finally:
        c.stop()


def test_every_cluster_runs_on_exactly_one_replica_and_moves_on_join_and_leave(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    log = Log()
    a = make_replica("a", log)
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    b = make_replica("b", log)
    b.mgr.start()
    wait_for(lambda: b.engaged() and partitioned([a, b], fleet.names))
    for name in fleet.names:
        owner = "a" if name in a.engaged() else "b"
        assert a.coordinator.owner_of(name) == owner == b.coordinator.owner_of(name)
        assert fence(mgmt, name).holder == owner
    assert sorted(a.coordinator.owned() + b.coordinator.owned()) == sorted(fleet.names)

    moved = b.engaged()
    left = time.monotonic()
    b.mgr.stop(5)
    stopped = time.monotonic()
    # b released its fences on the way out: a takes over long before they could expire
    wait_for(lambda: a.engaged() == set(fleet.names), timeout=LEASE)
    for name in moved:

        def only_a(name: str = name) -> bool:
            return log.peers_since(name, stopped) == {"a"}

        wait_for(only_a, timeout=LEASE)
    assert time.monotonic() - left < LEASE
    log.assert_no_overlap()


def test_every_replica_serves_the_webhooks_of_every_cluster_whichever_runs_it(
    make_replica: Callable[..., Replica], fleet: Fleet
) -> None:
    # a cluster's API server calls whichever replica the webhook's Service picks
    def hook(mgr: Manager, req: AdmissionRequest) -> Any:
        return allowed(warnings=[f"seen in {req.cluster_name}"])

    a, b, servers = serving_pair(make_replica, fleet, "/check", hook)
    assert_allowed_everywhere(servers, fleet.names, "/check", "seen in {}")
    for server in servers:
        # a cluster outside the fleet is still refused
        answer = post_review(server, "/clusters/elsewhere/check")
        assert answer["allowed"] is False
        assert answer["status"]["message"] == "cluster 'elsewhere' is not engaged with this manager"
    # a handler that asks for a cluster the other replica runs is told so
    theirs = sorted(b.engaged())[0]
    with pytest.raises(ClusterNotFound) as e:
        a.mgr.get_cluster(theirs)
    assert str(e.value) == (
        f"cluster {theirs!r} is not engaged here: the coordinator runs it on another replica "
        "(get_api_reader reads it from here)"
    )


@pytest.mark.parametrize("busy", ["renew_period", "renew_deadline"])
def test_a_clean_hand_off_whose_reconcile_outlasts_a_renew_period_raises_no_alarm(
    make_replica: Callable[..., Replica],
    fleet: Fleet,
    mgmt: APIServer,
    caplog: pytest.LogCaptureFixture,
    busy: str,
) -> None:
    # a's reconciles take two renew periods (or two renew deadlines): when b joins, a drains
    # each cluster it hands off, renewing its fence meanwhile (also while the engagement's
    # teardown waits for the reconciles before its on_cluster_disengaged callbacks), then
    # releases it. The Lease server is fine all along: no fence is lost, nothing is said
    # above the info level
    caplog.set_level(logging.INFO, logger="mcruntime.coordinator")
    a = make_replica("a", busy=2 * TIMINGS[busy])
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    b = make_replica("b")
    b.mgr.start()
    wait_for(lambda: b.engaged() and partitioned([a, b], fleet.names), timeout=10)
    moved = b.engaged()
    wait_for(
        lambda: len(logged(caplog, logging.INFO, containing=": fence released")) == len(moved),
        what="a released the fences of the clusters it handed off",
    )
    released = time.monotonic()
    # a deadline left armed fires within the renew deadline of the last renewal
    while time.monotonic() - released < 2 * TIMINGS["renew_deadline"]:
        assert a.coordinator.owned() == sorted(set(fleet.names) - moved)
        time.sleep(0.1)
    assert logged(caplog, logging.ERROR, logger="mcruntime.coordinator") == []
    assert logged(caplog, logging.INFO, containing="fence lost") == []
    assert logged(caplog, logging.INFO, containing="renewing fences works again") == []


def test_a_webhook_handler_reads_its_cluster_on_every_replica_whichever_runs_it(
    make_replica: Callable[..., Replica], fleet: Fleet
) -> None:
    def hook(mgr: Manager, req: AdmissionRequest) -> Any:
        cm = mgr.get_api_reader(req.cluster_name).get("v1/ConfigMap", "cm", "default", timeout=5)
        return allowed(warnings=[f"read {cm['metadata']['name']} of {req.cluster_name}"])

    a, b, servers = serving_pair(make_replica, fleet, "/read", hook)
    assert_allowed_everywhere(servers, fleet.names, "/read", "read cm of {}")

    # `here` reads two clusters `there` runs (of six, one replica runs at least three)
    here, there = (a, b) if len(b.engaged()) >= 2 else (b, a)
    theirs, other = sorted(there.engaged())[:2]
    # the cluster leaves here's fleet: here's reader of it is closed, and here no longer reads it
    held = here.mgr.get_api_reader(theirs)
    assert here.provider.remove(theirs)
    wait_for(lambda: not here.coordinator.knows(theirs))
    with pytest.raises(ClusterLeft):
        held.get("v1/ConfigMap", "cm", "default", timeout=5)
    with pytest.raises(ClusterNotFound, match=f"cluster '{theirs}' is not engaged"):
        here.mgr.get_api_reader(theirs)
    names = {o["metadata"]["name"] for o in there.mgr.get_api_reader(theirs).list("v1/ConfigMap")}
    assert "cm" in names

    # the readers of clusters run elsewhere end with the manager
    held = here.mgr.get_api_reader(other)
    here.mgr.stop(5)
    with pytest.raises(ClusterLeft):
        held.get("v1/ConfigMap", "cm", "default", timeout=5)


def serving_pair(
    make_replica: Callable[..., Replica],
    fleet: Fleet,
    path: str,
    hook: Callable[[Manager, AdmissionRequest], Any],
) -> tuple[Replica, Replica, list[WebhookServer]]:
    """Replicas a and b, started and sharing the fleet, each serving ``hook`` at ``path``."""
    servers, replicas = [], []
    for peer in "ab":
        server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
        replica = make_replica(peer, webhook_server=server)
        server.register(path, lambda req, mgr=replica.mgr: hook(mgr, req))
        servers.append(server)
        replicas.append(replica)
    a, b = replicas
    a.mgr.start()
    b.mgr.start()
    wait_for(lambda: settled([a, b], fleet.names))
    return a, b, servers


def assert_allowed_everywhere(
    servers: list[WebhookServer], names: list[str], path: str, warning: str
) -> None:
    """Every server allows ``path`` of every cluster, with the warning ``warning.format(name)``."""
    for server in servers:
        for name in names:
            answer = post_review(server, f"/clusters/{name}{path}")
            assert answer["allowed"] is True, (name, answer)
            assert answer["warnings"] == [warning.format(name)]


def post_review(server: WebhookServer, path: str) -> Any:
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-1", "operation": "CREATE", "object": {"metadata": {"name": "x"}}},
    }
    ctx = ssl.create_default_context(cadata=server.ca_bundle.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    try:
        conn.request(
            "POST", path, body=json.dumps(review), headers={"Content-Type": "application/json"}
        )
        return json.loads(conn.getresponse().read())["response"]
    finally:
        conn.close()


def test_a_fence_held_by_a_dead_replica_is_taken_only_after_the_lease_duration(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    victim = fleet.names[0]
    ghost_client = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        ghost = LeaseHolder(
            LeaseClient(ghost_client, "default"),
            lease_name("mcr-shard-", victim),
            "ghost",
            lease_duration=LEASE,
        )
        assert ghost.try_acquire_or_renew(5)
    finally:
        ghost_client.stop()
    a = make_replica("a")
    started = time.monotonic()
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names) - {victim})
    assert time.monotonic() - started < LEASE, "free fences are taken at once"
    wait_for(lambda: victim in a.engaged(), timeout=LEASE + 3)
    assert time.monotonic() - started >= LEASE
    assert fence(mgmt, victim).holder == "a"


def test_a_peer_that_stops_renewing_its_lease_without_leaving_is_said_in_a_warning(
    make_replica: Callable[..., Replica],
    fleet: Fleet,
    mgmt: APIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a replica killed (SIGKILL, an OOM kill) leaves its peer Lease behind, unrenewed: the
    # others take its clusters once it expires, and say so above the info level, where a
    # replica that stops cleanly deletes its Lease and is only an info line
    caplog.set_level(logging.INFO, logger="mcruntime")
    ghost_client = Cluster.from_kubeconfig(mgmt.kubeconfig())
    a = make_replica("a")
    try:
        ghost = LeaseHolder(
            LeaseClient(ghost_client, "default"),
            "mcr-peer-ghost",
            "ghost",
            lease_duration=LEASE,
            labels={"mcruntime.io/lease": "peer"},
        )
        a.mgr.start()
        # renewed until a sees it live, then never again
        wait_for(
            lambda: ghost.try_acquire_or_renew(5) and len(a.coordinator.peers()) == 2,
            timeout=10,
            what="a sees the ghost peer",
        )
    finally:
        ghost_client.stop()
    wait_for(lambda: a.engaged() == set(fleet.names), timeout=LEASE + 5)
    wait_for(lambda: logged(caplog, logging.WARNING, containing="peer ghost"), timeout=5)
    assert logged(caplog, logging.WARNING, containing="coordinator peer=a") == [
        "coordinator peer=a: peer ghost stopped renewing its Lease without leaving (killed, "
        "hung or cut off from the Lease cluster); its clusters move to the live peers ['a']"
    ]


def test_a_peer_lease_long_expired_at_first_sight_counts_as_dead_until_renewed(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    # the Lease of a replica killed hours ago: a replica starting now does not count that
    # peer live for its first lease duration, leaving the clusters it would own unrun
    admin = Cluster.from_kubeconfig(mgmt.kubeconfig())
    leases = LeaseClient(admin, "default")
    try:
        long_ago = micro_time(datetime.now(UTC) - timedelta(hours=2))
        leases.create(
            "mcr-peer-ghost",
            LeaseRecord("ghost", int(LEASE), long_ago, long_ago),
            labels={"mcruntime.io/lease": "peer"},
            timeout=5,
        )
        a = make_replica("a")
        started = time.monotonic()
        a.mgr.start()
        while a.engaged() != set(fleet.names):
            assert [p.id for p in a.coordinator.peers()] == ["a"]
            assert time.monotonic() - started < LEASE, f"a engaged only {sorted(a.engaged())}"
            time.sleep(0.02)
        # renewed (its replica is back, or its clock was far behind): live again
        ghost = LeaseHolder(leases, "mcr-peer-ghost", "ghost", lease_duration=LEASE)
        wait_for(
            lambda: ghost.try_acquire_or_renew(5) and len(a.coordinator.peers()) == 2,
            timeout=3 * LEASE,
            what="a sees the renewed peer",
        )
    finally:
        admin.stop()


def test_a_replica_that_cannot_renew_its_fences_stops_its_clusters_before_they_expire(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    a = make_replica("a")
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    cut = time.monotonic()
    mgmt.stop()
    try:
        wait_for(lambda: not a.engaged(), timeout=LEASE)
        assert time.monotonic() - cut < LEASE, "another replica could have started them meanwhile"
        assert a.coordinator.owned() == []
    finally:
        mgmt.start()
    # its own fences were not taken by anyone: it gets them back once the API is back
    wait_for(lambda: a.engaged() == set(fleet.names))


def test_a_fence_taken_by_a_late_answer_is_renewed_before_its_cluster_is_engaged(
    make_replica: Callable[..., Replica],
    fleet: Fleet,
    mgmt: APIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a slow Lease server: taking a fence (a read, then a write) uses up most of the renew
    # deadline, counted from when the read was sent. Engaging then would have the watchdog
    # stop the cluster at once, with an error, again and again; the fence is renewed first
    caplog.set_level(logging.INFO, logger="mcruntime.coordinator")
    mgmt.latency = 1.8  # a read and a write: 3.6s of the 4s renew deadline
    a = make_replica(
        "a", lease_duration=10.0, renew_period=1.0, renew_deadline=4.0, probe_interval=1.0
    )
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names), timeout=30)
    engaged_at = time.monotonic()
    while time.monotonic() - engaged_at < 3.0:  # the renewals of three periods
        assert a.engaged() == set(fleet.names)
        time.sleep(0.1)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


def test_a_fence_taken_too_late_to_engage_is_released_when_the_replica_stops(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    # a Lease server that answers every fence write too late to engage safely: the fences
    # are ours on the server, the clusters are not engaged. Stopping must give the fences
    # back, or the next replica waits out lease_duration for each cluster
    a = make_replica("a", lease_duration=30.0)
    a.coordinator._fresh = lambda name, fence: False  # type: ignore[method-assign]
    a.mgr.start()

    def holders() -> set[str]:
        try:
            return {fence(mgmt, n).holder for n in fleet.names}
        except NotFound:
            return set()

    wait_for(lambda: holders() == {"a"}, timeout=30)
    assert a.engaged() == set()
    a.mgr.stop(5)
    assert {n: fence(mgmt, n).holder for n in fleet.names} == dict.fromkeys(fleet.names, "")


def test_a_replica_whose_lease_server_is_down_says_so_once_per_failure_streak(
    make_replica: Callable[..., Replica],
    fleet: Fleet,
    mgmt: APIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="mcruntime.coordinator")
    heartbeat, probe = "renewing peer Lease mcr-peer-a", "reading peers and fences"

    def lines(level: int, what: str) -> list[str]:
        return logged(caplog, level, starting=f"cluster=local coordinator peer=a: {what} ")

    a = make_replica("a")
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    mgmt.stop()
    try:
        for what in (heartbeat, probe):
            wait_for(
                lambda what=what: any("still failing (3)" in m for m in lines(logging.DEBUG, what)),
                what=f"three failures of {what}",
            )
        for what in (heartbeat, probe):
            (warning,) = lines(logging.WARNING, what)
            assert warning.startswith(f"cluster=local coordinator peer=a: {what} failed: ")
    finally:
        mgmt.start()
    for what in (heartbeat, probe):
        wait_for(lambda what=what: lines(logging.INFO, what), what=f"{what} recovered")
        (recovery,) = lines(logging.INFO, what)
        assert f"{what} works again after " in recovery
        assert len(lines(logging.WARNING, what)) == 1
    wait_for(lambda: a.engaged() == set(fleet.names))


def test_a_replica_that_cannot_write_its_leases_is_not_ready_and_says_why_once(
    make_replica: Callable[..., Replica],
    fleet: Fleet,
    mgmt: APIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a misspelled Lease namespace (or no RBAC for Leases): the replica can take no fence
    # and runs nothing, forever. /readyz says so, and the log says why, once
    caplog.set_level(logging.DEBUG, logger="mcruntime.coordinator")
    a = make_replica("a", namespace="shards")
    a.mgr.start()
    wait_for(
        lambda: a.readyz()[0] == 500 and "NotFound" in a.readyz()[1],
        what="a is not ready, for its Lease server's answer",
    )
    (line,) = [line for line in a.readyz()[1].splitlines() if "coordinator" in line]
    assert line.startswith(
        "[-]coordinator failed: coordinator peer=a: peer Lease mcr-peer-a in namespace shards "
        "of cluster=local never renewed: NotFound: "
    ), line
    taking = "cluster=local coordinator peer=a: taking fences "
    wait_for(
        lambda: any(
            "still failing (3)" in m for m in logged(caplog, logging.DEBUG, starting=taking)
        ),
        what="three fences not taken",
    )
    (warning,) = logged(caplog, logging.WARNING, starting=taking)
    assert re.match(
        f"{taking}failed: the fence mcr-shard-(shard-\\d) of cluster=\\1 in namespace shards: "
        "NotFound: ",
        warning,
    ), warning
    assert a.engaged() == set() and a.coordinator.owned() == []
    assert a.readyz()[0] == 500

    # the namespace is created: the replica gets ready and runs the fleet
    admin = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        admin.client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shards"}}
        )
    finally:
        admin.stop()
    wait_for(lambda: a.engaged() == set(fleet.names), timeout=10)
    wait_for(lambda: a.readyz()[0] == 200, what="a is ready")
    assert "[+]coordinator ok" in a.readyz()[1]
    recoveries = logged(caplog, logging.INFO, starting=taking)
    assert recoveries and recoveries[0].startswith(f"{taking}works again after "), recoveries
    # the fences are taken side by side: one sent before the namespace existed may be answered
    # after another's success, and its NotFound opens a streak of one attempt (seen once)
    assert len(logged(caplog, logging.WARNING, starting=taking)) <= 2


def test_each_replica_serves_how_many_clusters_it_runs_and_peers_it_sees(
    make_replica: Callable[..., Replica], fleet: Fleet
) -> None:
    # b's weight is so small that a wins every cluster: b runs none, and is ready
    a, b = make_replica("a"), make_replica("b", weight=1e-9)
    for r in (a, b):
        r.mgr.start()
    wait_for(lambda: settled([a, b], fleet.names))
    assert a.engaged() == set(fleet.names) and b.engaged() == set()
    wait_for(lambda: b.readyz()[0] == 200, what="b is ready")
    assert "[+]coordinator ok" in b.readyz()[1]

    def gauges(r: Replica) -> tuple[float | None, float | None]:
        return (
            r.mgr.metrics.sample("mcruntime_coordinator_owned_clusters"),
            r.mgr.metrics.sample("mcruntime_coordinator_live_peers"),
        )

    assert gauges(a) == (len(a.engaged()), 2)
    assert gauges(b) == (len(b.engaged()), 2)
    b.mgr.stop(5)
    wait_for(lambda: gauges(a) == (len(fleet.names), 1), what="a runs every cluster alone")


def test_a_replica_whose_lease_path_hangs_stops_its_clusters_before_another_starts_them(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    log = Log()
    with Proxy(mgmt) as path:
        a = make_replica("a", log, lease_path=path)
        a.mgr.start()
        wait_for(lambda: a.engaged() == set(fleet.names))
        b = make_replica("b", log)
        b.mgr.start()
        wait_for(lambda: b.engaged() and partitioned([a, b], fleet.names))
        held_by_a = a.engaged()
        frozen_at = time.monotonic()
        path.freeze()  # a's renewals now hang: connections open, nothing answered
        try:
            wait_for(lambda: not a.engaged(), timeout=LEASE)
            assert time.monotonic() - frozen_at < LEASE, "b could have started them meanwhile"
            wait_for(lambda: b.engaged() == set(fleet.names), timeout=4 * LEASE)
            for name in held_by_a:
                wait_for(lambda name=name: "b" in log.peers_since(name, frozen_at))
        finally:
            path.thaw()
        log.assert_no_overlap()


def test_a_cluster_removed_by_the_provider_is_disengaged_and_its_fence_released(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    a = make_replica("a")
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    gone = fleet.names[1]
    a.provider.remove(gone)
    wait_for(lambda: gone not in a.engaged())
    wait_for(lambda: fence(mgmt, gone).holder == "")
    # and added back with a new Cluster object, it runs again
    a.provider.add(gone, Cluster.from_kubeconfig(fleet[gone].kubeconfig(), name=gone))
    wait_for(lambda: gone in a.engaged())
    assert fence(mgmt, gone).holder == "a"


def lease_names(mgmt: APIServer, role: str) -> set[str]:
    c = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        leases = LeaseClient(c, "default").list(labels={"mcruntime.io/lease": role}, timeout=5)
        return {lease["metadata"]["name"] for lease in leases}
    finally:
        c.stop()


def test_fences_of_clusters_gone_from_the_fleet_are_deleted_once_free_or_expired(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    # clusters come and go (a namespace per tenant): their fences must not pile up in the
    # Lease namespace, where every probe lists them
    admin = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        # the fence of a cluster this replica does not know, held by a replica that renews it
        other = LeaseHolder(
            LeaseClient(admin, "default"),
            "mcr-shard-elsewhere",
            "other",
            lease_duration=LEASE,
            labels={"mcruntime.io/lease": "fence"},
        )
        assert other.try_acquire_or_renew(5)
        a = make_replica("a")
        a.mgr.start()
        wait_for(lambda: a.engaged() == set(fleet.names))
        gone = fleet.names[1]
        a.provider.remove(gone)
        wait_for(lambda: gone not in a.engaged())
        removed = time.monotonic()
        fences = {lease_name("mcr-shard-", n) for n in fleet.names}
        while lease_name("mcr-shard-", gone) in lease_names(mgmt, "fence"):
            assert time.monotonic() - removed < 4 * LEASE, "the released fence is still there"
            assert other.try_acquire_or_renew(5), "the held fence was taken or deleted"
            time.sleep(TIMINGS["renew_period"])
        # the fences of the clusters it runs stay, and so does one held by another replica
        assert lease_names(mgmt, "fence") == fences - {lease_name("mcr-shard-", gone)} | {
            "mcr-shard-elsewhere"
        }
        # until that replica is killed: its fence expires and goes too
        killed = time.monotonic()
        wait_for(lambda: "mcr-shard-elsewhere" not in lease_names(mgmt, "fence"), timeout=4 * LEASE)
        assert time.monotonic() - killed > LEASE, "deleted before it expired"
        assert a.engaged() == set(fleet.names) - {gone}
        # the cluster comes back: a new fence, engaged again
        a.provider.add(gone, Cluster.from_kubeconfig(fleet[gone].kubeconfig(), name=gone))
        wait_for(lambda: gone in a.engaged())
        assert fence(mgmt, gone).holder == "a"
    finally:
        admin.stop()


def test_peer_leases_of_killed_replicas_are_deleted(
    make_replica: Callable[..., Replica], fleet: Fleet, mgmt: APIServer
) -> None:
    admin = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        # a replica killed: its peer Lease was renewed, then never again
        ghost = LeaseHolder(
            LeaseClient(admin, "default"),
            "mcr-peer-ghost",
            "ghost",
            lease_duration=LEASE,
            labels={"mcruntime.io/lease": "peer"},
        )
        assert ghost.try_acquire_or_renew(5)
        a = make_replica("a")
        b = make_replica("b")
        a.mgr.start()
        b.mgr.start()
        killed = time.monotonic()
        wait_for(lambda: "mcr-peer-ghost" not in lease_names(mgmt, "peer"), timeout=4 * LEASE)
        assert time.monotonic() - killed > LEASE, "deleted before it expired"
        assert lease_names(mgmt, "peer") == {"mcr-peer-a", "mcr-peer-b"}
        wait_for(lambda: settled([a, b], fleet.names))
    finally:
        admin.stop()


def test_field_indexes_registered_with_the_manager_work_on_sharded_clusters(
    make_replica: Callable[..., Replica], fleet: Fleet
) -> None:
    a = make_replica("a")
    a.mgr.get_field_indexer().index_field(
        "v1/ConfigMap", "cm-name", lambda obj: obj["metadata"]["name"]
    )
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    name = fleet.names[2]
    found = a.mgr.get_cluster(name).client.list("v1/ConfigMap", "default", index=("cm-name", "cm"))
    assert [o["metadata"]["name"] for o in found] == ["cm"]


def test_fences_name_their_cluster(
    make_replica: Callable[..., Replica], mgmt: APIServer, fleet: Fleet
) -> None:
    a = make_replica("a")
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    c = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        fences = LeaseClient(c, "default").list(labels={"mcruntime.io/lease": "fence"}, timeout=5)
        assert sorted(
            f["metadata"]["annotations"]["mcruntime.io/cluster"] for f in fences
        ) == sorted(fleet.names)
        assert {LeaseRecord.of(f).holder for f in fences} == {"a"}
        assert {LeaseRecord.of(f).lease_duration_seconds for f in fences} == {int(LEASE)}
    finally:
        c.stop()


def test_peer_leases_carry_the_weight_and_disappear_on_a_clean_stop(
    make_replica: Callable[..., Replica], mgmt: APIServer, fleet: Fleet
) -> None:
    a = make_replica("a", weight=3)
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    c = Cluster.from_kubeconfig(mgmt.kubeconfig())
    try:
        leases = LeaseClient(c, "default")
        peer = leases.get("mcr-peer-a", timeout=5)
        assert peer["metadata"]["annotations"]["mcruntime.io/weight"] == "3"
        assert LeaseRecord.of(peer).holder == "a"
        a.mgr.stop(5)
        names = {item["metadata"]["name"] for item in leases.list(timeout=5)}
        assert "mcr-peer-a" not in names
        assert all(fence(mgmt, n).holder == "" for n in fleet.names)
    finally:
        c.stop()


def test_basic_coordinator_engages_everything(fleet: Fleet) -> None:
    provider = Provider()
    for s in fleet:
        provider.add(s.name, Cluster.from_kubeconfig(s.kubeconfig(), name=s.name))
    mgr = Manager(provider=provider, options=ManagerOptions(coordinator=Basic()))
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    try:
        mgr.start()
        wait_for(lambda: set(mgr.engaged_clusters()) == set(fleet.names))
    finally:
        mgr.stop(5)


def test_sharded_needs_a_cluster_for_its_leases(fleet: Fleet) -> None:
    mgr = Manager(
        provider=Provider(), options=ManagerOptions(coordinator=Sharded(namespace="default"))
    )
    with pytest.raises(mcruntime.errors.ConfigError, match="cluster for its Leases"):
        mgr.start()
    mgr.stop()


@pytest.mark.parametrize(
    "kw",
    [
        {"renew_period": 2.0},
        {"renew_deadline": 2.5},
        {"probe_interval": 0},
        {"fence_prefix": "Bad_"},
    ],
)
def test_sharded_rejects_settings_that_break_fencing(kw: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Sharded(namespace="default", **{**TIMINGS, **kw})


def test_a_hung_lease_server_is_one_error_not_one_per_fence_lost(
    make_replica: Callable[..., Replica],
    fleet: Fleet,
    mgmt: APIServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # every fence lives on the Lease server: when it hangs, every cluster's fence expires
    # within a renew period. One cause, one error naming it; each cluster's name is still
    # in the log, at info level
    caplog.set_level(logging.INFO, logger="mcruntime.coordinator")
    a = make_replica("a")
    a.mgr.start()
    wait_for(lambda: a.engaged() == set(fleet.names))
    mgmt.freeze()
    try:
        wait_for(lambda: not a.engaged() and a.coordinator.owned() == [], timeout=LEASE)
        wait_for(
            lambda: len(logged(caplog, logging.INFO, containing=": fence lost (")) == 5,
            what="each other cluster's fence lost, at info level",
        )
    finally:
        mgmt.thaw()
    (error,) = logged(caplog, logging.ERROR, logger="mcruntime.coordinator")
    assert error.startswith("cluster=local coordinator peer=a: renewing fences failed: ")
    lost = logged(caplog, logging.INFO, containing=": fence lost (")
    named = [
        n for n in fleet.names for line in [error, *lost] if re.search(f"cluster={n}\\b", line)
    ]
    assert sorted(named) == sorted(fleet.names)
    wait_for(lambda: a.engaged() == set(fleet.names), timeout=4 * LEASE)
    (recovery,) = logged(caplog, logging.INFO, containing="renewing fences works again")
    assert recovery.startswith("cluster=local coordinator peer=a: renewing fences works again ")
    assert "after 6 fences lost" in recovery
    assert len(logged(caplog, logging.ERROR, logger="mcruntime.coordinator")) == 1
