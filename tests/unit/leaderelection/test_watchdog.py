"""The watchdog: fires a key's callback at its deadline unless moved or disarmed; one thread for all."""

from __future__ import annotations

import threading
import time

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import wait_for
from mcruntime.leaderelection import Watchdog

pytestmark = pytest.mark.timeout(30)


def test_a_deadline_that_is_not_moved_fires_once() -> None:
    dog = Watchdog("test-once")
    fired: list[float] = []
    done = threading.Event()

    def expired() -> None:
        fired.append(time.monotonic())
        done.set()

    armed_at = time.monotonic()
    dog.arm("lease", armed_at + 0.2, expired)
    assert done.wait(5)
    assert fired[0] - armed_at >= 0.2
    assert not dog.armed("lease")
    dog.stop()
    assert len(fired) == 1


def test_moving_a_deadline_forward_postpones_it_and_disarming_cancels_it() -> None:
    dog = Watchdog("test-move")
    fired: list[str] = []
    ended = threading.Event()
    now = time.monotonic()
    dog.arm("renewed", now + 0.1, lambda: fired.append("renewed"))
    dog.arm("cancelled", now + 0.1, lambda: fired.append("cancelled"))
    dog.arm("renewed", now + 0.4, lambda: fired.append("renewed"))  # a renewal moves it
    dog.disarm("cancelled")
    dog.arm("marker", now + 0.25, ended.set)
    assert ended.wait(5)
    assert fired == []  # at 0.25 s: neither the moved nor the disarmed deadline fired
    wait_for(lambda: fired, timeout=5, what="the moved deadline to fire")
    assert fired == ["renewed"]
    dog.stop()


def test_many_deadlines_share_one_thread_that_stops_with_the_watchdog() -> None:
    dog = Watchdog("test-many")
    for i in range(100):
        dog.arm(i, time.monotonic() + 60, lambda: None)
    mine = [t for t in mcruntime_threads() if t.name.endswith("/test-many")]
    assert len(mine) == 1
    dog.stop()
    assert not mine[0].is_alive()
    dog.arm("late", time.monotonic(), lambda: None)  # after stop: ignored, no new thread
    assert not [t for t in mcruntime_threads() if t.name.endswith("/test-many")]
