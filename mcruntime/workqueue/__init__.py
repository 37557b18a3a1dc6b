"""Work queues for controllers: deduplicating, delaying, rate limited, prioritised, fair across clusters.

A request queued while queued is merged; queued while a worker processes it, it
is processed once more afterwards; two workers never hold the same request.
With a ``fair_key`` (the cluster name) a noisy cluster cannot starve the others;
a request of a higher priority goes before those of lower ones
([`LOW_PRIORITY`][mcruntime.workqueue.LOW_PRIORITY] for what an initial list or a resync enqueues).
"""

from mcruntime._exports import publish
from mcruntime.workqueue._metrics import NoopQueueMetrics, QueueMetrics
from mcruntime.workqueue._queue import LOW_PRIORITY, NOTHING, Queue, ShutDown
from mcruntime.workqueue._ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)

__all__ = [
    "LOW_PRIORITY",
    "NOTHING",
    "Queue",
    "ShutDown",
    "RateLimiter",
    "ItemExponentialFailureRateLimiter",
    "BucketRateLimiter",
    "MaxOfRateLimiter",
    "default_controller_rate_limiter",
    "QueueMetrics",
    "NoopQueueMetrics",
]

publish(__name__, globals(), __all__)
