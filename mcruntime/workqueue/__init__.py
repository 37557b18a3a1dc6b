"""Work queues for controllers: deduplicating, delaying, rate limited, fair across clusters.

A request queued while queued is merged; queued while a worker processes it, it
is processed once more afterwards; two workers never hold the same request.
With a ``fair_key`` (the cluster name) a noisy cluster cannot starve the others.
"""

from mcruntime._exports import publish
from mcruntime.workqueue._metrics import NoopQueueMetrics, QueueMetrics
from mcruntime.workqueue._queue import NOTHING, Queue, ShutDown
from mcruntime.workqueue._ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)

__all__ = [
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
