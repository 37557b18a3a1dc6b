"""A measured process: one way of watching a fleet, driven over stdin/stdout by the orchestrator.

    python -m tests.benchmarks.fleet._subject {mcruntime|bare|handrolled}

Commands and answers are JSON lines. Subjects:

- ``mcruntime``: a Manager with the ``clusters`` provider and one controller
  for ConfigMaps whose reconciler reads the object from the cache and records it.
- ``bare`` (the limit): per cluster one thread that lists (pages of 500) and
  watches from the list's resourceVersion with the plain ``kubernetes`` client,
  ``_preload_content=False`` and ``json.loads``; no runtime around it.
- ``handrolled``: the blog-post pattern; one ``ApiClient`` per cluster, each
  watched in its own thread with ``kubernetes.watch.Watch`` (model objects).

Every subject records each object it is handed: the first sighting of every
object ends the initial sync, and an object carrying the writer's timestamp
annotation yields one write-to-handler latency.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

import yaml

from tests.benchmarks.fleet._objects import ANNOTATION, SEEDED_PREFIX
from tests.benchmarks.fleet._procstat import malloc_trim, proc_stat

__all__ = [
    "ANNOTATION",
    "ENGAGE_LIMIT_ENV",
    "FREEZE_GC_ENV",
    "NO_PRIORITY_QUEUE_ENV",
    "SCRAPE_ENV",
    "Recorder",
    "main",
]

WATCH_SECONDS = 3600
#: the orchestrator's ``--engage-limit`` (mcruntime's ``max_concurrent_engagements``)
ENGAGE_LIMIT_ENV = "MCRUNTIME_BENCH_ENGAGE_LIMIT"
#: the orchestrator's ``--freeze-gc`` (mcruntime's ``freeze_gc``), "1" when given
FREEZE_GC_ENV = "MCRUNTIME_BENCH_FREEZE_GC"
#: the orchestrator's ``--no-priority-queue`` (``use_priority_queue=False``), "1" when given
NO_PRIORITY_QUEUE_ENV = "MCRUNTIME_BENCH_NO_PRIORITY_QUEUE"
#: the orchestrator's ``--scrape SECONDS[:generate_latest]``: a Prometheus scrape of the
#: manager's metrics every SECONDS in the mcruntime subject, by its own exposition or, to
#: compare, prometheus_client's generate_latest of the same registry
SCRAPE_ENV = "MCRUNTIME_BENCH_SCRAPE"
log = logging.getLogger("bench.subject")


class Recorder:
    """Counts handled objects, detects the end of the initial sync, collects latencies."""

    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.synced = threading.Event()
        self.synced_at = 0.0
        self._seen: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self.count = 0
        self.latencies: list[float] = []
        #: when each of ``latencies`` was written (the annotation's ``time.time()``)
        self.written_at: list[float] = []
        self.mark_ts = time.time()
        self.mark_mono = time.monotonic()
        self.on_cluster: Callable[[str], None] | None = None
        self._more: set[str] = set()
        self._more_seen: set[tuple[str, str, str]] = set()
        self._more_expect = 0
        self.more_synced = threading.Event()
        self.more_synced_at = 0.0

    def expect_more(self, clusters: list[str], objects: int) -> None:
        """Track clusters added later: `more_synced` is set once ``objects`` of theirs were handled."""
        with self._lock:
            self._more = set(clusters)
            self._more_seen = set()
            self._more_expect = objects
            self.more_synced.clear()

    def record(self, cluster: str, namespace: str, name: str, written: str | None) -> None:
        now = time.time()
        with self._lock:
            self.count += 1
            # only the seeded objects count: envtest also publishes kube-root-ca.crt into
            # every namespace, which the subjects see as well
            seeded = name.startswith(SEEDED_PREFIX)
            if not self.synced.is_set() and seeded:
                self._seen.add((cluster, namespace, name))
                if len(self._seen) >= self.expect:
                    self.synced_at = time.monotonic()
                    self.synced.set()
            if seeded and self._more and cluster in self._more and not self.more_synced.is_set():
                self._more_seen.add((cluster, namespace, name))
                if len(self._more_seen) >= self._more_expect:
                    self.more_synced_at = time.monotonic()
                    self.more_synced.set()
            if written:
                ts = float(written)
                if ts >= self.mark_ts:
                    self.latencies.append(now - ts)
                    self.written_at.append(ts)
        cb = self.on_cluster
        if cb is not None:
            cb(cluster)

    def mark(self) -> None:
        with self._lock:
            self.count = 0
            self.latencies = []
            self.written_at = []
            self.mark_ts = time.time()
            self.mark_mono = time.monotonic()

    def seen(self) -> int:
        with self._lock:
            return len(self._seen)


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def _timed_add(
    rec: Recorder, names: list[str], objects: int, add: Callable[[], None]
) -> dict[str, Any]:
    """Run ``add`` (which adds ``names``); seconds until each of their ``objects`` was handled."""
    rec.expect_more(names, len(names) * objects)
    t0 = time.monotonic()
    add()
    added = time.monotonic() - t0
    synced = rec.more_synced.wait(600)
    return {
        "add_calls_s": added,
        "synced": synced,
        "synced_s": (rec.more_synced_at if synced else time.monotonic()) - t0,
    }


# -- subjects -------------------------------------------------------------------------------


def _scraper(mgr: Any, spec: str | None) -> threading.Thread | None:
    """A daemon thread scraping ``mgr``'s metrics as ``spec`` (``SCRAPE_ENV``) says."""
    if not spec:
        return None
    seconds, _, how = spec.partition(":")
    interval = float(seconds)
    if how == "generate_latest":
        from prometheus_client import generate_latest

        def scrape() -> Any:
            return generate_latest(mgr.metrics.registry)
    else:
        scrape = mgr.metrics.exposition

    def run() -> None:
        while True:
            time.sleep(interval)
            scrape()

    t = threading.Thread(target=run, name="bench/scraper", daemon=True)
    t.start()
    return t


class McruntimeSubject:
    """mcruntime: Manager + ``clusters`` provider + a ConfigMap controller reading from its cache."""

    def __init__(self) -> None:
        import mcruntime.cache  # noqa: F401  (imported lazily on the first engagement)
        from mcruntime import Cluster, Manager, controller_managed_by
        from mcruntime.controller import ControllerOptions
        from mcruntime.errors import NotFound
        from mcruntime.manager import ManagerOptions
        from mcruntime.providers.clusters import Provider

        self.provider = Provider()
        limit = os.environ.get(ENGAGE_LIMIT_ENV)
        self.mgr = Manager(
            provider=self.provider,
            options=ManagerOptions(
                max_concurrent_engagements=int(limit) if limit else None,
                freeze_gc=os.environ.get(FREEZE_GC_ENV) == "1",
                controller=ControllerOptions(
                    use_priority_queue=os.environ.get(NO_PRIORITY_QUEUE_ENV) != "1"
                ),
            ),
        )
        self.rec: Recorder | None = None
        self._cluster_cls = Cluster
        mgr = self.mgr

        def reconcile(req: Any) -> None:
            rec = self.rec
            if rec is None:
                return
            try:
                obj = mgr.get_cluster(req.cluster_name).client.get(
                    "v1/ConfigMap", req.name, req.namespace
                )
            except NotFound:
                return
            ann = obj["metadata"].get("annotations")
            rec.record(
                req.cluster_name, req.namespace, req.name, ann.get(ANNOTATION) if ann else None
            )

        controller_managed_by(mgr).named("bench").for_("v1/ConfigMap").complete(reconcile)
        self.mgr.start()
        self._scraper = _scraper(self.mgr, os.environ.get(SCRAPE_ENV))

    def _cluster(self, doc: dict[str, Any], name: str) -> Any:
        return self._cluster_cls.from_kubeconfig(doc, context=name, name=name)

    def start(self, docs: dict[str, dict[str, Any]], names: list[str], rec: Recorder) -> None:
        self.rec = rec
        for name in names:
            self.provider.add(name, self._cluster(docs[name], name))

    def churn(self, doc: dict[str, Any], name: str, cycles: int, rec: Recorder) -> dict[str, Any]:
        """Add and remove cluster ``name`` ``cycles`` times; time both edges, track threads and RSS."""
        from mcruntime._threads import mcruntime_threads

        self.rec = rec
        first = threading.Event()
        rec.on_cluster = lambda c: first.set() if c == name else None

        def cluster_threads() -> list[str]:
            return [t.name for t in mcruntime_threads() if name in t.name.split("/")]

        start = {**proc_stat(), "py_threads": threading.active_count()}
        names_start = sorted(t.name for t in threading.enumerate())
        add_s: list[float] = []
        remove_s: list[float] = []
        series: list[dict[str, int]] = []
        leftovers: list[str] = []
        for _ in range(cycles):
            first.clear()
            t0 = time.monotonic()
            self.provider.add(name, self._cluster(doc, name))
            if not first.wait(60):
                raise RuntimeError(f"cluster {name} was not reconciled within 60 s of being added")
            add_s.append(time.monotonic() - t0)
            t0 = time.monotonic()
            self.provider.remove(name)
            deadline = t0 + 30
            while cluster_threads() and time.monotonic() < deadline:
                time.sleep(0.001)
            remove_s.append(time.monotonic() - t0)
            leftovers = cluster_threads()
            series.append({**proc_stat(), "py_threads": threading.active_count()})
        rec.on_cluster = None
        settle = time.monotonic()
        # an OS thread outlives its join() by a moment: wait (bounded) for the kernel's count
        while proc_stat()["threads"] > start["threads"] and time.monotonic() - settle < 5:
            time.sleep(0.005)
        return {
            "end": {**proc_stat(), "py_threads": threading.active_count()},
            "settle_s": time.monotonic() - settle,
            "start": start,
            "add_s": add_s,
            "remove_s": remove_s,
            "series": series,
            "leftover_threads": leftovers,
            "threads_gained": sorted(set(t.name for t in threading.enumerate()) - set(names_start)),
        }

    def add_many(
        self, docs: dict[str, dict[str, Any]], names: list[str], objects: int, rec: Recorder
    ) -> dict[str, Any]:
        """Add ``names`` at once; seconds until every one of their objects was reconciled."""

        def add() -> None:
            for name in names:
                self.provider.add(name, self._cluster(docs[name], name))

        return _timed_add(rec, names, objects, add)

    def remove_many(self, names: list[str]) -> dict[str, Any]:
        """Remove ``names`` at once; seconds until no thread of any of them is left."""
        from mcruntime._threads import mcruntime_threads

        gone = set(names)

        def left() -> list[str]:
            return [t.name for t in mcruntime_threads() if gone & set(t.name.split("/"))]

        t0 = time.monotonic()
        for name in names:
            self.provider.remove(name)
        removed = time.monotonic() - t0
        deadline = t0 + 120
        while left() and time.monotonic() < deadline:
            time.sleep(0.005)
        return {
            "remove_calls_s": removed,
            "threads_gone_s": time.monotonic() - t0,
            "leftover_threads": left(),
        }

    def stop(self) -> None:
        self.mgr.stop(10)


class BareSubject:
    """The limit: plain ``kubernetes`` client, raw responses and ``json.loads``, a thread per cluster."""

    def __init__(self) -> None:
        # CoreV1Api is imported lazily by the client (about 1 s): not part of a sync
        from kubernetes.client import CoreV1Api  # noqa: F401

        self.threads: list[threading.Thread] = []

    def start(self, docs: dict[str, dict[str, Any]], names: list[str], rec: Recorder) -> None:
        from kubernetes import config
        from kubernetes.client import CoreV1Api

        for name in names:
            core = CoreV1Api(config.new_client_from_config_dict(docs[name], context=name))
            t = threading.Thread(
                target=self._run, args=(name, core, rec), name=f"bare/{name}", daemon=True
            )
            t.start()
            self.threads.append(t)

    def _run(self, cluster: str, core: Any, rec: Recorder) -> None:
        loads = json.loads
        token: str | None = None
        rv = ""
        while True:
            kwargs: dict[str, Any] = {"limit": 500, "_preload_content": False}
            if token:
                kwargs["_continue"] = token
            page = loads(core.list_config_map_for_all_namespaces(**kwargs).data)
            for obj in page["items"]:
                meta = obj["metadata"]
                ann = meta.get("annotations")
                rec.record(
                    cluster, meta["namespace"], meta["name"], ann.get(ANNOTATION) if ann else None
                )
            rv = page["metadata"].get("resourceVersion") or rv
            token = page["metadata"].get("continue")
            if not token:
                break
        while True:
            resp = core.list_config_map_for_all_namespaces(
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _preload_content=False,
            )
            for line in resp:
                if not line.strip():
                    continue
                event = loads(line)
                meta = event["object"]["metadata"]
                rv = meta.get("resourceVersion") or rv
                if event["type"] in ("ADDED", "MODIFIED"):
                    ann = meta.get("annotations")
                    rec.record(
                        cluster,
                        meta["namespace"],
                        meta["name"],
                        ann.get(ANNOTATION) if ann else None,
                    )

    def add_many(
        self, docs: dict[str, dict[str, Any]], names: list[str], objects: int, rec: Recorder
    ) -> dict[str, Any]:
        """Start watching ``names`` at once; seconds until every one of their objects was handled
        (the baseline of the churn at scale: the bare client cannot stop a cluster's thread)."""
        return _timed_add(rec, names, objects, lambda: self.start(docs, names, rec))

    def stop(self) -> None:
        """Daemon threads end with the process."""


class HandrolledSubject:
    """The blog-post pattern: one client per cluster, ``watch.Watch().stream`` in a thread each."""

    def __init__(self) -> None:
        # lazily imported by the client on first use (about 1 s): not part of a sync
        from kubernetes.client import CoreV1Api, V1ConfigMap, V1ConfigMapList  # noqa: F401

        self.threads: list[threading.Thread] = []

    def start(self, docs: dict[str, dict[str, Any]], names: list[str], rec: Recorder) -> None:
        from kubernetes import config
        from kubernetes.client import CoreV1Api

        for name in names:
            core = CoreV1Api(config.new_client_from_config_dict(docs[name], context=name))
            t = threading.Thread(
                target=self._run, args=(name, core, rec), name=f"hand/{name}", daemon=True
            )
            t.start()
            self.threads.append(t)

    def _run(self, cluster: str, core: Any, rec: Recorder) -> None:
        from kubernetes import watch

        while True:
            w = watch.Watch()
            for event in w.stream(
                core.list_config_map_for_all_namespaces, timeout_seconds=WATCH_SECONDS
            ):
                if event["type"] not in ("ADDED", "MODIFIED"):
                    continue
                meta = event["object"].metadata
                ann = meta.annotations
                rec.record(cluster, meta.namespace, meta.name, ann.get(ANNOTATION) if ann else None)

    def stop(self) -> None:
        """Daemon threads end with the process."""


SUBJECTS: dict[str, Callable[[], Any]] = {
    "mcruntime": McruntimeSubject,
    "bare": BareSubject,
    "handrolled": HandrolledSubject,
}


# -- protocol -----------------------------------------------------------------------------------


_parsed: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}


def _kubeconfigs(path: str) -> dict[str, dict[str, Any]]:
    """The fleet kubeconfig at ``path``, one document per context, parsed once per version of
    the file: a 1,000-context YAML takes about a second of pure-Python parsing, which is the
    harness's work, not the subject's (churn at scale adds clusters of the file it started with)."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _parsed:
        with open(path) as f:
            docs = split_kubeconfig(yaml.safe_load(f))
        _parsed.clear()
        _parsed[key] = docs
    return _parsed[key]


def split_kubeconfig(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """One kubeconfig per context (what a provider holds per cluster), so no subject pays for
    scanning a fleet-wide file once per cluster."""
    clusters = {c["name"]: c for c in doc["clusters"]}
    users = {u["name"]: u for u in doc["users"]}
    out = {}
    for ctx in doc["contexts"]:
        spec = ctx["context"]
        out[ctx["name"]] = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": ctx["name"],
            "contexts": [ctx],
            "clusters": [clusters[spec["cluster"]]],
            "users": [users[spec["user"]]] if spec.get("user") in users else [],
        }
    return out


def serve(kind: str, inp: TextIO, out: TextIO) -> None:
    """Answer the orchestrator's commands until ``stop`` or end of input."""
    before = {"threads": threading.active_count(), **proc_stat(), "cpu_s": _cpu_seconds()}
    subject = SUBJECTS[kind]()
    idle = {"threads": threading.active_count(), **proc_stat(), "cpu_s": _cpu_seconds()}
    rec = Recorder(0)

    def reply(**fields: Any) -> None:
        out.write(json.dumps(fields) + "\n")
        out.flush()

    reply(op="ready", before=before, idle=idle)
    for line in inp:
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "start":
            docs = _kubeconfigs(cmd["kubeconfig"])
            rec = Recorder(cmd["expect"])
            cpu0 = _cpu_seconds()
            t0 = time.monotonic()
            subject.start(docs, cmd["clusters"], rec)
            synced = rec.synced.wait(cmd.get("sync_timeout", 600))
            sync_s = (rec.synced_at if synced else time.monotonic()) - t0
            reply(
                op=op,
                synced=synced,
                sync_s=sync_s,
                seen=rec.seen(),
                expect=rec.expect,
                cpu_s=_cpu_seconds() - cpu0,
                stat={**proc_stat(), "py_threads": threading.active_count()},
            )
        elif op == "stats":
            reply(
                op=op,
                stat={**proc_stat(), "py_threads": threading.active_count()},
                cpu_s=_cpu_seconds(),
            )
        elif op == "mark":
            rec.mark()
            reply(op=op, cpu_s=_cpu_seconds())
        elif op == "window":
            # the saturation phase's window, stamped here at its edges (``time.time()`` values):
            # a saturated subject answers its commands late, so stamps taken by the orchestrator
            # when the answers arrive would span more than the window, and unevenly
            stamps = []
            for at in (cmd["start_at"], cmd["end_at"]):
                time.sleep(max(0.0, at - time.time()))
                stamps.append({"at": time.time(), "count": rec.count, "cpu_s": _cpu_seconds()})
            reply(op=op, stamps=stamps)
        elif op == "drain":
            quiet, deadline = cmd.get("quiet", 0.5), time.monotonic() + cmd.get("timeout", 10)
            last, since = rec.count, time.monotonic()
            while time.monotonic() < deadline and time.monotonic() - since < quiet:
                time.sleep(0.05)
                if rec.count != last:
                    last, since = rec.count, time.monotonic()
            reply(op=op, count=rec.count)
        elif op == "collect":
            with rec._lock:
                lat = list(rec.latencies)
                written_at = list(rec.written_at)
                count = rec.count
            reply(
                op=op,
                count=count,
                elapsed=time.monotonic() - rec.mark_mono,
                latencies_ms=[round(x * 1000, 3) for x in lat],
                written_at=[round(x, 4) for x in written_at] if cmd.get("times") else None,
                cpu_s=_cpu_seconds(),
                stat={**proc_stat(), "py_threads": threading.active_count()},
            )
        elif op == "churn":
            doc = _kubeconfigs(cmd["kubeconfig"])[cmd["cluster"]]
            result = subject.churn(doc, cmd["cluster"], cmd["cycles"], Recorder(1 << 60))
            reply(op=op, **result)
        elif op == "add_many":
            docs = _kubeconfigs(cmd["kubeconfig"])
            reply(op=op, **subject.add_many(docs, cmd["clusters"], cmd["objects"], rec))
        elif op == "remove_many":
            reply(op=op, **subject.remove_many(cmd["clusters"]))
        elif op == "settle":
            # an OS thread outlives its join() by a moment: wait (bounded) for the kernel's count
            t0 = time.monotonic()
            while proc_stat()["threads"] > cmd["threads"] and time.monotonic() - t0 < 10:
                time.sleep(0.005)
            settle_s = time.monotonic() - t0
            stat = {**proc_stat(), "py_threads": threading.active_count()}
            # what the clusters that left hold in reference cycles is freed by the next full
            # collection, which CPython runs on its own schedule: RSS once it has run too
            gc.collect()
            collected = proc_stat()
            # and once the C allocator gave back the pages it keeps for reuse (glibc)
            trimmed = proc_stat() if malloc_trim() else None
            reply(
                op=op,
                settle_s=settle_s,
                stat=stat,
                stat_collected=collected,
                stat_trimmed=trimmed,
            )
        elif op == "stop":
            subject.stop()
            reply(op=op)
            return
        else:
            reply(op=op, error=f"unknown op {op!r}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in SUBJECTS:
        print(
            f"usage: python -m tests.benchmarks.fleet._subject {{{'|'.join(SUBJECTS)}}}",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s subject %(name)s %(levelname)s %(message)s",
    )
    out = sys.stdout
    sys.stdout = sys.stderr
    serve(args[0], sys.stdin, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
