"""Metrics callbacks fire with the item's cluster as key, with the right durations."""

from __future__ import annotations

import pytest

from mcruntime.metrics import Metrics
from mcruntime.workqueue import NoopQueueMetrics, Queue, QueueMetrics
from tests.unit.workqueue._requests import Req

pytestmark = pytest.mark.timeout(30)


class Recorder:
    """Records every callback as a tuple."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def add(self, key: str) -> None:
        self.calls.append(("add", key))

    def get(self, key: str, queued_seconds: float) -> None:
        self.calls.append(("get", key, queued_seconds))

    def done(self, key: str, work_seconds: float) -> None:
        self.calls.append(("done", key, work_seconds))

    def retry(self, key: str) -> None:
        self.calls.append(("retry", key))

    def depth(self, key: str, delta: int) -> None:
        self.calls.append(("depth", key, delta))

    def take(self) -> list[tuple[object, ...]]:
        calls, self.calls = self.calls, []
        return calls


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def q(rec: Recorder, clock) -> Queue:
    return Queue("test", fair_key=lambda r: r.cluster_name, metrics=rec, clock=clock)


def test_add_get_done_report_key_and_durations(q: Queue, rec: Recorder, clock) -> None:
    item = Req("eu-1", "web")
    q.add(item)
    q.add(item)  # merged: not counted
    assert rec.take() == [("add", "eu-1"), ("depth", "eu-1", 1)]
    clock.advance(3)
    assert q.get(timeout=0) == item
    assert rec.take() == [("get", "eu-1", 3.0), ("depth", "eu-1", -1)]
    clock.advance(2)
    q.done(item)
    assert rec.take() == [("done", "eu-1", 2.0)]


def test_delayed_adds_count_as_retries(q: Queue, rec: Recorder, clock) -> None:
    item = Req("us-1", "db")
    q.add_after(item, 5)
    assert rec.take() == [("retry", "us-1")]
    clock.advance(5)
    assert q.get(timeout=0) == item
    assert rec.take() == [
        ("add", "us-1"),
        ("depth", "us-1", 1),
        ("get", "us-1", 0.0),
        ("depth", "us-1", -1),
    ]
    q.done(item)
    rec.take()
    q.add_rate_limited(item)
    assert rec.take()[0] == ("retry", "us-1")


def test_add_while_held_counts_once_and_queued_time_starts_at_that_add(
    q: Queue, rec: Recorder, clock
) -> None:
    item = Req("a", "x")
    q.add(item)
    q.get(timeout=0)
    rec.take()
    clock.advance(1)
    q.add(item)
    q.add(item)
    assert rec.take() == [("add", "a"), ("depth", "a", 1)]
    clock.advance(4)
    q.done(item)
    assert q.get(timeout=0) == item
    assert rec.take() == [("done", "a", 5.0), ("get", "a", 4.0), ("depth", "a", -1)]


def test_drop_and_shutdown_reduce_depth(q: Queue, rec: Recorder) -> None:
    for name in ("1", "2"):
        q.add(Req("gone", name))
    q.add(Req("stays", "1"))
    rec.take()
    assert q.drop(lambda r: r.cluster_name == "gone") == 2
    assert rec.take() == [("depth", "gone", -2)]
    q.shut_down()
    assert rec.take() == [("depth", "stays", -1)]


def test_in_flight_ages_are_reported_per_key(q: Queue, clock) -> None:
    assert q.in_flight_ages() == {}
    q.add(Req("a", "1"))
    q.add(Req("a", "2"))
    q.add(Req("b", "1"))
    assert q.get(timeout=0) == Req("a", "1")
    clock.advance(1)
    assert q.get(timeout=0) == Req("b", "1")
    clock.advance(2)
    assert q.get(timeout=0) == Req("a", "2")
    ages = q.in_flight_ages()
    assert sorted(ages["a"]) == [0.0, 3.0]
    assert ages["b"] == [2.0]
    q.done(Req("a", "1"))
    assert q.in_flight_ages() == {"a": [0.0], "b": [2.0]}


def test_without_fair_key_the_key_is_the_local_cluster(rec: Recorder) -> None:
    q = Queue(metrics=rec)
    q.add("x")
    assert rec.take() == [("add", ""), ("depth", "", 1)]


def test_implementations_satisfy_the_protocol(rec: Recorder) -> None:
    assert isinstance(NoopQueueMetrics(), QueueMetrics)
    assert isinstance(rec, QueueMetrics)
    assert isinstance(Metrics().queue_metrics("q"), QueueMetrics)
    q = Queue(metrics=NoopQueueMetrics())
    q.add("x")
    assert q.get(timeout=0) == "x"
