"""Core queue semantics: deduplication, re-run after in-flight, FIFO order, blocking get."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

from mcruntime.workqueue import Queue, ShutDown

pytestmark = pytest.mark.timeout(30)


def test_add_while_queued_is_merged() -> None:
    q = Queue()
    q.add("a")
    q.add("a")
    q.add("a")
    assert len(q) == 1
    assert q.get(timeout=0) == "a"
    with pytest.raises(TimeoutError):
        q.get(timeout=0)


def test_add_while_in_flight_reruns_once_after_done() -> None:
    q = Queue()
    q.add("a")
    assert q.get() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 1
    with pytest.raises(TimeoutError):
        q.get(timeout=0)  # never handed out twice while held
    q.done("a")
    assert q.get(timeout=0) == "a"
    q.done("a")
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    assert len(q) == 0


def test_items_are_served_in_add_order_without_fair_key() -> None:
    q = Queue()
    for i in range(100):
        q.add(i)
    assert [q.get(timeout=0) for _ in range(100)] == list(range(100))


def test_get_times_out_when_empty() -> None:
    q = Queue()
    with pytest.raises(TimeoutError):
        q.get(timeout=0.01)


def test_blocked_get_returns_when_an_item_is_added(threads) -> None:
    q = Queue()
    got: list[str] = []
    waiting = threading.Event()

    def getter() -> None:
        waiting.set()
        got.append(q.get(timeout=10))

    t = threads.start(getter)
    assert waiting.wait(5)
    q.add("x")
    t.join(5)
    assert got == ["x"]


def test_done_of_unknown_item_is_ignored() -> None:
    q = Queue()
    q.done("never-added")
    q.add("a")
    q.done("a")  # queued, not held: still queued
    assert q.get(timeout=0) == "a"


def test_unhashable_item_is_rejected() -> None:
    q = Queue()
    with pytest.raises(TypeError):
        q.add(["not", "hashable"])  # type: ignore[arg-type]


def test_never_two_workers_hold_the_same_item_and_no_add_is_lost(threads, wait_until) -> None:
    q = Queue("stress", fair_key=lambda item: f"c{item % 3}")
    keys = list(range(12))
    version = Counter[int]()
    seen = Counter[int]()
    holding: set[int] = set()
    lock = threading.Lock()
    violations: list[int] = []
    processed = Counter[int]()

    def producer(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(3000):
            item = rng.choice(keys)
            with lock:
                version[item] += 1
            q.add(item)

    def worker() -> None:
        while True:
            try:
                item = q.get()
            except ShutDown:
                return
            with lock:
                if item in holding:
                    violations.append(item)
                holding.add(item)
                seen[item] = max(seen[item], version[item])
                processed[item] += 1
            time.sleep(0)  # let other workers run while this one holds the item
            with lock:
                holding.discard(item)
            q.done(item)

    workers = [threads.start(worker) for _ in range(4)]
    producers = [threads.start(producer, seed) for seed in range(3)]
    for t in producers:
        t.join(20)
    wait_until(lambda: len(q) == 0 and not q.in_flight_ages(), timeout=20)
    q.shut_down()
    for t in workers:
        t.join(5)
    assert violations == []
    assert seen == version  # every add was followed by a processing that saw it
    assert sum(processed.values()) < 9000  # adds were merged


def test_delayed_items_reach_busy_and_idle_workers_without_loss(threads, wait_until) -> None:
    q = Queue("delays")
    rng = random.Random(7)
    processed: set[int] = set()
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                item = q.get()
            except ShutDown:
                return
            with lock:
                processed.add(item)
            q.done(item)

    for _ in range(4):
        threads.start(worker)
    for i in range(300):
        q.add_after(i, rng.uniform(0, 0.03))
    wait_until(lambda: len(processed) == 300, timeout=10)
    q.shut_down()


def test_done_and_take_marks_done_and_hands_out_the_next_ready_item_or_nothing():
    from mcruntime.workqueue import NOTHING, Queue

    q = Queue()
    q.add("a")
    q.add("b")
    assert q.get() == "a"
    assert q.done_and_take("a") == "b"  # done with a, and b at once
    assert q.done_and_take("b") is NOTHING  # nothing ready: a worker calls get() as usual
    assert len(q) == 0
    q.shut_down()
