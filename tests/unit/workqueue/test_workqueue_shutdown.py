"""Shutdown: immediate stop wakes getters; drain lets in-flight work finish."""

from __future__ import annotations

import threading

import pytest

from mcruntime.workqueue import Queue, ShutDown

pytestmark = pytest.mark.timeout(30)


def test_shut_down_wakes_every_blocked_getter(threads) -> None:
    q = Queue()
    results: list[str] = []
    lock = threading.Lock()
    waiting = threading.Barrier(4, timeout=10)

    def getter() -> None:
        waiting.wait()
        try:
            q.get()
        except ShutDown:
            with lock:
                results.append("shutdown")

    getters = [threads.start(getter) for _ in range(3)]
    waiting.wait()
    q.shut_down()
    for t in getters:
        t.join(10)
    assert results == ["shutdown"] * 3
    assert q.shutting_down


def test_shut_down_wakes_a_getter_waiting_for_a_deadline(threads) -> None:
    q = Queue()
    q.add_after("a", 3600)
    outcome: list[str] = []
    waiting = threading.Event()

    def getter() -> None:
        waiting.set()
        try:
            q.get()
        except ShutDown:
            outcome.append("shutdown")

    t = threads.start(getter)
    assert waiting.wait(5)
    q.shut_down()
    t.join(10)
    assert outcome == ["shutdown"]


def test_after_shut_down_get_raises_at_once_and_adds_are_ignored() -> None:
    q = Queue()
    q.add("queued")
    q.add("held")
    assert q.get() == "queued"
    q.add("queued")  # to re-run after done
    q.shut_down()
    with pytest.raises(ShutDown):
        q.get()
    q.add("new")
    q.add_after("later", 1)
    q.add_rate_limited("retry")
    q.done("queued")  # workers may still finish; nothing is re-queued
    assert len(q) == 0
    with pytest.raises(ShutDown):
        q.get(timeout=0)


def test_drain_waits_for_in_flight_items(threads) -> None:
    q = Queue()
    q.add("a")
    assert q.get() == "a"
    assert q.shut_down_with_drain(timeout=0.02) is False  # still held
    drained = threading.Event()

    def drain() -> None:
        assert q.shut_down_with_drain() is True
        drained.set()

    threads.start(drain)
    assert not drained.is_set()
    q.done("a")
    assert drained.wait(5)
    with pytest.raises(ShutDown):
        q.get(timeout=0)


def test_drain_still_hands_out_queued_items_then_shuts_down() -> None:
    q = Queue()
    q.add("a")
    q.add("b")
    q.add_after("delayed", 3600)
    assert q.shut_down_with_drain() is True  # nothing held
    q.add("rejected")
    assert q.get(timeout=0) == "a"
    q.done("a")
    assert q.get(timeout=0) == "b"
    q.done("b")
    with pytest.raises(ShutDown):
        q.get(timeout=0)


def test_drain_reruns_an_item_added_while_it_was_held(threads) -> None:
    q = Queue()
    q.add("a")
    assert q.get() == "a"
    q.add("a")
    drained = threading.Event()

    def drain() -> None:
        q.shut_down_with_drain()
        drained.set()

    threads.start(drain)
    q.done("a")
    assert q.get(timeout=5) == "a"
    q.done("a")
    assert drained.wait(5)
    with pytest.raises(ShutDown):
        q.get(timeout=0)


def test_getter_waits_during_drain_for_a_rerun_of_a_held_item(threads) -> None:
    q = Queue()
    q.add("a")
    assert q.get() == "a"
    q.add("a")
    threads.start(q.shut_down_with_drain)
    got: list[str] = []
    waiting = threading.Event()

    def getter() -> None:
        waiting.set()
        got.append(q.get(timeout=10))

    t = threads.start(getter)
    assert waiting.wait(5)
    q.done("a")
    t.join(10)
    assert got == ["a"]
    q.done("a")


def test_drain_returns_when_the_last_held_item_is_done_even_if_it_reruns(threads) -> None:
    q = Queue()
    q.add("a")
    assert q.get() == "a"
    q.add("a")
    drained = threading.Event()

    def drain() -> None:
        q.shut_down_with_drain()
        drained.set()

    threads.start(drain)
    q.done("a")
    assert drained.wait(5)
    assert q.get(timeout=0) == "a"  # the re-run is still handed out
    q.done("a")
    with pytest.raises(ShutDown):
        q.get(timeout=0)


def test_shut_down_returns_what_it_discarded_once() -> None:
    """Queued, delayed and to-re-run items, each once, so a controller can say how many
    requests its stop dropped; the one a worker holds is not among them."""
    q = Queue()
    q.add("held")
    assert q.get(timeout=0) == "held"
    q.add("held")  # to re-run after its worker
    q.add("ready")
    q.add_after("later", 60)
    q.add_after("ready", 60)  # queued and delayed: one item
    assert sorted(q.shut_down()) == ["held", "later", "ready"]
    assert q.shut_down() == []
    q.done("held")
    assert len(q) == 0
