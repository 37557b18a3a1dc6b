"""The histogram buckets are controller-runtime's, so its dashboards' quantiles and alerts read
the same numbers here."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mcruntime.metrics import Metrics


def bucket_bounds(m: Metrics, family: str) -> list[str]:
    for fam in text_string_to_metric_families(m.exposition().decode()):
        if fam.name == family:
            return [s.labels["le"] for s in fam.samples if s.name.endswith("_bucket")]
    raise AssertionError(f"{family} not served")


def test_a_queue_wait_of_minutes_lands_below_the_1000_second_bucket() -> None:
    # controller-runtime: prometheus.ExponentialBuckets(10e-9, 10, 12), 1e-8 .. 1000 s; with
    # 10 s the highest bound, histogram_quantile never read more than 10 s and an alert on
    # a p99 queue wait of a minute never fired
    m = Metrics()
    q = m.queue_metrics("cms")
    for _ in range(10):
        q.get("eu-1", 120.0)
        q.done("eu-1", 300.0)
    for family in ("workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"):
        assert bucket_bounds(m, family) == [
            *(f"1e-0{e}" for e in range(8, 4, -1)),
            "0.0001",
            "0.001",
            "0.01",
            "0.1",
            "1.0",
            "10.0",
            "100.0",
            "1000.0",
            "+Inf",
        ]
    text = m.exposition().decode()
    assert (
        'workqueue_queue_duration_seconds_bucket{cluster="eu-1",controller="cms",le="1000.0",name="cms"} 10.0'
        in text
    )
    assert (
        'workqueue_queue_duration_seconds_bucket{cluster="eu-1",controller="cms",le="100.0",name="cms"} 0.0'
        in text
    )
