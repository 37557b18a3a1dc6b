"""Delayed adds: deadlines, earliest-wins, promotion by waiting getters (no timer thread)."""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta

import pytest

from mcruntime.workqueue import Queue

pytestmark = pytest.mark.timeout(30)


class FixedDelay:
    """A rate limiter that always asks for the same delay and counts retries."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.retries: dict[object, int] = {}

    def when(self, item: object) -> float:
        self.retries[item] = self.retries.get(item, 0) + 1
        return self.delay

    def forget(self, item: object) -> None:
        self.retries.pop(item, None)

    def num_requeues(self, item: object) -> int:
        return self.retries.get(item, 0)


def test_delayed_item_is_ready_only_after_its_deadline(clock) -> None:
    q = Queue(clock=clock)
    q.add_after("a", 5)
    assert len(q) == 1
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    clock.advance(4.9)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    clock.advance(0.1)
    assert q.get(timeout=0) == "a"


def test_delayed_items_come_out_in_deadline_order(clock) -> None:
    q = Queue(clock=clock)
    q.add_after("a", 3)
    q.add_after("b", 1)
    q.add_after("c", 2)
    clock.advance(10)
    assert [q.get(timeout=0) for _ in range(3)] == ["b", "c", "a"]


def test_earliest_deadline_wins(clock) -> None:
    q = Queue(clock=clock)
    q.add_after("later-then-sooner", 10)
    q.add_after("later-then-sooner", 2)
    q.add_after("sooner-then-later", 2)
    q.add_after("sooner-then-later", 10)
    assert len(q) == 2
    clock.advance(2)
    assert {q.get(timeout=0), q.get(timeout=0)} == {"later-then-sooner", "sooner-then-later"}
    q.done("later-then-sooner")
    q.done("sooner-then-later")
    clock.advance(100)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)  # the superseded deadlines do not fire again
    assert len(q) == 0


def test_non_positive_delay_adds_now(clock) -> None:
    q = Queue(clock=clock)
    q.add_after("zero", 0)
    q.add_after("negative", -1)
    assert [q.get(timeout=0), q.get(timeout=0)] == ["zero", "negative"]


def test_delayed_item_already_queued_is_merged(clock) -> None:
    q = Queue(clock=clock)
    q.add("a")
    q.add_after("a", 1)
    clock.advance(1)
    assert q.get(timeout=0) == "a"
    with pytest.raises(TimeoutError):
        q.get(timeout=0)


def test_an_add_ends_the_wait_of_a_delayed_item(clock) -> None:
    # controller-runtime's priority queue: an item is queued once; added now, its delay is
    # gone (a deleted object's requeue_after does not run it again an hour later)
    q = Queue(clock=clock)
    q.add_after("a", 3600)
    q.add("a")
    assert len(q) == 1
    assert q.get(timeout=0) == "a"
    q.done("a")
    assert len(q) == 0
    clock.advance(3600)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)


def test_an_add_of_an_item_waiting_for_ever_ends_its_wait(clock) -> None:
    q = Queue(clock=clock)
    q.add_after("a", math.inf)
    q.add("a")
    assert q.get(timeout=0) == "a"
    q.done("a")
    assert len(q) == 0


def test_a_delay_of_a_ready_item_is_merged_into_it(clock) -> None:
    q = Queue(clock=clock)
    q.add("a")
    q.add_after("a", 5)
    assert len(q) == 1
    assert q.get(timeout=0) == "a"
    q.done("a")
    clock.advance(5)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    assert len(q) == 0


def test_an_item_added_while_it_waits_keeps_the_priority_of_its_delay(clock) -> None:
    q = Queue(clock=clock)
    q.add("other")
    q.add_after("a", 60, priority=5)
    q.add("a")
    assert [q.get(timeout=0), q.get(timeout=0)] == ["a", "other"]


def test_delays_ended_by_adds_hold_nothing_until_their_deadlines(clock) -> None:
    q = Queue(clock=clock)
    for i in range(1000):  # objects reconciled with requeue_after, then deleted
        q.add_after(i, 3600)
        q.add(i)
    assert len(q) == 1000
    assert len(q._heap) <= 100  # noqa: SLF001 - the delays' entries, which hold their items


def test_delayed_item_due_while_in_flight_reruns_after_done(clock) -> None:
    q = Queue(clock=clock)
    q.add("a")
    assert q.get(timeout=0) == "a"
    q.add_after("a", 1)
    clock.advance(1)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    q.done("a")
    assert q.get(timeout=0) == "a"


def test_add_rate_limited_waits_for_the_limiter_delay(clock) -> None:
    limiter = FixedDelay(3.0)
    q = Queue(rate_limiter=limiter, clock=clock)
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1
    clock.advance(2.9)
    with pytest.raises(TimeoutError):
        q.get(timeout=0)
    clock.advance(0.1)
    assert q.get(timeout=0) == "a"
    q.forget("a")
    assert q.num_requeues("a") == 0


def test_blocked_getter_wakes_at_the_deadline(threads) -> None:
    q = Queue()
    got: list[tuple[str, float]] = []
    waiting = threading.Event()

    def getter() -> None:
        waiting.set()
        start = time.monotonic()
        item = q.get(timeout=10)
        got.append((item, time.monotonic() - start))

    t = threads.start(getter)
    assert waiting.wait(5)
    q.add_after("a", 0.05)
    t.join(10)
    assert got and got[0][0] == "a"
    assert 0.04 <= got[0][1] < 5


@pytest.mark.parametrize(
    "delay",
    [math.inf, 1e10, timedelta.max.total_seconds()],
    ids=["inf", "centuries", "timedelta.max"],
)
def test_a_far_delay_leaves_blocked_getters_serving(threads, wait_until, delay: float) -> None:
    """A delay past ``threading.TIMEOUT_MAX`` (about 292 years) once made every blocked
    getter raise ``OverflowError`` from ``Condition.wait``, killing a controller's workers:
    the item now waits (for ever, for ``inf``) and the getters go on serving."""
    q = Queue()
    got: list[str] = []

    def getter() -> None:
        got.append(q.get())

    q.add_after("far", delay)
    t = threads.start(getter)
    wait_until(lambda: q._waiting == 1 or not t.is_alive())  # it waits for "far"
    q.add("now")
    t.join(5)
    assert got == ["now"]
    with pytest.raises(TimeoutError):
        q.get(timeout=0.01)  # "far" is not due
    assert len(q) == 1


def test_a_nan_delay_is_refused_naming_the_queue() -> None:
    q = Queue("cms")
    with pytest.raises(ValueError, match=r"queue 'cms': add_after\('x', nan\)"):
        q.add_after("x", math.nan)
    assert len(q) == 0


@pytest.mark.parametrize("delays", [(0.03, 0.01, 0.02), (0.02, 0.02, 0.02)])
def test_every_blocked_getter_is_served_as_deadlines_pass(threads, delays) -> None:
    q = Queue()
    got: list[str] = []
    lock = threading.Lock()

    def getter() -> None:
        item = q.get(timeout=10)
        with lock:
            got.append(item)

    getters = [threads.start(getter) for _ in range(3)]
    for name, delay in zip("abc", delays, strict=True):
        q.add_after(name, delay)
    for t in getters:
        t.join(10)
    assert sorted(got) == ["a", "b", "c"]


def test_items_due_together_wake_several_getters(threads, clock) -> None:
    q = Queue(clock=clock)
    for name in ("a", "b", "c"):
        q.add_after(name, 1)
    clock.advance(1)
    got: list[str] = []
    lock = threading.Lock()
    held = threading.Barrier(3, timeout=10)

    def getter() -> None:
        item = q.get(timeout=10)
        with lock:
            got.append(item)
        held.wait()  # all three hold an item at once

    for t in [threads.start(getter) for _ in range(3)]:
        t.join(10)
    assert sorted(got) == ["a", "b", "c"]
