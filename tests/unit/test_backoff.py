"""Backoff delays grow, cap and jitter within bounds; sleep wakes up on stop."""

from __future__ import annotations

import threading
import time

import pytest

from mcruntime._backoff import Backoff, sleep

pytestmark = pytest.mark.timeout(10)


def test_delays_grow_by_factor_up_to_the_maximum() -> None:
    b = Backoff(initial=0.5, maximum=5.0, factor=2.0, jitter=0.0)
    assert [b.next() for _ in range(7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert b.attempts == 7


def test_reset_starts_over() -> None:
    b = Backoff(initial=1.0, maximum=60.0, jitter=0.0)
    b.next(), b.next(), b.next()
    b.reset()
    assert b.attempts == 0
    assert b.next() == 1.0


@pytest.mark.parametrize(("rand", "expected"), [(0.0, 0.9), (0.5, 1.0), (0.999999, 1.1)])
def test_jitter_spreads_the_delay_symmetrically(rand: float, expected: float) -> None:
    b = Backoff(initial=1.0, maximum=10.0, jitter=0.1, rand=lambda: rand)
    assert b.next() == pytest.approx(expected, abs=1e-5)


def test_jittered_delays_stay_within_bounds_and_never_exceed_the_maximum() -> None:
    for rand in (0.0, 0.25, 0.5, 0.75, 0.9999):
        b = Backoff(initial=0.2, maximum=30.0, factor=2.0, jitter=0.5, rand=lambda r=rand: r)
        base = 0.2
        for _ in range(20):
            delay = b.next()
            assert base * 0.5 - 1e-9 <= delay <= min(base * 1.5, 30.0) + 1e-9
            assert 0.0 <= delay <= 30.0
            base = min(base * 2.0, 30.0)


def test_default_delays_start_small_and_cap_at_thirty_seconds() -> None:
    b = Backoff(rand=lambda: 0.5)
    assert b.next() == pytest.approx(0.2)
    delays = [b.next() for _ in range(30)]
    assert delays[-1] == pytest.approx(30.0)


@pytest.mark.parametrize(
    "kwargs",
    [{"initial": -1.0}, {"maximum": -1.0}, {"factor": 0.5}, {"jitter": 1.5}, {"jitter": -0.1}],
)
def test_invalid_settings_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Backoff(**kwargs)


def test_sleep_returns_false_after_the_full_wait() -> None:
    stop = threading.Event()
    began = time.monotonic()
    assert sleep(stop, 0.05) is False
    assert time.monotonic() - began >= 0.04


def test_sleep_returns_true_as_soon_as_stop_is_set() -> None:
    stop = threading.Event()
    timer = threading.Timer(0.05, stop.set)
    timer.start()
    try:
        began = time.monotonic()
        assert sleep(stop, 30.0) is True
        assert time.monotonic() - began < 5.0
    finally:
        timer.cancel()


def test_sleep_with_no_delay_reports_stop_without_waiting() -> None:
    stop = threading.Event()
    assert sleep(stop, 0) is False
    stop.set()
    assert sleep(stop, -1.0) is True
    assert sleep(stop, 10.0) is True
