"""The scrape text the manager writes itself is prometheus_client's, sample for sample.

The per-cluster counters and histograms bypass ``generate_latest`` (it formats each
sample through generic code: ~7 us per sample, half a second at 1,000 clusters); what
they write must be what it would have written.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mcruntime.metrics import Metrics


def filled() -> Metrics:
    # a registry of its own: no process metrics, whose values change between two scrapes
    m = Metrics(CollectorRegistry(auto_describe=True))
    q = m.queue_metrics("ctl")
    # label values that need escaping, a big count (exponent form), a local cluster
    for cluster in ("c-1", 'odd"name\\with\nlines', ""):
        m.reconciled("ctl", cluster, "success", 0.004)
        m.reconciled("ctl", cluster, "error", 2.5)
        q.add(cluster)
        q.get(cluster, 0.0002)
        q.done(cluster, 0.07)
        q.retry(cluster)
        m.webhook_started("/validate")
        m.webhook_served("/validate", cluster, 200, 0.003)
    m.register_requests(
        lambda: {
            "c-1": ("10.0.0.1:6443", {("GET", "200"): 12, ("PUT", "<error>"): 1}, {"throttled": 3}),
            "": ("[::1]:6443", {("GET", "404"): 2_000_000}, {}),
        }
    )
    big = m.reconcile_time.child("ctl", "big")
    big.counts[0] = 2_000_000
    big.sum = 12345678.9
    return m


def without_created(text: str) -> list[str]:
    """The lines of ``text`` but those of ``_created`` families (a HELP, a TYPE, a sample)."""
    return [
        line
        for line in text.splitlines()
        if not (line.split(" ", 3)[2] if line.startswith("#") else line.split("{")[0]).endswith(
            "_created"
        )
    ]


def test_the_direct_text_is_generate_latests_sample_for_sample() -> None:
    m = filled()
    own = m.exposition().decode()
    reference = generate_latest(m.registry).decode()  # every collector through prometheus_client
    assert sorted(own.splitlines()) == sorted(without_created(reference))
    assert own != reference  # (the per-cluster families come first, so the order differs)
    names = {f.name for f in text_string_to_metric_families(own)}
    assert {"controller_runtime_reconcile", "workqueue_queue_duration_seconds"} <= names


def test_metrics_registered_by_the_user_are_served_too() -> None:
    m = filled()
    Counter("myctl_copies_total", "Objects copied", ["cluster"], registry=m.registry).labels(
        "c-1"
    ).inc()
    assert 'myctl_copies_total{cluster="c-1"} 1.0' in m.exposition().decode()


def test_a_removed_cluster_leaves_the_text() -> None:
    m = filled()
    m.forget_cluster("ctl", "c-1")
    assert 'cluster="c-1"' not in "".join(
        line for line in m.exposition().decode().splitlines() if "reconcile" in line
    )


def test_no_created_series_are_served() -> None:
    # controller-runtime serves none; in the text format each counter and histogram series
    # had a `<name>_created` gauge twin (12 of a cluster's 93 series per controller), the
    # user's own counters' too
    m = filled()
    m.reconcile_error("ctl", "c-1")
    m.cluster_engagement("engage")
    m.event_dropped("c-1", "queue_full")
    Counter("myctl_copies_total", "Objects copied", ["cluster"], registry=m.registry).labels(
        "c-1"
    ).inc()
    text = m.exposition().decode()
    assert "_created" not in text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {
        "controller_runtime_reconcile",
        "controller_runtime_reconcile_errors",
        "controller_runtime_reconcile_time_seconds",
        "mcruntime_cluster_engagements",
        "mcruntime_events_dropped",
        "myctl_copies",
    } <= names


def test_client_retries_are_the_managers_clusters_clients_own() -> None:
    # read from the clients of the clusters the manager engages (its source), not from a
    # process-wide count by cluster name another manager's client of that name adds to
    m = Metrics(CollectorRegistry(auto_describe=True))
    m.register_requests(lambda: {"eu-1": ("10.0.0.1:6443", {}, {"throttled": 3})})
    assert (
        m.sample("mcruntime_client_retries_total", {"cluster": "eu-1", "reason": "throttled"}) == 3
    )
    assert (
        "mcruntime_client_retries_total{"
        not in Metrics(CollectorRegistry(auto_describe=True)).exposition().decode()
    )


class _LeavesDuringTheScrape(dict[tuple[str, ...], object]):
    """A vector's series, whose cluster ``c-1`` leaves right after a scrape listed them."""

    def __init__(self, m: Metrics, series: dict[tuple[str, ...], object]) -> None:
        super().__init__(series)
        self.m = m

    def items(self) -> Any:
        listed = list(super().items())
        self.m.forget_cluster("ctl", "c-1")
        return listed


def test_a_cluster_that_leaves_during_a_scrape_leaves_no_label_text() -> None:
    # clusters come and go daily, each name once: the scrape writes what it listed, and
    # keeps nothing of the cluster that left meanwhile
    m = filled()
    for vec in (m.reconcile_total, m.reconcile_time):
        m.reconciled("ctl", "c-1", "success", 0.004)  # (back) and leaves during the scrape
        vec.series = _LeavesDuringTheScrape(m, vec.series)
        assert 'cluster="c-1"' in vec.text()  # what it listed
        assert not [k for k in vec._labels if "c-1" in k], vec.name  # noqa: SLF001
