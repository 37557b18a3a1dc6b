"""Sharding with real processes: manager replicas split a fleet through Leases on a management server.

Each replica (``shard_replica.py``) records every reconcile as ``replica
cluster start end``. The test checks that every cluster is reconciled by
exactly one replica, that a SIGKILLed replica's clusters are taken over within
the lease duration plus the probe interval (plus the time to sync a cache and
run the first reconcile), that a new replica takes its share, and that no two
replicas ever reconciled the same cluster at the same time.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet, wait_for
from mcruntime.manager.coordinator import Peer, owner

LEASE = 3.0
PROBE = 1.0
RENEW = 1.0
#: engagement after the fence is taken: a cache sync and the first reconcile, on a busy machine
ENGAGE_SLACK = 3.0
REPLICA = Path(__file__).with_name("shard_replica.py")


@dataclass(frozen=True)
class Record:
    replica: str
    cluster: str
    start: float
    end: float


wait_until = functools.partial(wait_for, interval=0.1)


class Scenario:
    """A management server, a fleet, and replica processes writing reconcile records."""

    def __init__(self, tmp: Path, n_clusters: int) -> None:
        self.tmp = tmp
        self.mgmt = APIServer("mgmt").start()
        self.fleet = Fleet(n_clusters, prefix="c").start()
        for server in self.fleet:
            c = Cluster.from_kubeconfig(server.kubeconfig())
            c.client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "cm", "namespace": "default"},
                }
            )
            c.stop()
        self.mgmt_config = self.mgmt.write_kubeconfig(tmp / "mgmt.yaml")
        self.clusters_config = self.fleet.write_kubeconfig(tmp / "clusters.yaml")
        self.log = tmp / "reconciles.log"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, replica: str) -> None:
        err = open(self.tmp / f"{replica}.err", "wb")  # noqa: SIM115 - closed with the process
        self.procs[replica] = subprocess.Popen(
            [
                sys.executable,
                str(REPLICA),
                "--id",
                replica,
                "--management",
                str(self.mgmt_config),
                "--clusters",
                str(self.clusters_config),
                "--log",
                str(self.log),
                "--lease",
                str(LEASE),
                "--renew",
                str(RENEW),
                "--probe",
                str(PROBE),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        err.close()

    def records(self) -> list[Record]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                out.append(Record(parts[0], parts[1], float(parts[2]), float(parts[3])))
        return out

    def owners_since(self, since: float) -> dict[str, set[str]]:
        owners: dict[str, set[str]] = defaultdict(set)
        for r in self.records():
            if r.start >= since:
                owners[r.cluster].add(r.replica)
        return owners

    def expected(self, replicas: set[str]) -> dict[str, str]:
        """cluster -> the replica rendezvous hashing assigns it to among ``replicas``."""
        peers = [Peer(r) for r in replicas]
        return {c: str(owner(f"{self.clusters_config}+{c}", peers)) for c in self.fleet.names}

    def split(self, window: float = 1.5) -> dict[str, set[str]]:
        """cluster -> the replicas that reconciled it during the last ``window`` seconds."""
        return self.owners_since(time.time() - window)

    def settle(self, replicas: set[str], timeout: float) -> dict[str, str]:
        """Wait until every cluster runs on exactly the replica hashing assigns it to, and only there."""
        want = self.expected(replicas)
        wait_until(
            lambda: self.split() == {c: {r} for c, r in want.items()},
            timeout,
            f"clusters split over {sorted(replicas)} as {want}",
        )
        return want

    def assert_no_overlap(self) -> None:
        by_cluster: dict[str, list[Record]] = defaultdict(list)
        for r in self.records():
            by_cluster[r.cluster].append(r)
        for cluster, runs in by_cluster.items():
            runs.sort(key=lambda r: r.start)
            latest: dict[str, Record] = {}  # replica -> its run that ends last so far
            for run in runs:
                for other in latest.values():
                    assert other.replica == run.replica or other.end <= run.start, (
                        f"{cluster} reconciled by {other.replica} ({other.start:.3f}-{other.end:.3f}) "
                        f"and {run.replica} ({run.start:.3f}-{run.end:.3f}) at the same time"
                    )
                if run.replica not in latest or latest[run.replica].end < run.end:
                    latest[run.replica] = run

    def diagnostics(self) -> str:
        parts = []
        for replica in self.procs:
            err = self.tmp / f"{replica}.err"
            if err.exists():
                parts.append(f"--- {replica} ---\n" + "\n".join(err.read_text().splitlines()[-25:]))
        return "\n".join(parts)

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
            p.wait(10)
        self.fleet.close()
        self.mgmt.close()


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Callable[[int], Scenario]]:
    made: list[Scenario] = []

    def make(n_clusters: int) -> Scenario:
        s = Scenario(tmp_path, n_clusters)
        made.append(s)
        return s

    yield make
    for s in made:
        print(s.diagnostics())  # shown by pytest only when the test failed
        s.close()


def run(scenario: Scenario, first: list[str], joiner: str) -> None:
    for r in first:
        scenario.start(r)
    split = scenario.settle(set(first), timeout=40)
    assert set(split.values()) == set(first), f"every replica gets clusters: {split}"

    # SIGKILL one replica: the others take its clusters once its Leases expire
    victim = first[0]
    orphans = sorted(c for c, r in split.items() if r == victim)
    scenario.procs[victim].send_signal(signal.SIGKILL)
    scenario.procs[victim].wait(10)
    killed = time.time()
    survivors = set(first) - {victim}

    def taken_over() -> bool:
        owners = scenario.owners_since(killed)
        return all(owners.get(c) and owners[c] <= survivors for c in orphans)

    wait_until(taken_over, LEASE + PROBE + ENGAGE_SLACK + 10, "orphaned clusters taken over")
    took = (
        max(
            min(r.start for r in scenario.records() if r.cluster == c and r.start >= killed)
            for c in orphans
        )
        - killed
    )
    print(f"take-over of {len(orphans)} clusters took {took:.2f}s")
    assert took <= LEASE + PROBE + ENGAGE_SLACK, f"take-over took {took:.1f}s"
    split = scenario.settle(survivors, timeout=20)

    # a new replica joins: clusters move to it, and only to it
    scenario.start(joiner)
    after = scenario.settle(survivors | {joiner}, timeout=40)
    moved = {c for c, r in after.items() if r != split[c]}
    assert moved and all(after[c] == joiner for c in moved), after

    for r in sorted(survivors | {joiner}):
        scenario.procs[r].send_signal(signal.SIGTERM)
    for r in sorted(survivors | {joiner}):
        assert scenario.procs[r].wait(30) == 0, f"{r} did not stop cleanly"
    scenario.assert_no_overlap()


@pytest.mark.timeout(180)
def test_three_replicas_share_thirty_clusters_survive_a_kill_and_take_in_a_fourth(
    scenario: Callable[[int], Scenario],
) -> None:
    run(scenario(30), ["r0", "r1", "r2"], "r3")
