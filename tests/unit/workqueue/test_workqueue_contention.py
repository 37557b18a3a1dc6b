"""Many producers at once (a fleet's reflectors): no add is lost while the lock is busy."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mcruntime.workqueue import NOTHING, Queue, ShutDown

from .conftest import Threads

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("workers", [1, 3])
def test_every_change_is_processed_after_its_last_add_under_contention(
    threads: Threads, wait_until: Any, workers: int
) -> None:
    """Level-based guarantee: for every item, a worker takes it after its last change.

    64 producers change and add 50 shared items as fast as they can while workers
    take them, so most adds find the lock busy and go through the inbox, and
    workers keep falling idle and waking; a lost add or a missed wake-up leaves
    an item whose last change no worker saw.
    """
    q = Queue(fair_key=lambda item: item.split("/")[0])
    items = [f"c{i % 10}/o{i}" for i in range(50)]
    version: dict[str, int] = dict.fromkeys(items, 0)
    seen: dict[str, int] = {}
    lock = threading.Lock()
    counter = [0]

    def produce(seed: int) -> None:
        for n in range(400):
            item = items[(seed * 7 + n) % len(items)]
            with lock:
                counter[0] += 1
                version[item] = counter[0]
            q.add(item)

    def work() -> None:
        item: Any = NOTHING
        while True:
            if item is NOTHING:
                try:
                    item = q.get()
                except ShutDown:
                    return
            with lock:
                seen[item] = version[item]
            item = q.done_and_take(item)

    for _ in range(workers):
        threads.start(work)
    producers = [threads.start(produce, s) for s in range(64)]
    for p in producers:
        p.join(30)

    def caught_up() -> bool:
        with lock:
            return all(seen.get(i) == version[i] for i in items)

    wait_until(caught_up, timeout=20)
    assert len(q) == 0
    q.shut_down()


def test_adds_left_in_the_inbox_are_taken_in_by_len_and_dropped_by_shutdown() -> None:
    q = Queue()
    with q._lock:  # a busy lock: the add leaves the item in the inbox
        q.add("a")
    assert len(q) == 1
    assert q.get(timeout=0) == "a"
    with q._lock:
        q.add("b")
    q.shut_down()
    with pytest.raises(ShutDown):
        q.get(timeout=0)


def test_an_add_made_while_the_lock_is_busy_wakes_a_waiting_worker(
    threads: Threads, wait_until: Any
) -> None:
    q = Queue()
    got: list[str] = []
    worker = threads.start(lambda: got.append(q.get(timeout=10)))
    wait_until(lambda: q._waiting == 1)
    with q._lock:  # busy: the add goes to the inbox, sees the waiting worker and wakes it
        threads.start(q.add, "a")
        wait_until(lambda: q._inbox)
    worker.join(5)
    assert got == ["a"]
