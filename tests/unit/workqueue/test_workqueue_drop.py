"""drop(): what a disengaged cluster leaves behind in the queue."""

from __future__ import annotations

import threading

import pytest

from mcruntime.workqueue import ItemExponentialFailureRateLimiter, Queue
from tests.unit.workqueue._requests import Req

pytestmark = pytest.mark.timeout(30)


def in_cluster(name: str):
    return lambda r: r.cluster_name == name


def test_drop_removes_ready_delayed_and_rerun_items_of_the_cluster(clock) -> None:
    limiter = ItemExponentialFailureRateLimiter()
    q = Queue(rate_limiter=limiter, fair_key=lambda r: r.cluster_name, clock=clock)
    held = Req("gone", "held")
    q.add(held)
    assert q.get(timeout=0) == held
    q.add(held)  # dirty while held
    q.add(Req("gone", "ready"))
    q.add_rate_limited(Req("gone", "delayed"))
    q.add(Req("stays", "ready"))
    q.add_after(Req("stays", "delayed"), 1)
    assert len(q) == 5

    assert q.drop(in_cluster("gone")) == 3
    assert len(q) == 2
    assert limiter.num_requeues(Req("gone", "delayed")) == 0

    q.done(held)  # not re-queued
    clock.advance(10)
    got = {q.get(timeout=0), q.get(timeout=0)}
    assert got == {Req("stays", "ready"), Req("stays", "delayed")}
    with pytest.raises(TimeoutError):
        q.get(timeout=0)


def test_drop_forgets_the_retry_history_of_held_items() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    q = Queue(rate_limiter=limiter)
    item = Req("gone", "a")
    limiter.when(item)
    q.add(item)
    assert q.get(timeout=0) == item
    assert q.drop(in_cluster("gone")) == 0  # held only: nothing queued was removed
    assert q.num_requeues(item) == 0
    q.done(item)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)


def test_drop_counts_an_item_both_ready_and_delayed_once(clock) -> None:
    q = Queue(clock=clock)
    item = Req("gone", "a")
    q.add(item)
    q.add_after(item, 5)
    assert q.drop(in_cluster("gone")) == 1
    assert len(q) == 0
    clock.advance(10)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)


def test_items_of_a_dropped_cluster_can_be_added_again() -> None:
    q = Queue(fair_key=lambda r: r.cluster_name)
    item = Req("c", "a")
    q.add(item)
    q.drop(in_cluster("c"))
    q.add(item)
    assert q.get(timeout=0) == item


def test_drop_keeps_round_robin_among_the_remaining_clusters() -> None:
    q = Queue(fair_key=lambda r: r.cluster_name)
    for i in range(3):
        for cluster in ("a", "gone", "b"):
            q.add(Req(cluster, str(i)))
    assert q.drop(in_cluster("gone")) == 3
    order = [q.get(timeout=0).cluster_name for _ in range(6)]
    assert order == ["a", "b", "a", "b", "a", "b"]


def test_drop_leaves_no_state_behind_for_a_gone_cluster() -> None:
    q = Queue(fair_key=lambda r: r.cluster_name)
    for i in range(100):
        item = Req(f"c{i}", "a")
        q.add(item)
        assert q.get(timeout=0) == item
        q.done(item)
        q.drop(in_cluster(f"c{i}"))
    assert [lv.ready for lv in q._order] == [{}]  # noqa: SLF001 - a churning fleet must not grow the queue
    assert q._entries == {}  # noqa: SLF001


def test_wait_key_done_returns_once_the_held_items_of_the_cluster_are_done() -> None:
    """What a cluster's leave waits for: its items workers held when it left."""
    q = Queue(fair_key=lambda r: r.cluster_name)
    first, second, other = Req("gone", "a"), Req("gone", "b"), Req("stays", "c")
    for item in (first, second, other):
        q.add(item)
    held = [q.get(timeout=0) for _ in range(3)]
    assert set(held) == {first, second, other}
    assert not q.wait_key_done("gone", timeout=0)  # two held
    assert q.wait_key_done("gone", timeout=0, keep=2)  # (a worker's own kept)

    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(q.wait_key_done("gone", 10)))
    waiter.start()
    q.done(first)
    assert not q.wait_key_done("gone", timeout=0)  # one still held
    q.done(second)
    waiter.join(10)
    assert waited == [True]  # the other cluster's item still held does not count
    assert q.wait_key_done("never-seen", timeout=0)
