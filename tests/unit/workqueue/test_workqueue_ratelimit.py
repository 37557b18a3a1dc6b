"""Rate limiters: client-go shapes and defaults."""

from __future__ import annotations

import threading
import time

import pytest

from mcruntime.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    Queue,
    RateLimiter,
    default_controller_rate_limiter,
)

pytestmark = pytest.mark.timeout(30)


def test_exponential_backoff_doubles_from_5ms_and_is_capped() -> None:
    rl = ItemExponentialFailureRateLimiter()
    delays = [rl.when("a") for _ in range(20)]
    assert delays[:5] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert delays[-1] == 1000.0
    assert max(delays) == 1000.0
    assert rl.num_requeues("a") == 20


def test_exponential_backoff_with_custom_base_and_max() -> None:
    rl = ItemExponentialFailureRateLimiter(base=1.0, max=5.0)
    assert [rl.when("a") for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_exponential_backoff_is_per_item_and_reset_by_forget() -> None:
    rl = ItemExponentialFailureRateLimiter()
    rl.when("a")
    rl.when("a")
    assert rl.when("b") == pytest.approx(0.005)
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == pytest.approx(0.005)
    assert rl.num_requeues("b") == 1


def test_exponential_backoff_survives_huge_failure_counts() -> None:
    rl = ItemExponentialFailureRateLimiter()
    for _ in range(2000):
        delay = rl.when("a")
    assert delay == 1000.0


def test_exponential_backoff_counts_concurrent_failures_exactly() -> None:
    rl = ItemExponentialFailureRateLimiter()

    def fail() -> None:
        for _ in range(1000):
            rl.when("a")

    ts = [threading.Thread(target=fail) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert rl.num_requeues("a") == 4000


def test_bucket_allows_a_burst_then_spreads_at_qps(clock) -> None:
    rl = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [rl.when(i) for i in range(100)] == [0.0] * 100
    assert rl.when("x") == pytest.approx(0.1)
    assert rl.when("y") == pytest.approx(0.2)
    clock.advance(0.2)  # the two reserved tokens are paid back
    assert rl.when("z") == pytest.approx(0.1)
    clock.advance(100)  # refills to the burst, not beyond
    assert [rl.when(i) for i in range(100)] == [0.0] * 100
    assert rl.when("w") > 0
    assert rl.num_requeues("x") == 0
    rl.forget("x")


def test_bucket_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=0)
    with pytest.raises(ValueError):
        BucketRateLimiter(burst=0)


def test_max_of_takes_the_longest_delay_and_forgets_everywhere(clock) -> None:
    slow = ItemExponentialFailureRateLimiter(base=1.0, max=100.0)
    fast = ItemExponentialFailureRateLimiter(base=0.001, max=1.0)
    rl = MaxOfRateLimiter(fast, slow)
    assert rl.when("a") == 1.0
    assert rl.when("a") == 2.0
    assert rl.num_requeues("a") == 2
    rl.forget("a")
    assert slow.num_requeues("a") == 0
    assert fast.num_requeues("a") == 0


def test_default_controller_rate_limiter_combines_backoff_and_bucket() -> None:
    rl = default_controller_rate_limiter()
    backoff, bucket = rl.limiters
    assert isinstance(backoff, ItemExponentialFailureRateLimiter)
    assert (backoff.base, backoff.max) == (0.005, 1000.0)
    assert isinstance(bucket, BucketRateLimiter)
    assert (bucket.qps, bucket.burst) == (10.0, 100)
    assert rl.when("a") == pytest.approx(0.005)
    assert rl.when("a") == pytest.approx(0.01)
    assert rl.num_requeues("a") == 2


def test_limiters_satisfy_the_protocol() -> None:
    for rl in (
        ItemExponentialFailureRateLimiter(),
        BucketRateLimiter(),
        MaxOfRateLimiter(BucketRateLimiter()),
        default_controller_rate_limiter(),
    ):
        assert isinstance(rl, RateLimiter)


def test_a_queue_made_directly_retries_each_key_at_its_own_backoff() -> None:
    """``Queue()`` is controller-runtime's priority queue, whose default limiter is per-item
    backoff alone, as a controller's is. Before, it also shared one bucket of 10 retries a
    second (burst 100) across every key: after 300 retries of one failing key, another
    key's first retry waited some 20 s."""
    q = Queue("mine")
    for _ in range(300):  # the retries of a key that keeps failing
        q.rate_limiter.when("failing")
    began = time.monotonic()
    q.add_rate_limited("fine")
    assert q.get(timeout=5.0) == "fine"
    assert time.monotonic() - began < 1.0
    q.done("fine")
    q.shut_down()


def test_a_queue_without_priorities_keeps_the_classic_default_and_its_bucket() -> None:
    """As client-go's classic rate-limited queue under controller-runtime's
    ``DefaultTypedControllerRateLimiter`` (a controller with ``use_priority_queue=False``)."""
    rl = Queue("classic", priorities=False).rate_limiter
    assert isinstance(rl, MaxOfRateLimiter)
    for _ in range(300):
        rl.when("failing")
    assert rl.when("fine") > 10.0
