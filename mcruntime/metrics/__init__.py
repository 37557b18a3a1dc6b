"""Prometheus metrics with controller-runtime's names, plus a ``cluster`` label for per-cluster work.

Each [`Metrics`][mcruntime.metrics.Metrics] owns its own registry, so two managers in one process
never collide (no global state).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from mcruntime._local import display_name

_T = TypeVar("_T")

__all__ = ["Metrics", "QueueMetricsRecorder"]

_RECONCILE_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5,
    6,
    7,
    8,
    9,
    10,
    15,
    20,
    25,
    30,
    40,
    50,
    60,
)
#: controller-runtime's ``prometheus.ExponentialBuckets(10e-9, 10, 12)``: 1e-8 .. 1000 s (a wait
#: of minutes, a fleet's first sync, must not read as the last finite bound)
_QUEUE_BUCKETS = tuple(10.0**e for e in range(-8, 4))


#: the labels of the work-queue series: the queue's name, and (as controller-runtime's since
#: v0.19) the controller's, the same here (a queue is its controller's), then the cluster
_QUEUE_LABELS = ["name", "controller", "cluster"]

#: the cluster label of a series (the local cluster reads "local")
_cluster = display_name


class _Direct:
    """While `Metrics.exposition` writes the text of the collectors below itself, their
    ``collect()`` yields nothing, so the registry's pass does not format them twice."""

    local = threading.local()

    @classmethod
    def active(cls) -> bool:
        return getattr(cls.local, "on", False)


def _label_pairs(names: list[str], values: tuple[str, ...]) -> list[str]:
    """``['cluster="a"', 'controller="b"']``: the labels sorted by name and escaped, as the
    text format writes them (prometheus_client's ``generate_latest`` byte for byte)."""
    return [f'{k}="{_escape(v)}"' for k, v in sorted(zip(names, values, strict=True))]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _count_text(n: int) -> str:
    """A cumulative bucket count as ``floatToGoString`` writes it, without its cost below 1e6."""
    return f"{n}.0" if n < 1_000_000 else floatToGoString(n)


def _help(name: str, documentation: str, kind: str) -> str:
    doc = documentation.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"


class _Count:
    """One counter series: a plain float the caller bumps under its own lock."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0


class _Hist:
    """One histogram series: per-bucket (not cumulative) counts plus the sum."""

    __slots__ = ("counts", "sum")

    def __init__(self, n_buckets: int) -> None:
        self.counts = [0] * (n_buckets + 1)
        self.sum = 0.0


class _CounterVec(Collector):
    """A labelled counter kept in plain numbers and turned into samples at scrape time.

    ``prometheus_client.Counter.inc`` takes a lock per call; the hot paths here
    already hold one (the queue's, the controller metrics'), so a float add is enough.
    """

    def __init__(self, name: str, documentation: str, labelnames: list[str]) -> None:
        self.name = name.removesuffix("_total")
        self.documentation = documentation
        self.labelnames = labelnames
        self.series: dict[tuple[str, ...], _Count] = {}
        self._labels: dict[tuple[str, ...], str] = {}

    def child(self, *labels: str) -> _Count:
        c = self.series.get(labels)
        if c is None:
            c = self.series[labels] = _Count()
        return c

    def remove(self, *labels: str) -> None:
        self.series.pop(labels, None)
        self._labels.pop(labels, None)

    def text(self) -> str:
        """The exposition text of every series, as ``generate_latest`` writes it."""
        series = list(self.series.items())
        if not series:
            return ""
        # label texts held locally: a cluster removed meanwhile drops its cached text
        rows = [(self._label_text(k), c) for k, c in series]
        out = [_help(f"{self.name}_total", self.documentation, "counter")]
        out += [f"{self.name}_total{{{labels}}} {floatToGoString(c.value)}\n" for labels, c in rows]
        return "".join(out)

    def _label_text(self, values: tuple[str, ...]) -> str:
        return _kept_text(
            self._labels, self.series, values, lambda v: ",".join(_label_pairs(self.labelnames, v))
        )

    def collect(self) -> Iterator[CounterMetricFamily]:
        if _Direct.active():
            return
        fam = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, c in list(self.series.items()):
            fam.add_metric(labels, c.value)
        yield fam


def _kept_text(
    texts: dict[tuple[str, ...], _T],
    series: Mapping[tuple[str, ...], object],
    values: tuple[str, ...],
    make: Callable[[tuple[str, ...]], _T],
) -> _T:
    """The cached label text of the series ``values`` (made by ``make`` if missing), not kept
    once that series is gone: a scrape writes the series it listed, and a cluster that left
    meanwhile (`remove` drops its series, then its text) would leave its text for ever."""
    text = texts.get(values)
    if text is None:
        text = texts[values] = make(values)
        if values not in series:
            texts.pop(values, None)
    return text


class _HistogramVec(Collector):
    """A labelled histogram kept in per-series bucket arrays, cumulated at scrape time."""

    def __init__(
        self, name: str, documentation: str, labelnames: list[str], buckets: tuple[float, ...]
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self.bounds = [float(b) for b in buckets]
        self._les = [floatToGoString(b) for b in self.bounds] + ["+Inf"]
        self.series: dict[tuple[str, ...], _Hist] = {}
        self._labels: dict[tuple[str, ...], tuple[str, str, str]] = {}

    def child(self, *labels: str) -> _Hist:
        h = self.series.get(labels)
        if h is None:
            h = self.series[labels] = _Hist(len(self.bounds))
        return h

    def remove(self, *labels: str) -> None:
        self.series.pop(labels, None)
        self._labels.pop(labels, None)

    def text(self) -> str:
        """The exposition text of every series, as ``generate_latest`` writes it."""
        series = list(self.series.items())
        if not series:
            return ""
        name, les = self.name, self._les
        out = [_help(name, self.documentation, "histogram")]
        # label texts held locally: a cluster removed meanwhile drops its cached text
        rows = []
        for k, h in series:
            rows.append((_kept_text(self._labels, self.series, k, self._label_texts), h))
        for (labels, head, tail), h in rows:
            counts, total = list(h.counts), h.sum
            acc = 0
            for le, n in zip(les, counts, strict=True):
                acc += n
                out.append(f'{head}"{le}"{tail} {_count_text(acc)}\n')
            out.append(f"{name}_count{{{labels}}} {_count_text(acc)}\n")
            out.append(f"{name}_sum{{{labels}}} {floatToGoString(total)}\n")
        return "".join(out)

    def _label_texts(self, values: tuple[str, ...]) -> tuple[str, str, str]:
        """A series' label text, and the text around ``le`` of its bucket lines (``le``
        sorts among the labels, as generate_latest sorts them)."""
        pairs = _label_pairs(self.labelnames, values)
        at = sum(n < "le" for n in self.labelnames)
        before, after = ",".join(pairs[:at]), ",".join(pairs[at:])
        head = f"{self.name}_bucket{{{before}{',' if before else ''}le="
        tail = f"{',' if after else ''}{after}}}"
        return ",".join(pairs), head, tail

    def collect(self) -> Iterator[HistogramMetricFamily]:
        if _Direct.active():
            return
        fam = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, h in list(self.series.items()):
            counts, total = list(h.counts), h.sum
            cumulative, acc = [], 0
            for le, n in zip(self._les, counts, strict=True):
                acc += n
                cumulative.append((le, float(acc)))
            fam.add_metric(labels, cumulative, total)
        yield fam


class _WithoutCreated:
    """A registry's families without their ``_created`` samples, for ``generate_latest``.

    controller-runtime serves none; in the text format prometheus_client writes each as a
    gauge series of its own (``<name>_created``), a twin of every counter and histogram
    series, metrics the user registers on the manager's registry included.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            created = f"{family.name}_created"
            if any(s.name == created for s in family.samples):
                kept = Metric(family.name, family.documentation, family.type, family.unit)
                kept.samples = [s for s in family.samples if s.name != created]
                family = kept
            yield family


class _OwnFamilies:
    """`Metrics.collector`: a manager's families, without the process's and the interpreter's
    (the registry it is registered on has its own) and without ``_created`` samples."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        metrics._forget_webhook_clusters()
        for family in _WithoutCreated(metrics.registry).collect():
            if family.name not in metrics._process_families:
                yield family

    def describe(self) -> list[Metric]:
        # what it serves now: a registry refuses a second collector of the same names (a
        # manager's registered twice, or two managers' on one registry) with
        # "Duplicated timeseries", instead of serving both
        return list(self.collect())


def _observe(vec: _HistogramVec, h: _Hist, value: float) -> None:
    h.counts[bisect_left(vec.bounds, value)] += 1
    h.sum += value


class _QueueSeries:
    """The labelled children of one queue and cluster, looked up once (``labels()`` is costly).

    Every value is a plain number changed under the queue's own lock (the queue
    calls the recorder holding it) and read at scrape time, so a reconcile takes
    no metric lock at all.
    """

    __slots__ = (
        "adds",
        "queue_duration",
        "work_duration",
        "retries",
        "depth",
        "depth_now",
        "__weakref__",
    )

    def __init__(self, m: Metrics, name: str, cluster: str) -> None:
        self.adds = m.workqueue_adds.child(name, name, cluster)
        self.queue_duration = m.workqueue_queue_duration.child(name, name, cluster)
        self.work_duration = m.workqueue_work_duration.child(name, name, cluster)
        self.retries = m.workqueue_retries.child(name, name, cluster)
        self.depth_now = 0
        self.depth = m.workqueue_depth.labels(name, name, cluster)
        ref = weakref.ref(self)

        def depth() -> int:
            series = ref()
            return series.depth_now if series is not None else 0

        self.depth.set_function(depth)


class QueueMetricsRecorder:
    """Records one work queue's metrics (``workqueue_*``), labelled by queue name and cluster."""

    def __init__(self, metrics: Metrics, name: str) -> None:
        self._m = metrics
        self.name = name
        self._series: dict[str, _QueueSeries] = {}

    def _of(self, key: str) -> _QueueSeries:
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _QueueSeries(self._m, self.name, _cluster(key))
        return series

    def add(self, key: str) -> None:
        self._of(key).adds.value += 1

    def get(self, key: str, queued_seconds: float) -> None:
        _observe(self._m.workqueue_queue_duration, self._of(key).queue_duration, queued_seconds)

    def done(self, key: str, work_seconds: float) -> None:
        _observe(self._m.workqueue_work_duration, self._of(key).work_duration, work_seconds)

    def retry(self, key: str) -> None:
        self._of(key).retries.value += 1

    def depth(self, key: str, delta: int) -> None:
        self._of(key).depth_now += delta

    def forget_key(self, key: str) -> None:
        """Drop the series of a cluster that is gone, so a churning fleet does not grow metrics."""
        self._series.pop(key, None)
        cl = _cluster(key)
        for metric in (
            self._m.workqueue_adds,
            self._m.workqueue_queue_duration,
            self._m.workqueue_work_duration,
            self._m.workqueue_retries,
            self._m.workqueue_depth,
        ):
            _remove(metric, self.name, self.name, cl)


def _remove(metric: Any, *labels: str) -> None:
    with contextlib.suppress(KeyError):
        metric.remove(*labels)


class _UnfinishedWork(Collector):
    """``workqueue_unfinished_work_seconds`` / ``longest_running_processor_seconds`` at scrape time."""

    def __init__(self) -> None:
        self._queues: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def register(self, name: str, queue: Any) -> None:
        with self._lock:
            self._queues[name] = queue

    def collect(self) -> Iterable[GaugeMetricFamily]:
        unfinished = GaugeMetricFamily(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; large values mean stuck threads.",
            labels=_QUEUE_LABELS,
        )
        longest = GaugeMetricFamily(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest running processor of the queue has been running.",
            labels=_QUEUE_LABELS,
        )
        with self._lock:
            queues = list(self._queues.items())
        for name, q in queues:
            ages: dict[str, list[float]] = q.in_flight_ages()
            for key, values in ages.items():
                unfinished.add_metric([name, name, _cluster(key)], sum(values))
                longest.add_metric([name, name, _cluster(key)], max(values, default=0.0))
        yield unfinished
        yield longest


class _WaitingRequests(Collector):
    """``mcruntime_controller_waiting_requests`` at scrape time: per controller, the requests
    waiting for a cluster found not answering, by that cluster."""

    def __init__(self) -> None:
        self._sources: dict[str, weakref.WeakMethod[Callable[[], dict[str, int]]]] = {}
        self._lock = threading.Lock()

    def register(self, name: str, counts: Callable[[], dict[str, int]]) -> None:
        with self._lock:
            self._sources[name] = weakref.WeakMethod(counts)

    def collect(self) -> Iterable[GaugeMetricFamily]:
        waiting = GaugeMetricFamily(
            "mcruntime_controller_waiting_requests",
            "Requests that failed on a cluster found not answering, waiting (out of the "
            "queue) to be retried at its first answer",
            labels=["controller", "cluster"],
        )
        with self._lock:
            sources = list(self._sources.items())
        for name, ref in sources:
            counts = ref()
            if counts is None:
                continue
            for cluster, n in sorted(counts().items()):
                waiting.add_metric([name, _cluster(cluster)], float(n))
        yield waiting


#: the engagement states a cluster can be in (the gauge has one series per state, 1 for the current)
ENGAGEMENT_STATES = ("syncing", "engaged", "failed")


class _Clusters(Collector):
    """Per-cluster health, engagement state and client retries, read at scrape time.

    ``source()`` returns ``{cluster: (state, healthy)}`` (healthy: None when not
    checked); a cluster that left simply is not there any more, so its series
    disappear with it.
    """

    def __init__(self, clients: Callable[[], dict[str, _ClientCounts]]) -> None:
        self.source: Callable[[], dict[str, tuple[str, bool | None]]] = dict
        #: the requests and retries of the clients of the clusters engaged now
        self.clients = clients

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        healthy = GaugeMetricFamily(
            "mcruntime_cluster_healthy",
            "1 while the cluster answers, 0 while it does not (hung or unreachable)",
            labels=["cluster"],
        )
        state = GaugeMetricFamily(
            "mcruntime_cluster_engagement_state",
            "1 for the engagement state the cluster is in (syncing, engaged, failed)",
            labels=["cluster", "state"],
        )
        clusters = self.source()
        for name, (current, ok) in sorted(clusters.items()):
            cl = _cluster(name)
            if ok is not None:
                healthy.add_metric([cl], 1.0 if ok else 0.0)
            for st in ENGAGEMENT_STATES:
                state.add_metric([cl, st], 1.0 if st == current else 0.0)
        retries = CounterMetricFamily(
            "mcruntime_client_retries",
            "Calls the client retried (within their deadline), by reason",
            labels=["cluster", "reason"],
        )
        for cluster, (_host, _sent, retried) in sorted(self.clients().items()):
            for reason, n in sorted(retried.items()):
                retries.add_metric([_cluster(cluster), reason], n)
        yield healthy
        yield state
        yield retries


#: what a cluster's client counted: its server's ``host:port``, its requests by ``(method,
#: code)`` and its retries by reason
_ClientCounts = tuple[str, dict[tuple[str, str], int], dict[str, int]]


class _Requests(Collector):
    """``rest_client_requests_total`` at scrape time, client-go's (controller-runtime serves
    it) with the cluster: ``source()`` returns ``{cluster: (host, {(method, code): n},
    retries)}`` for the clusters engaged now, so a cluster that left takes its series with it."""

    name = "rest_client_requests"
    documentation = "Number of HTTP requests, partitioned by status code, method, and host."
    labelnames = ["cluster", "code", "host", "method"]

    def __init__(self) -> None:
        self.source: Callable[[], dict[str, _ClientCounts]] = dict
        self._labels: dict[tuple[str, str, str, str], str] = {}

    def _rows(self) -> list[tuple[tuple[str, str, str, str], int]]:
        return [
            ((cluster, code, host, method), n)
            for cluster, (host, counts, _retried) in sorted(self.source().items())
            for (method, code), n in sorted(counts.items())
        ]

    def text(self) -> str:
        """The exposition text of every series, as ``generate_latest`` writes it."""
        rows = self._rows()
        if not rows:
            self._labels = {}
            return ""
        known, labels = self._labels, {}
        for key, _ in rows:  # (label texts of clusters gone are not kept)
            text = known.get(key)
            if text is None:
                values = (_cluster(key[0]), *key[1:])
                text = ",".join(_label_pairs(self.labelnames, values))
            labels[key] = text
        self._labels = labels
        out = [_help(f"{self.name}_total", self.documentation, "counter")]
        out += [f"{self.name}_total{{{labels[k]}}} {floatToGoString(n)}\n" for k, n in rows]
        return "".join(out)

    def collect(self) -> Iterator[CounterMetricFamily]:
        if _Direct.active():
            return
        fam = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for (cluster, *rest), n in self._rows():
            fam.add_metric([_cluster(cluster), *rest], n)
        yield fam


class _Coordinator(Collector):
    """What a sharding coordinator holds, read at scrape time: ``source()`` returns
    (clusters run here, live peers); no samples while no coordinator registered one."""

    def __init__(self) -> None:
        self.source: Callable[[], tuple[int, int]] | None = None

    def collect(self) -> Iterable[GaugeMetricFamily]:
        owned = GaugeMetricFamily(
            "mcruntime_coordinator_owned_clusters",
            "Provider clusters this replica runs under a held fence (Sharded coordinator)",
        )
        peers = GaugeMetricFamily(
            "mcruntime_coordinator_live_peers",
            "Live replicas sharing the fleet as this replica last read them, itself included "
            "(Sharded coordinator)",
        )
        source = self.source
        if source is not None:
            n_owned, n_peers = source()
            owned.add_metric([], n_owned)
            peers.add_metric([], n_peers)
        yield owned
        yield peers


class Metrics:
    """The metrics of one manager: controllers, work queues and cluster engagements.

    Without a ``registry`` it makes its own, with the process's metrics (``process_*``:
    CPU, memory, open files, start time) and the interpreter's (``python_gc_*``,
    ``python_info``), as controller-runtime's registry has its process and Go runtime
    collectors. A registry given gets none of those (prometheus_client's ``REGISTRY``
    has them already).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        #: the families of the process's and the interpreter's collectors (`collector` leaves
        #: them out)
        self._process_families: frozenset[str] = frozenset()
        if registry is None:
            process = (
                ProcessCollector(registry=r),
                PlatformCollector(registry=r),
                GCCollector(registry=r),
            )
            self._process_families = frozenset(f.name for c in process for f in c.collect())
        self.reconcile_total = _CounterVec(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "cluster", "result"],
        )
        r.register(self.reconcile_total)
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller", "cluster"],
            registry=r,
        )
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller", "cluster"],
            registry=r,
        )
        self.reconcile_timeouts = Counter(
            "controller_runtime_reconcile_timeouts_total",
            "Total number of reconciliation timeouts per controller",
            ["controller", "cluster"],
            registry=r,
        )
        self.reconcile_time = _HistogramVec(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller", "cluster"],
            _RECONCILE_BUCKETS,
        )
        r.register(self.reconcile_time)
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=r,
        )
        self.active = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=r,
        )
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", _QUEUE_LABELS, registry=r
        )
        self.workqueue_adds = _CounterVec(
            "workqueue_adds_total", "Total number of adds handled by workqueue", _QUEUE_LABELS
        )
        r.register(self.workqueue_adds)
        self.workqueue_queue_duration = _HistogramVec(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            _QUEUE_LABELS,
            _QUEUE_BUCKETS,
        )
        r.register(self.workqueue_queue_duration)
        self.workqueue_work_duration = _HistogramVec(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            _QUEUE_LABELS,
            _QUEUE_BUCKETS,
        )
        r.register(self.workqueue_work_duration)
        self.workqueue_retries = _CounterVec(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue",
            _QUEUE_LABELS,
        )
        r.register(self.workqueue_retries)
        self._unfinished = _UnfinishedWork()
        r.register(self._unfinished)
        self._waiting = _WaitingRequests()
        r.register(self._waiting)
        self.engaged_clusters = Gauge(
            "mcruntime_engaged_clusters", "Number of provider clusters engaged now", registry=r
        )
        self.cluster_engagements = Counter(
            "mcruntime_cluster_engagements_total",
            "Cluster engagements and disengagements",
            ["event"],
            registry=r,
        )
        self.webhook_requests = _CounterVec(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            ["webhook", "cluster", "code"],
        )
        r.register(self.webhook_requests)
        self.webhook_latency = _HistogramVec(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            ["webhook", "cluster"],
            _QUEUE_BUCKETS,
        )
        r.register(self.webhook_latency)
        self.webhook_in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ["webhook"],
            registry=r,
        )
        # the webhook series by the raw name of their cluster; guarded by _webhook_lock
        self._webhook_lock = threading.Lock()
        self._webhook_series: dict[str, set[tuple[str, str]]] = {}
        self._webhook_known: Callable[[str], bool] = lambda cluster: True
        self.leader_election_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. "
            "Please make sure to group by name.",
            ["name"],
            registry=r,
        )
        self._requests = _Requests()
        self._clusters = _Clusters(lambda: self._requests.source())
        r.register(self._clusters)
        self._coordinator = _Coordinator()
        r.register(self._coordinator)
        r.register(self._requests)
        self.events_dropped = Counter(
            "mcruntime_events_dropped_total",
            "Kubernetes Events an event recorder dropped, per cluster and reason "
            "(queue_full, rate_limited, cluster_not_engaged, namespace_terminating, error)",
            ["cluster", "reason"],
            registry=r,
        )
        #: the collectors `exposition` writes itself
        self._direct: tuple[_CounterVec | _HistogramVec | _Requests, ...] = (
            self.reconcile_total,
            self.reconcile_time,
            self.workqueue_adds,
            self.workqueue_queue_duration,
            self.workqueue_work_duration,
            self.workqueue_retries,
            self.webhook_requests,
            self.webhook_latency,
            self._requests,
        )
        self._queue_recorders: dict[str, QueueMetricsRecorder] = {}
        # series by the raw cluster name, so the hot path skips _cluster(); guarded by _lock
        self._lock = threading.Lock()
        self._reconcile_children: dict[tuple[str, str, str], _Count] = {}
        self._time_children: dict[tuple[str, str], _Hist] = {}

    # -- used by controllers -------------------------------------------------------

    def queue_metrics(self, name: str) -> QueueMetricsRecorder:
        rec = self._queue_recorders.get(name)
        if rec is None:
            rec = self._queue_recorders[name] = QueueMetricsRecorder(self, name)
        return rec

    def register_queue(self, name: str, queue: Any) -> None:
        """Let scrapes read the queue's in-flight ages (unfinished work, longest processor).

        ``controller_runtime_active_workers`` is read from the queue at scrape
        time too (items its workers hold), so reconciles pay nothing for it.
        """
        self._unfinished.register(name, queue)
        ref = weakref.ref(queue)

        def active() -> int:
            q = ref()
            return q.in_flight if q is not None else 0

        self.active.labels(name).set_function(active)

    def register_waiting(self, name: str, counts: Callable[[], dict[str, int]]) -> None:
        """Let scrapes read how many requests of controller ``name`` wait for each cluster
        (``counts``, a bound method: not kept alive by this)."""
        self._waiting.register(name, counts)

    def controller_started(self, name: str, max_concurrent: int) -> None:
        self.max_concurrent.labels(name).set(max_concurrent)

    def active_workers(self, name: str, n: int) -> None:
        """Set the active-workers gauge of a controller without a registered queue."""
        self.active.labels(name).set(n)

    #: results of ``controller_runtime_reconcile_total``
    RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")

    def cluster_engaged(self, controller: str, cluster: str) -> None:
        """Start the reconcile counters of ``controller`` on a newly engaged cluster at 0, as
        controller-runtime's ``initMetrics`` does per controller: ``increase()`` and
        ``rate()`` then see a cluster's first error, which a series born at 1 would hide."""
        cl = _cluster(cluster)
        with self._lock:
            for result in self.RECONCILE_RESULTS:
                key = (controller, cluster, result)
                if key not in self._reconcile_children:
                    self._reconcile_children[key] = self.reconcile_total.child(
                        controller, cl, result
                    )
        self.reconcile_errors.labels(controller, cl)
        self.terminal_errors.labels(controller, cl)
        self.reconcile_timeouts.labels(controller, cl)

    def reconciled(self, controller: str, cluster: str, result: str, seconds: float) -> None:
        with self._lock:
            key = (controller, cluster, result)
            total = self._reconcile_children.get(key)
            if total is None:
                total = self._reconcile_children[key] = self.reconcile_total.child(
                    controller, _cluster(cluster), result
                )
            total.value += 1
            tkey = (controller, cluster)
            hist = self._time_children.get(tkey)
            if hist is None:
                hist = self._time_children[tkey] = self.reconcile_time.child(
                    controller, _cluster(cluster)
                )
            _observe(self.reconcile_time, hist, seconds)

    def reconcile_error(self, controller: str, cluster: str) -> None:
        self.reconcile_errors.labels(controller, _cluster(cluster)).inc()

    def terminal_error(self, controller: str, cluster: str) -> None:
        self.terminal_errors.labels(controller, _cluster(cluster)).inc()

    def reconcile_timed_out(self, controller: str, cluster: str) -> None:
        """A reconcile of ``controller`` reached its ``reconcile_timeout``."""
        self.reconcile_timeouts.labels(controller, _cluster(cluster)).inc()

    def forget_cluster(self, controller: str, cluster: str) -> None:
        """Remove every series of ``controller`` for a disengaged cluster (memory stays flat under churn)."""
        cl = _cluster(cluster)
        with self._lock:
            self._time_children.pop((controller, cluster), None)
            for result in self.RECONCILE_RESULTS:
                self._reconcile_children.pop((controller, cluster, result), None)
                self.reconcile_total.remove(controller, cl, result)
            self.reconcile_time.remove(controller, cl)
        for metric in (self.reconcile_errors, self.terminal_errors, self.reconcile_timeouts):
            _remove(metric, controller, cl)
        self.queue_metrics(controller).forget_key(cluster)

    # -- used by event recorders -----------------------------------------------------

    #: reasons of ``mcruntime_events_dropped_total``
    EVENT_DROP_REASONS = (
        "queue_full",
        "rate_limited",
        "cluster_not_engaged",
        "namespace_terminating",
        "error",
    )

    def event_dropped(self, cluster: str, reason: str, n: int = 1) -> None:
        """Count ``n`` Events dropped for ``reason``. One dropped because its cluster is not
        engaged (gone already, or never engaged: a name from a spec) is counted with an
        empty ``cluster`` label: a series per such name would outlive its cluster and grow
        the endpoint with every name."""
        label = "" if reason == "cluster_not_engaged" else _cluster(cluster)
        self.events_dropped.labels(label, reason).inc(n)

    def forget_events_cluster(self, cluster: str) -> None:
        """Remove the event-recorder series of a disengaged cluster."""
        for reason in self.EVENT_DROP_REASONS:
            _remove(self.events_dropped, _cluster(cluster), reason)

    # -- used by the webhook server --------------------------------------------------

    def webhook_started(self, webhook: str) -> None:
        """A request to the hook at path ``webhook`` is being served."""
        self.webhook_in_flight.labels(webhook).inc()

    def webhook_served(
        self, webhook: str, cluster: str | None, code: int | None, seconds: float
    ) -> None:
        """The request `webhook_started` counted is over: answered with HTTP ``code`` (None:
        the client left unanswered) after ``seconds``, for ``cluster`` (None: a cluster the
        manager does not serve, counted with an empty ``cluster`` label, so names in URLs
        do not grow the endpoint)."""
        try:
            if code is None:
                return
            label = "" if cluster is None else _cluster(cluster)
            with self._webhook_lock:
                self.webhook_requests.child(webhook, label, str(code)).value += 1
                _observe(self.webhook_latency, self.webhook_latency.child(webhook, label), seconds)
                if cluster is not None:
                    self._webhook_series.setdefault(cluster, set()).add((webhook, str(code)))
        finally:  # in flight until counted: a scrape never sees it in neither
            self.webhook_in_flight.labels(webhook).dec()

    def register_webhook_clusters(self, known: Callable[[str], bool]) -> None:
        """Keep the webhook series of a cluster while ``known(cluster)`` (the manager's: it
        serves the cluster's webhooks); those of other clusters go at the next scrape."""
        self._webhook_known = known

    def _forget_webhook_clusters(self) -> None:
        """Drop the webhook series of clusters no longer served (gone from the fleet; with a
        sharding coordinator, gone from every replica)."""
        with self._webhook_lock:
            clusters = list(self._webhook_series)
        gone = [c for c in clusters if not self._webhook_known(c)]
        if not gone:
            return
        with self._webhook_lock:
            for cluster in gone:
                label = _cluster(cluster)
                for webhook, code in self._webhook_series.pop(cluster, ()):
                    self.webhook_requests.remove(webhook, label, code)
                    self.webhook_latency.remove(webhook, label)

    # -- used by the manager ---------------------------------------------------------

    def cluster_engagement(self, event: str) -> None:
        self.cluster_engagements.labels(event).inc()

    def set_engaged(self, n: int) -> None:
        self.engaged_clusters.set(n)

    def leading(self, lease: str, leading: bool) -> None:
        """Say whether this replica holds the leader election Lease ``lease`` (1) or stands
        by (0), as client-go's leader metric does."""
        self.leader_election_status.labels(lease).set(1.0 if leading else 0.0)

    def register_clusters(self, source: Callable[[], dict[str, tuple[str, bool | None]]]) -> None:
        """Read per-cluster state and health from ``source`` at scrape time (the manager's)."""
        self._clusters.source = source

    def register_requests(self, source: Callable[[], dict[str, _ClientCounts]]) -> None:
        """Serve ``rest_client_requests_total`` and ``mcruntime_client_retries_total`` from
        ``source()`` at scrape time (the manager's): ``{cluster: (host, {(method, code):
        requests}, {reason: retries})}`` for each cluster engaged now, ``host`` its API
        server's ``host:port``, as its client counted them."""
        self._requests.source = source

    def register_coordinator(self, source: Callable[[], tuple[int, int]]) -> None:
        """Serve ``mcruntime_coordinator_owned_clusters`` and ``mcruntime_coordinator_live_peers``
        from ``source()`` (clusters run here, live peers) at scrape time (a sharding coordinator's)."""
        self._coordinator.source = source

    def exposition(self) -> bytes:
        """The text exposition format of every metric (what /metrics serves).

        The per-cluster counters and histograms (thousands of series in a large fleet)
        write their own text, several times faster than ``generate_latest`` formats
        samples; the rest of the registry goes through it. No ``<name>_created`` series
        are served, as controller-runtime serves none.
        """
        self._forget_webhook_clusters()
        text = "".join(c.text() for c in self._direct)
        _Direct.local.on = True
        try:
            rest = generate_latest(_WithoutCreated(self.registry))
        finally:
            _Direct.local.on = False
        return text.encode("utf-8") + rest

    def collector(self) -> Collector:
        """These metrics as one collector, to serve them on an application's own endpoint:
        ``prometheus_client.REGISTRY.register(mgr.metrics.collector())`` (a manager embedded
        in a web application that serves ``REGISTRY`` at its ``/metrics``).

        The registry it joins has the process's and the interpreter's metrics already
        (``process_*``, ``python_*``): the collector leaves this registry's out, which would
        be duplicates there; metrics registered on ``registry`` come along. Unregister it
        when the manager is done (``REGISTRY.unregister(c)``): a registry refuses a second
        collector of the same names (a notebook cell that makes the manager again) with
        ``Duplicated timeseries``.
        """
        return _OwnFamilies(self)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float | None:
        """One sample's value (handy in tests and benchmarks)."""
        return self.registry.get_sample_value(name, labels or {})
