"""Priorities: a ready item of a higher priority is handed out first, fairly across keys
within a priority; adds merge to the highest priority (controller-runtime's priority queue)."""

from __future__ import annotations

import pytest

from mcruntime.workqueue import LOW_PRIORITY, NOTHING, Queue
from tests.unit.workqueue._requests import Req, by_cluster

pytestmark = pytest.mark.timeout(30)


def drain(q: Queue) -> list[Req]:
    got = []
    while True:
        try:
            item = q.get(timeout=0)
        except TimeoutError:
            return got
        got.append(item)
        q.done(item)


def test_a_change_goes_before_a_whole_initial_list_of_its_own_cluster() -> None:
    q = Queue(fair_key=by_cluster)
    for i in range(1000):
        q.add(Req("a", f"listed-{i}"), priority=LOW_PRIORITY)
    q.add(Req("a", "changed"))
    assert q.get(timeout=0) == Req("a", "changed")
    assert q.get(timeout=0) == Req("a", "listed-0")  # the low ones keep their order


def test_keys_take_turns_within_a_priority_and_higher_priorities_go_first() -> None:
    q = Queue(fair_key=by_cluster)
    for cluster in ("a", "b"):
        for i in range(2):
            q.add(Req(cluster, f"low-{i}"), priority=LOW_PRIORITY)
    for cluster in ("b", "a"):
        for i in range(2):
            q.add(Req(cluster, f"high-{i}"), priority=10)
    q.add(Req("a", "normal"))
    got = [(r.cluster_name, r.name) for r in drain(q)]
    assert got == [
        ("b", "high-0"),
        ("a", "high-0"),
        ("b", "high-1"),
        ("a", "high-1"),
        ("a", "normal"),
        ("a", "low-0"),
        ("b", "low-0"),
        ("a", "low-1"),
        ("b", "low-1"),
    ]


def test_an_item_added_again_takes_the_higher_priority_and_the_back_of_its_fifo() -> None:
    q = Queue(fair_key=by_cluster)
    q.add(Req("a", "x"), priority=LOW_PRIORITY)
    q.add(Req("a", "y"), priority=LOW_PRIORITY)
    q.add(Req("a", "z"))
    q.add(Req("a", "y"))  # raised: behind z, which was at priority 0 first
    q.add(Req("a", "z"), priority=LOW_PRIORITY)  # never lowered
    assert len(q) == 3
    assert drain(q) == [Req("a", "z"), Req("a", "y"), Req("a", "x")]


def test_a_raised_item_leaves_its_old_priority_and_its_key_turn_there() -> None:
    q = Queue(fair_key=by_cluster)
    q.add(Req("a", "only"), priority=LOW_PRIORITY)
    q.add(Req("b", "low"), priority=LOW_PRIORITY)
    q.add(Req("a", "only"))
    assert drain(q) == [Req("a", "only"), Req("b", "low")]
    assert len(q) == 0


def test_an_item_added_while_held_is_queued_again_at_the_priority_of_that_add() -> None:
    q = Queue(fair_key=by_cluster)
    held = Req("a", "held")
    q.add(held, priority=LOW_PRIORITY)
    assert q.get(timeout=0) == held
    assert q.held_priority(held) == LOW_PRIORITY
    q.add(Req("a", "other"))
    q.add(held)  # a change while it runs: priority 0, not the low one it was taken with
    q.done(held)
    assert q.get(timeout=0) == Req("a", "other")
    assert q.get(timeout=0) == held
    assert q.held_priority(held) == 0
    q.done(held)
    assert q.held_priority(held) == 0  # no worker holds it


def test_delayed_items_keep_the_highest_priority_they_were_added_with(clock) -> None:
    q = Queue(fair_key=by_cluster, clock=clock)
    q.add_after(Req("a", "later"), 5, priority=LOW_PRIORITY)
    q.add_after(Req("a", "later"), 10, priority=5)  # later deadline: the earlier one stays
    q.add_rate_limited(Req("a", "retry"), priority=LOW_PRIORITY)
    q.add(Req("a", "now"))
    clock.advance(5)
    assert drain(q) == [Req("a", "later"), Req("a", "now"), Req("a", "retry")]


def test_a_per_key_limit_holds_across_priorities() -> None:
    q = Queue(fair_key=by_cluster)
    q.limit_per_key = 1
    q.add(Req("a", "1"))
    q.add(Req("a", "2"), priority=LOW_PRIORITY)
    q.add(Req("b", "1"), priority=LOW_PRIORITY)
    first = q.get(timeout=0)
    assert first == Req("a", "1")
    # a is at its limit: its low item waits, b's is handed out
    assert q.done_and_take(Req("zz", "not held")) == Req("b", "1")
    assert q.done_and_take(Req("b", "1")) is NOTHING
    assert q.done_and_take(first) == Req("a", "2")


def test_without_priorities_every_add_is_first_in_first_out() -> None:
    q = Queue(fair_key=by_cluster, priorities=False)
    q.add(Req("a", "low"), priority=LOW_PRIORITY)
    q.add(Req("a", "high"), priority=100)
    assert drain(q) == [Req("a", "low"), Req("a", "high")]


def test_dropping_a_cluster_forgets_its_priorities() -> None:
    q = Queue(fair_key=by_cluster)
    q.add(Req("gone", "x"), priority=LOW_PRIORITY)
    q.add(Req("gone", "y"), priority=7)
    q.add(Req("kept", "z"), priority=LOW_PRIORITY)
    assert q.drop(lambda r: r.cluster_name == "gone") == 2
    assert drain(q) == [Req("kept", "z")]
    q.drop(lambda r: False)
    # the levels other than 0 are gone with their last items: priorities do not pile up
    assert [lv.priority for lv in q._order] == [0]  # noqa: SLF001


def test_adds_left_in_the_inbox_keep_their_priority(threads, wait_until) -> None:
    q = Queue(fair_key=by_cluster)
    with q._lock:  # noqa: SLF001 - a busy lock: the adds are left in the inbox
        threads.start(lambda: q.add(Req("a", "low"), priority=LOW_PRIORITY))
        wait_until(lambda: len(q._inbox) == 1)  # noqa: SLF001
        threads.start(lambda: q.add(Req("a", "normal")))
        wait_until(lambda: len(q._inbox) == 2)  # noqa: SLF001
    assert drain(q) == [Req("a", "normal"), Req("a", "low")]
