"""Shared helpers for the work queue tests: a fake clock and a thread runner with deadlines."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mcruntime.envtest import wait_for


class FakeClock:
    """A monotonic clock that only moves when the test advances it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class Threads:
    """Starts test threads and checks at teardown that every one of them has ended."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def start(self, target: Callable[..., Any], *args: Any) -> threading.Thread:
        def run() -> None:
            try:
                target(*args)
            except BaseException as exc:  # noqa: BLE001 - reported at teardown
                self.errors.append(exc)

        t = threading.Thread(target=run, name=f"test/workqueue/{len(self.threads)}", daemon=True)
        self.threads.append(t)
        t.start()
        return t

    def join(self, timeout: float = 10.0) -> None:
        for t in self.threads:
            t.join(timeout)
            assert not t.is_alive(), f"{t.name} did not finish within {timeout}s"
        if self.errors:
            raise self.errors[0]


@pytest.fixture
def threads() -> Iterator[Threads]:
    runner = Threads()
    yield runner
    runner.join()


@pytest.fixture
def wait_until() -> Callable[..., None]:
    """Poll a predicate until it holds; fail after ``timeout`` seconds (default 5)."""
    return functools.partial(wait_for, interval=0.001)
