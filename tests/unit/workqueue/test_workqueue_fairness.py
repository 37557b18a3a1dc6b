"""Fairness across clusters: one FIFO per fair key, served round-robin."""

from __future__ import annotations

import pytest

from mcruntime.workqueue import Queue
from tests.unit.workqueue._requests import Req, by_cluster

pytestmark = pytest.mark.timeout(30)


def test_a_quiet_cluster_is_served_within_two_gets_behind_a_noisy_one() -> None:
    q = Queue(fair_key=by_cluster)
    for i in range(10_000):
        q.add(Req("noisy", str(i)))
    q.add(Req("quiet", "only"))
    first_two = [q.get(timeout=0), q.get(timeout=0)]
    assert Req("quiet", "only") in first_two


def test_keys_are_served_round_robin_and_fifo_within_a_key() -> None:
    q = Queue(fair_key=by_cluster)
    for cluster in ("a", "b", "c"):
        for i in range(3):
            q.add(Req(cluster, str(i)))
    got = [q.get(timeout=0) for _ in range(9)]
    assert [r.cluster_name for r in got] == ["a", "b", "c"] * 3
    assert [r.name for r in got if r.cluster_name == "b"] == ["0", "1", "2"]


def test_a_key_that_ran_dry_rejoins_at_the_end_of_the_rotation() -> None:
    q = Queue(fair_key=by_cluster)
    q.add(Req("a", "1"))
    q.add(Req("b", "1"))
    q.add(Req("b", "2"))
    assert q.get(timeout=0) == Req("a", "1")
    q.add(Req("a", "2"))
    assert [q.get(timeout=0) for _ in range(3)] == [Req("b", "1"), Req("a", "2"), Req("b", "2")]


def test_a_rerun_after_done_goes_to_its_own_key(clock) -> None:
    q = Queue(fair_key=by_cluster)
    held = Req("a", "held")
    q.add(held)
    assert q.get(timeout=0) == held
    q.add(held)
    for i in range(5):
        q.add(Req("b", str(i)))
    q.done(held)
    assert held in [q.get(timeout=0), q.get(timeout=0)]


def test_a_key_at_its_limit_is_skipped_while_other_keys_wait() -> None:
    q = Queue(fair_key=by_cluster)
    q.limit_per_key = 1
    for i in range(3):
        q.add(Req("hung", str(i)))
    q.add(Req("ok", "a"))
    q.add(Req("ok", "b"))
    first = q.get(timeout=0)
    assert first == Req("hung", "0")
    # the hung cluster's one allowed item is held: only the other cluster is served
    assert q.get(timeout=0) == Req("ok", "a")
    with pytest.raises(TimeoutError):  # "ok" is at its limit too, "hung" stays parked
        q.get(timeout=0)
    q.done(Req("ok", "a"))
    assert q.get(timeout=0) == Req("ok", "b")
    q.done(Req("ok", "b"))
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    q.done(first)  # the hung item finished: its cluster gets its turn back
    assert q.get(timeout=0) == Req("hung", "1")
    assert len(q) == 1


def test_raising_or_lifting_the_limit_frees_parked_keys_at_once() -> None:
    q = Queue(fair_key=by_cluster)
    q.limit_per_key = 1
    q.add(Req("a", "0"))
    q.add(Req("a", "1"))
    assert q.get(timeout=0) == Req("a", "0")
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    q.limit_per_key = None
    assert q.get(timeout=0) == Req("a", "1")
    q.limit_per_key = 1  # two held now: over the limit, nothing more is handed out for "a"
    q.add(Req("a", "2"))
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    q.done(Req("a", "0"))
    with pytest.raises(TimeoutError):  # still one held, the limit is one
        q.get(timeout=0)
    q.done(Req("a", "1"))
    assert q.get(timeout=0) == Req("a", "2")


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Queue().limit_per_key = 0


def test_a_paused_key_is_held_back_until_resumed_while_the_others_are_served() -> None:
    q = Queue(fair_key=by_cluster)
    q.limit_per_key = 5
    held = Req("hung", "held")
    q.add(held)
    assert q.get(timeout=0) == held  # a worker holds one of its items when it is paused
    for i in range(3):
        q.add(Req("hung", str(i)))
        q.add(Req("ok", str(i)))
    assert q.pause("hung") is True
    assert q.pause("hung") is False  # paused already
    assert q.paused() == {"hung"}
    assert [q.get(timeout=0) for _ in range(3)] == [Req("ok", str(i)) for i in range(3)]
    q.add(held)  # re-added while held: runs again once resumed, not before
    q.done(held)  # nor does its worker's done, nor a change of the limit, hand it out
    q.limit_per_key = None
    q.add(Req("hung", "0"))  # merged with the one queued
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    assert len(q) == 4
    assert q.resume("hung") is True
    assert q.resume("hung") is False  # not paused any more
    assert q.paused() == frozenset()
    assert sorted(q.get(timeout=0).name for _ in range(4)) == ["0", "1", "2", "held"]


def test_pausing_a_key_at_its_limit_keeps_it_parked_after_its_items_are_done() -> None:
    q = Queue(fair_key=by_cluster)
    q.limit_per_key = 1
    q.add(Req("a", "0"))
    q.add(Req("a", "1"))
    assert q.get(timeout=0) == Req("a", "0")
    q.pause("a")
    q.done(Req("a", "0"))
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    q.resume("a")
    assert q.get(timeout=0) == Req("a", "1")
