"""A scrape of the manager's metrics at fleet sizes, beside ``prometheus_client``'s
``generate_latest`` of the same registry (measured in the same run).

Every engaged cluster adds series to each controller's reconcile and work-queue
metrics (counters and histograms with a ``cluster`` label): at 1,000 clusters a
scrape is ~75,000 samples. The scrape runs in the manager's process, on its GIL,
every scrape interval, so its cost is taken from the reconciles of every cluster.
"""

from __future__ import annotations

import sys
import time

from prometheus_client import generate_latest

from mcruntime.metrics import Metrics
from tests.benchmarks._common import Row, best_rate, quick_main


def fleet_metrics(clusters: int) -> Metrics:
    """A manager's metrics after one controller reconciled once in each of ``clusters``."""
    m = Metrics()
    queue = m.queue_metrics("configmaps")
    for i in range(clusters):
        cluster = f"cluster-{i}"
        m.reconciled("configmaps", cluster, "success", 0.003)
        queue.add(cluster)
        queue.get(cluster, 0.0004)
        queue.done(cluster, 0.003)
    return m


def run(*, quick: bool = False) -> list[Row]:
    rows = []
    for clusters in (100,) if quick else (100, 1000):
        m = fleet_metrics(clusters)
        runs = 1 if quick else 5

        def ours(m: Metrics = m) -> float:
            t0 = time.perf_counter()
            m.exposition()
            return time.perf_counter() - t0

        def baseline(m: Metrics = m) -> float:
            t0 = time.perf_counter()
            generate_latest(m.registry)
            return time.perf_counter() - t0

        rows.append(
            Row(
                f"metrics scrape, {clusters} clusters",
                "scrape",
                best_rate(1, runs, ours),
                "prometheus_client generate_latest",
                best_rate(1, runs, baseline),
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    return quick_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
