"""Exponential backoff with jitter, the one used for reconnects and retries.

Informer reconnects, cluster engage retries and lease renewals all wait with
`Backoff`; waits are interruptible through `sleep()` on a stop event.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

__all__ = ["Backoff", "sleep"]

DEFAULT_INITIAL = 0.2
DEFAULT_MAXIMUM = 30.0
DEFAULT_FACTOR = 2.0
DEFAULT_JITTER = 0.1


class Backoff:
    """Delays that grow from ``initial`` by ``factor`` per attempt up to ``maximum``.

    Each delay is spread by ``jitter`` (a fraction: 0.1 means up to +/-10%) so
    that many clients failing together do not retry in lock-step; a jittered
    delay never exceeds ``maximum`` nor goes below zero. ``rand`` returns a float
    in [0, 1) and exists so tests can fix it. Not thread-safe: one per retry loop.
    """

    def __init__(
        self,
        initial: float = DEFAULT_INITIAL,
        maximum: float = DEFAULT_MAXIMUM,
        factor: float = DEFAULT_FACTOR,
        jitter: float = DEFAULT_JITTER,
        *,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial < 0 or maximum < 0:
            raise ValueError("backoff delays must not be negative")
        if factor < 1:
            raise ValueError(f"backoff factor must be >= 1, got {factor}")
        if not 0 <= jitter <= 1:
            raise ValueError(f"backoff jitter must be within [0, 1], got {jitter}")
        self.initial = initial
        self.maximum = max(maximum, initial)
        self.factor = factor
        self.jitter = jitter
        self._rand = rand
        self.attempts = 0
        self._current = initial

    def next(self) -> float:
        """Return the delay before the next attempt and count the attempt."""
        base = self._current
        self.attempts += 1
        if base < self.maximum:
            self._current = min(base * self.factor, self.maximum)
        if not self.jitter:
            return base
        spread = base * self.jitter * (2.0 * self._rand() - 1.0)
        return min(max(base + spread, 0.0), self.maximum)

    def reset(self) -> None:
        """Start over from ``initial`` (after a success)."""
        self.attempts = 0
        self._current = self.initial

    def __repr__(self) -> str:
        return (
            f"Backoff(initial={self.initial}, maximum={self.maximum}, factor={self.factor}, "
            f"jitter={self.jitter}, attempts={self.attempts})"
        )


def sleep(stop: threading.Event, seconds: float) -> bool:
    """Wait ``seconds`` unless ``stop`` is set first; True means stop was set (exit now)."""
    if seconds <= 0:
        return stop.is_set()
    return stop.wait(seconds)
