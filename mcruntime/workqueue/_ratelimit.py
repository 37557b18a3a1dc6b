"""Rate limiters: how long an item waits before it is retried (client-go semantics)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Protocol, runtime_checkable

DEFAULT_BASE_DELAY = 0.005
DEFAULT_MAX_DELAY = 1000.0
DEFAULT_QPS = 10.0
DEFAULT_BURST = 100

# 2.0 ** exp overflows a float past 1023; any exponent this large is capped anyway.
_MAX_EXPONENT = 1023


@runtime_checkable
class RateLimiter(Protocol):
    """Decides how long to wait before an item is retried.

    Contract: every method is thread-safe and non-blocking. ``when`` is called once
    per retry and may record it (a failure count, a reserved token), so calling it
    has an effect. ``forget`` ends the item's retry history (call it on success).
    """

    def when(self, item: Hashable) -> float:
        """Seconds to wait before ``item`` is processed again; records one retry."""
        ...

    def forget(self, item: Hashable) -> None:
        """Clear ``item``'s retry history."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many times ``item`` has been retried since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-item exponential backoff: ``base * 2**failures``, capped at ``max``."""

    def __init__(self, base: float = DEFAULT_BASE_DELAY, max: float = DEFAULT_MAX_DELAY) -> None:
        if base < 0 or max < 0:
            raise ValueError(f"backoff delays must be >= 0 (base={base}, max={max})")
        self.base = base
        self.max = max
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        if exp > _MAX_EXPONENT:
            return self.max
        return min(self.base * 2.0**exp, self.max)

    def forget(self, item: Hashable) -> None:
        # Most reconciles succeed first time: skip the lock when there is nothing to forget.
        # A dict lookup is atomic, and only the worker holding ``item`` records its failures.
        if item not in self._failures:
            return
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """An overall token bucket: ``qps`` tokens a second, up to ``burst`` saved.

    ``when`` reserves a token and returns the delay until it is available, so a
    burst of retries is spread out at ``qps``. It keeps no per-item state.
    """

    def __init__(
        self,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"bucket needs qps > 0 and burst >= 1 (qps={qps}, burst={burst})")
        self.qps = float(qps)
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            now = self._clock()
            elapsed = now - self._last
            if elapsed > 0:
                self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
                self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Combines limiters: the longest delay wins, every limiter records each retry."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters: tuple[RateLimiter, ...] = limiters

    def when(self, item: Hashable) -> float:
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter() -> MaxOfRateLimiter:
    """controller-runtime's default: per-item 5ms..1000s backoff, and 10 qps / burst 100 overall."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY),
        BucketRateLimiter(DEFAULT_QPS, DEFAULT_BURST),
    )
