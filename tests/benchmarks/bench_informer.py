"""Informer delivery: events/s from an envtest server through ``Informer`` -> handler.

Two phases, each beside a baseline measured in the same run on the same bytes:

- list: an informer's initial list of N ConfigMaps (pages of 500) until the
  handler has every object, vs ``json.loads`` of the same list pages;
- watch: N events replayed on a watch (the informer is held between its list
  and its watch while N objects are written), vs ``json.loads`` of each line of
  the same watch stream.

The server runs in its own process, so it does not compete for our GIL.
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any

from mcruntime.cache import Informer
from mcruntime.client import RESTMapping
from mcruntime.cluster import Cluster
from tests.benchmarks._common import Row, envtest_process, table

QUICK_N = 300
FULL_N = 5000
WRITERS = 4

_namespaces = count()


def configmap(name: str, namespace: str) -> dict[str, Any]:
    """A ConfigMap of a typical size (a few labels, annotations and data keys)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": "bench", "tier": "backend", "index": name.rsplit("-", 1)[-1]},
            "annotations": {"example.com/owner": "benchmarks", "example.com/note": "x" * 64},
        },
        "data": {f"key-{i}": f"value-{i}-" + "v" * 32 for i in range(8)},
    }


class _Counter:
    """Counts delivered events; holds the informer's thread on the ``gate`` object's initial add."""

    def __init__(self, target: int, gated: bool = False) -> None:
        self.target = target
        self.n = 0
        self.done = threading.Event()
        self.gated = gated
        self.at_gate = threading.Event()
        self.release = threading.Event()

    def _one(self) -> None:
        self.n += 1
        if self.n >= self.target:
            self.done.set()

    def on_add(self, obj: dict[str, Any], is_initial_list: bool) -> None:
        if self.gated and is_initial_list and obj["metadata"]["name"] == "gate":
            self.at_gate.set()
            self.release.wait(120)
            return
        self._one()

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._one()

    def on_delete(self, obj: dict[str, Any]) -> None:
        self._one()


class _Raw:
    """Plain HTTP GETs for the baseline bytes (same server, same queries)."""

    def __init__(self, kubeconfig: dict[str, Any]) -> None:
        cluster = kubeconfig["clusters"][0]["cluster"]
        self.host = cluster["server"].rstrip("/")
        ca = cluster.get("certificate-authority-data")
        self.context = (
            ssl.create_default_context(cadata=base64.b64decode(ca).decode()) if ca else None
        )
        self.headers = {
            "Authorization": "Bearer " + kubeconfig["users"][0]["user"]["token"],
            "Accept": "application/json",
        }

    def open(self, path: str) -> Any:
        return urllib.request.urlopen(
            urllib.request.Request(self.host + path, headers=self.headers),
            timeout=60,
            context=self.context,
        )

    def list_pages(self, namespace: str) -> list[bytes]:
        pages: list[bytes] = []
        token = ""
        while True:
            query = "limit=500" + (f"&continue={token}" if token else "")
            with self.open(f"/api/v1/namespaces/{namespace}/configmaps?{query}") as resp:
                page = resp.read()
            pages.append(page)
            token = json.loads(page)["metadata"].get("continue") or ""
            if not token:
                return pages

    def watch_lines(self, namespace: str, resource_version: str, n: int) -> list[bytes]:
        path = f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion={resource_version}"
        with self.open(path) as resp:
            return [resp.readline() for _ in range(n)]


def _write(cluster: Cluster, namespace: str, n: int) -> None:
    with ThreadPoolExecutor(WRITERS) as pool:
        list(pool.map(lambda i: cluster.client.create(configmap(f"cm-{i}", namespace)), range(n)))


def _namespace(cluster: Cluster) -> str:
    name = f"bench-{next(_namespaces)}"
    cluster.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


def measure_watch(cluster: Cluster, mapping: RESTMapping, n: int) -> tuple[float, str, str]:
    """Seconds to deliver n watch events; also the namespace and the resourceVersion the watch began at."""
    ns = _namespace(cluster)
    cluster.client.create(configmap("gate", ns))
    counter = _Counter(n, gated=True)
    inf = Informer(cluster.rest, mapping, namespace=ns)
    inf.add_event_handler(counter)
    inf.start()
    try:
        if not counter.at_gate.wait(30):
            raise RuntimeError("the informer did not list")
        start_rv = inf.last_sync_resource_version
        _write(cluster, ns, n)
        began = time.perf_counter()
        counter.release.set()
        if not counter.done.wait(120):
            raise RuntimeError(f"only {counter.n} of {n} watch events arrived")
        took = time.perf_counter() - began
    finally:
        counter.release.set()
        inf.stop()
    return took, ns, start_rv


def measure_list(cluster: Cluster, mapping: RESTMapping, namespace: str, n: int) -> float:
    """Seconds from an informer's start until its handler has all n objects of ``namespace``."""
    counter = _Counter(n)
    inf = Informer(cluster.rest, mapping, namespace=namespace)
    inf.add_event_handler(counter)
    began = time.perf_counter()
    inf.start()
    try:
        if not counter.done.wait(120):
            raise RuntimeError(f"only {counter.n} of {n} objects listed")
        return time.perf_counter() - began
    finally:
        inf.stop()


def baseline(chunks: list[bytes], runs: int) -> float:
    """Fastest seconds to ``json.loads`` every chunk."""
    best = float("inf")
    for _ in range(runs):
        began = time.perf_counter()
        for chunk in chunks:
            json.loads(chunk)
        best = min(best, time.perf_counter() - began)
    return best


def run(quick: bool = False, n: int | None = None) -> list[Row]:
    """Measure both phases; returns the table rows."""
    n = n or (QUICK_N if quick else FULL_N)
    runs = 1 if quick else 3
    with envtest_process(history=runs * (n + 4) + 100) as kubeconfig:
        cluster = Cluster.from_kubeconfig(kubeconfig, name="bench")
        try:
            mapping = cluster.rest_mapper.mapping("v1/ConfigMap")
            watch_times, namespace, start_rv = [], "", ""
            for _ in range(runs):
                took, namespace, start_rv = measure_watch(cluster, mapping, n)
                watch_times.append(took)
            listed = n + 1  # the gate too
            list_time = min(measure_list(cluster, mapping, namespace, listed) for _ in range(runs))
            raw = _Raw(kubeconfig)
            pages = raw.list_pages(namespace)
            lines = raw.watch_lines(namespace, start_rv, n)
        finally:
            cluster.stop()
    return [
        Row(
            "informer list -> handler",
            "events",
            listed / list_time,
            "json.loads of the list pages",
            listed / baseline(pages, runs * 3),
        ),
        Row(
            "informer watch -> handler",
            "events",
            n / min(watch_times),
            "json.loads of the watch lines",
            n / baseline(lines, runs * 3),
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.bench_informer", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_N} objects, one run (a few seconds)"
    )
    parser.add_argument("-n", type=int, default=None, help="objects per phase")
    args = parser.parse_args(argv)
    print(table(run(args.quick, args.n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
