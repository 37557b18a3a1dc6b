"""``python -m tests.benchmarks.faults [--quick]``: figures for hung clusters (issue 10).

- time to detect a hung cluster (``freeze()`` until ``mcruntime_cluster_healthy`` is 0),
  with short health timings and (full mode) the defaults;
- the healthy clusters' p99 write-to-reconcile latency while one cluster is frozen,
  beside the same run with no fault (the reconciler writes to its own cluster, so the
  frozen cluster's reconciles hang until their deadline);
- the worst overlap between the old and the new leader when the old one's path to the
  Lease freezes (negative: the old one stopped before the new one started).

Figures are measured, never asserted on; the ratio that matters is printed beside each.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time
from typing import Any

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import APIServer, Fleet, Proxy
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.providers.clusters import Provider
from mcruntime.reconcile import Request, Result


def _cm(name: str, value: str = "0") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": {"v": value},
    }


def _wait(cond: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def detect(interval: float, timeout: float) -> float:
    """Seconds from freezing one of two clusters until the manager reports it unhealthy."""
    with Fleet(2, prefix="d") as fleet:
        provider = Provider()
        for s in fleet:
            provider.add(s.name, Cluster.from_kubeconfig(s.kubeconfig(), name=s.name))
        mgr = Manager(
            provider=provider,
            options=ManagerOptions(
                cluster_health_interval=interval, cluster_health_timeout=timeout
            ),
        )
        mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
        with mgr:
            began = time.monotonic()
            fleet.freeze("d-0")
            ok = _wait(
                lambda: mgr.metrics.sample("mcruntime_cluster_healthy", {"cluster": "d-0"}) == 0,
                interval + timeout + 30,
            )
            took = time.monotonic() - began
            fleet.thaw("d-0")
        return took if ok else float("nan")


def healthy_p99(frozen: bool, seconds: float, rate: float) -> float:
    """p99 (ms) of write-to-reconcile on 3 healthy clusters, with a 4th frozen or not."""
    with Fleet(4, prefix="p") as fleet:
        provider = Provider()
        for s in fleet:
            provider.add(s.name, Cluster.from_kubeconfig(s.kubeconfig(), name=s.name))
        mgr = Manager(provider=provider)
        written: dict[tuple[str, str, str], float] = {}
        latencies: list[float] = []
        lock = threading.Lock()

        def reconcile(req: Request) -> Result | None:
            cluster = mgr.get_cluster(req.cluster_name)
            obj = cluster.client.get("v1/ConfigMap", req.name, req.namespace)
            key = (req.cluster_name, req.name, obj["data"]["v"])
            with lock:
                t = written.pop(key, None)
            if t is not None:
                latencies.append(time.monotonic() - t)
            # write to its own cluster, as most reconcilers do (hangs on a frozen cluster)
            cluster.client.patch(
                "v1/ConfigMap", req.name, {"metadata": {"annotations": {"seen": key[2]}}}, "default"
            )
            # p-3's objects are reconciled continuously: once it freezes, its reconciles hang
            return Result(requeue_after=0.05) if req.cluster_name == "p-3" else None

        mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").with_options(
            max_concurrent_reconciles=4
        ).complete(reconcile)
        writers = {s.name: Cluster.from_kubeconfig(s.kubeconfig(), name="w") for s in fleet}
        for w in writers.values():
            for i in range(4):
                w.client.create(_cm(f"o{i}"))
        with mgr:
            if frozen:
                fleet.freeze("p-3")
            end = time.monotonic() + seconds
            n = 0
            while time.monotonic() < end:
                name = fleet.names[n % 4]
                obj = f"o{(n // 4) % 4}"
                if name != "p-3" or not frozen:
                    with lock:
                        written[(name, obj, str(n))] = time.monotonic()
                    writers[name].client.patch(
                        "v1/ConfigMap", obj, {"data": {"v": str(n)}}, "default"
                    )
                n += 1
                time.sleep(1 / rate)
            _wait(lambda: not written, 5)
            fleet.thaw("p-3")
        for w in writers.values():
            w.stop()
        if len(latencies) < 20:
            return float("nan")
        return statistics.quantiles(latencies, n=100)[98] * 1000


def leader_overlap(lease: float, renew: float, retry: float) -> float:
    """Old leader's last reconcile end minus new leader's first start (s); negative is safe."""
    server = APIServer("overlap").start()
    try:
        c = Cluster.from_kubeconfig(server.kubeconfig())
        c.client.create(_cm("cm"))
        c.stop()
        spans: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}

        def replica(name: str, kubeconfig: dict[str, Any]) -> Manager:
            mgr = Manager(
                kubeconfig,
                options=ManagerOptions(
                    leader_election=True,
                    leader_election_id="overlap",
                    leader_election_namespace="default",
                    lease_duration=lease,
                    renew_deadline=renew,
                    retry_period=retry,
                ),
            )

            def reconcile(req: Request) -> Result:
                began = time.monotonic()
                time.sleep(0.005)
                spans[name].append((began, time.monotonic()))
                return Result(requeue_after=0.02)

            mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
            return mgr

        with Proxy(server) as path:
            a = replica("a", path.kubeconfig())
            b = replica("b", server.kubeconfig())
            a.start()
            _wait(lambda: spans["a"], 10)
            b.start()
            path.freeze()
            _wait(lambda: spans["b"], lease * 3)
            path.thaw()
            a.stop(5)
            b.stop(5)
        if not spans["b"]:
            return float("nan")
        return max(e for _, e in spans["a"]) - min(s for s, _ in spans["b"])
    finally:
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.benchmarks.faults")
    parser.add_argument("--quick", action="store_true", help="short timings only (~12 s)")
    args = parser.parse_args(argv)
    print(
        f"mcruntime fault figures ({'quick' if args.quick else 'full'}; Python {platform.python_version()})\n"
    )
    print("| figure | value | target |")
    print("|---|---:|---|")
    print(
        f"| detect a hung cluster (health interval 1 s, timeout 0.5 s) | {detect(1.0, 0.5):.2f} s | < interval + timeout + 1 s |"
    )
    if not args.quick:
        print(
            f"| detect a hung cluster (defaults: 10 s, 5 s) | {detect(10.0, 5.0):.2f} s | < 30 s |"
        )
    seconds = 2.0 if args.quick else 15.0
    base = healthy_p99(False, seconds, 100)
    hung = healthy_p99(True, seconds, 100)
    print(f"| healthy clusters' p99 write-to-reconcile, no fault | {base:.1f} ms | |")
    print(
        f"| the same with one cluster frozen, its reconciles hanging (4 workers) | {hung:.1f} ms "
        f"| ratio {hung / base:.2f} (< 2) |"
    )
    lease, renew, retry = (1.5, 1.0, 0.25) if args.quick else (3.0, 2.0, 0.5)
    print(
        f"| leader overlap, frozen Lease path ({lease:g}/{renew:g}/{retry:g} s) "
        f"| {leader_overlap(lease, renew, retry):+.2f} s | < 0 |"
    )
    if not args.quick:
        print(
            f"| leader overlap, frozen Lease path (client-go 15/10/2 s) | {leader_overlap(15.0, 10.0, 2.0):+.2f} s | < 0 |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
