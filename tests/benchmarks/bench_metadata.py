"""Metadata-only caches: an informer's initial list of N Secrets (4 KiB of data each), and what it keeps.

mcruntime's metadata-only informer (``metadata_only=True``: the server sends
``PartialObjectMetadata``) beside the same informer on whole objects, on the
same server and Secrets, in turns. Speed: Secrets listed per second until the
handler has every one (best of the runs). Memory: tracemalloc's growth while
the informer's store holds the N Secrets, per Secret, printed under the table.
The server runs in its own process, so it does not compete for our GIL.
"""

from __future__ import annotations

import argparse
import base64
import os
import threading
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mcruntime.cache import Informer
from mcruntime.cluster import Cluster
from tests.benchmarks._common import Row, envtest_process, table

QUICK_N = 200
FULL_N = 3000
DATA_BYTES = 3072  # 4 KiB once base64-encoded, a certificate bundle's size
NAMESPACE = "bench-secrets"
ROW_NAME = "informer list of Secrets, metadata only"

#: KiB held per Secret by the last `run`: {"whole": ..., "metadata": ...}
held_per_secret: dict[str, float] = {}


def secret(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": f"secret-{i}",
            "namespace": NAMESPACE,
            "labels": {"app": "bench", "index": str(i)},
            "annotations": {"example.com/rotated-at": "2026-11-26T00:00:00Z"},
        },
        "data": {"tls.crt": base64.b64encode(os.urandom(DATA_BYTES)).decode()},
    }


class _Until:
    """Sets ``done`` once ``n`` objects were added."""

    def __init__(self, n: int) -> None:
        self.n, self.seen, self.done = n, 0, threading.Event()

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        self.seen += 1
        if self.seen >= self.n:
            self.done.set()

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None: ...

    def on_delete(self, obj: dict[str, Any]) -> None: ...


def _listed(cluster: Cluster, n: int, metadata_only: bool) -> tuple[float, Informer]:
    """Seconds until an informer's handler has all n Secrets; the informer, still running."""
    mapping = cluster.rest_mapper.mapping("v1/Secret")
    until = _Until(n)
    inf = Informer(cluster.rest, mapping, namespace=NAMESPACE, metadata_only=metadata_only)
    inf.add_event_handler(until)
    began = time.perf_counter()
    inf.start()
    if not until.done.wait(120):
        inf.stop()
        raise RuntimeError(f"only {until.seen} of {n} Secrets listed")
    return time.perf_counter() - began, inf


def measure_list(cluster: Cluster, n: int, metadata_only: bool) -> float:
    took, inf = _listed(cluster, n, metadata_only)
    inf.stop()
    return took


def measure_memory(cluster: Cluster, n: int, metadata_only: bool) -> float:
    """KiB that tracemalloc sees allocated per Secret while the informer holds the n Secrets."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _, inf = _listed(cluster, n, metadata_only)
        held = tracemalloc.get_traced_memory()[0] - before
        inf.stop()
    finally:
        tracemalloc.stop()
    return held / n / 1024


def run(quick: bool = False, n: int | None = None) -> list[Row]:
    """Measure both flavours in turns; returns the table row (memory: see `memory_lines`)."""
    n = n or (QUICK_N if quick else FULL_N)
    runs = 1 if quick else 5
    with envtest_process(history=n + 100) as kubeconfig:
        cluster = Cluster.from_kubeconfig(kubeconfig, name="bench")
        try:
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            cluster.client.create(ns)
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda i: cluster.client.create(secret(i)), range(n)))
            for metadata_only in (False, True):  # warm-up: connections, first-use paths
                measure_list(cluster, n, metadata_only)
            whole, meta = float("inf"), float("inf")
            for _ in range(runs):
                whole = min(whole, measure_list(cluster, n, metadata_only=False))
                meta = min(meta, measure_list(cluster, n, metadata_only=True))
            held_per_secret["whole"] = measure_memory(cluster, n, metadata_only=False)
            held_per_secret["metadata"] = measure_memory(cluster, n, metadata_only=True)
        finally:
            cluster.stop()
    return [Row(ROW_NAME, "objects", n / meta, "the same informer, whole objects", n / whole)]


def memory_lines() -> list[str]:
    """What the informer's store holds per Secret, after `run`."""
    if not held_per_secret:
        return []
    whole, meta = held_per_secret["whole"], held_per_secret["metadata"]
    return [
        f"{ROW_NAME}: {meta:.2f} KiB held per Secret "
        f"(whole objects {whole:.2f} KiB: {whole / meta:.1f}x)"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_metadata", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_N} Secrets, one run")
    parser.add_argument("-n", type=int, default=None, help="Secrets")
    args = parser.parse_args(argv)
    rows = run(quick=args.quick, n=args.n)
    print(table(rows))
    print("\n" + "\n".join(memory_lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
