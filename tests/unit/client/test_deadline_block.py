"""`deadline()` and `reconciling()` blocks: nesting, threads, and use as decorators.

Both are entered on every client call and every reconcile, so they are plain
classes; these tests hold what callers relied on when they were generator
context managers.
"""

from __future__ import annotations

import threading
import time

import pytest

from mcruntime.client import deadline, remaining
from mcruntime.reconcile import Request, current_request, reconciling

pytestmark = pytest.mark.timeout(10)


def test_an_inner_block_keeps_the_earlier_deadline_and_leaving_restores_the_outer() -> None:
    assert remaining() is None
    with deadline(5):
        outer = remaining()
        assert outer is not None and 4 < outer <= 5
        with deadline(60):
            inner = remaining()
            assert inner is not None and inner <= outer
        with deadline(0.5):
            inner = remaining()
            assert inner is not None and inner <= 0.5
        with deadline(None):
            kept = remaining()
            assert kept is not None and 4 < kept <= 5
        back = remaining()
        assert back is not None and back > 4
    assert remaining() is None


def test_a_deadline_counts_from_when_its_block_is_entered() -> None:
    block = deadline(1)
    time.sleep(0.2)
    with block:
        left = remaining()
        assert left is not None and left > 0.9


def test_a_deadline_decorator_gives_each_call_its_own_deadline() -> None:
    @deadline(1)
    def left() -> float | None:
        return remaining()

    first = left()
    time.sleep(0.3)
    second = left()
    assert first is not None and second is not None
    assert second > 0.9, "the second call was bounded by the first call's deadline"
    assert remaining() is None


def test_no_deadline_blocks_in_many_threads_leave_each_thread_s_own_deadline_alone() -> None:
    seen: list[float | None] = []
    go = threading.Barrier(4)

    def run(seconds: float) -> None:
        with deadline(seconds):
            go.wait(5)
            with deadline(None):
                go.wait(5)
                seen.append(remaining())

    threads = [threading.Thread(target=run, args=(s,)) for s in (1, 2, 3, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(round(s or 0) for s in seen) == [1, 2, 3, 4]


def test_reconciling_sets_the_current_request_and_restores_the_outer_one() -> None:
    a, b = Request("a", "ns", "one"), Request("b", "ns", "two")
    assert current_request() is None
    with reconciling(a) as got:
        assert got is a and current_request() is a
        with reconciling(b):
            assert current_request() is b
        assert current_request() is a
    assert current_request() is None

    @reconciling(b)
    def inside() -> Request | None:
        return current_request()

    assert inside() is b and inside() is b
    assert current_request() is None
