from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mcruntime.controller import ControllerOptions

if TYPE_CHECKING:
    from mcruntime.cache import CacheOptions
    from mcruntime.manager.coordinator import Coordinator
    from mcruntime.webhook import WebhookServer

DEFAULT_ENGAGE_SYNC_TIMEOUT = 30.0
DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT = 30.0

#: the options that are a number of seconds, each > 0 (``graceful_shutdown_timeout`` >= 0)
_SECONDS = (
    "engage_sync_timeout",
    "cluster_health_interval",
    "cluster_health_timeout",
    "cluster_health_retry_interval",
    "graceful_shutdown_timeout",
    "lease_duration",
    "renew_deadline",
    "retry_period",
)


@dataclass
class ManagerOptions:
    """Everything a [`Manager`][mcruntime.Manager] can be told; every field has a working default."""

    #: defaults for every controller the builder builds (its own ``with_options`` override
    #: them); a ``Controller`` made by hand and given to ``add`` takes its options as given
    controller: ControllerOptions = field(default_factory=ControllerOptions)
    #: cache options of the local cluster and the default of every provider cluster
    #: built without its own (what to cache per kind, namespaces, selectors, transform)
    cache: CacheOptions | None = None
    #: how long an engagement waits for a cluster's caches before it retries (with backoff)
    engage_sync_timeout: float = DEFAULT_ENGAGE_SYNC_TIMEOUT
    #: at most this many clusters start and sync their caches at once (None: no bound).
    #: Joining clusters (TLS handshakes, discovery, lists) share the one GIL with the
    #: engaged ones' event handling: when hundreds join at once, the engaged clusters'
    #: events wait. A bound keeps their latency, and makes a mass join last longer
    #: when the API servers are far away (each joining cluster waits for round trips).
    max_concurrent_engagements: int | None = None
    #: keep the engaged clusters' long-lived objects out of CPython's full collections
    #: (``gc.freeze()`` once joins settle, ``gc.unfreeze()`` when a cluster leaves, and a full
    #: collection before the next freeze so what left is freed). A full
    #: collection stops every thread while it scans every tracked object: about 370 per
    #: engaged cluster, 100-300 ms at 1,000 clusters, and one follows a mass join. Process-
    #: wide, so off by default: cyclic garbage that is old when the manager freezes is
    #: freed only once a cluster leaves and the next joins settle, or the manager stops.
    freeze_gc: bool = False
    #: a cluster with no request answered this long (seconds) gets a health probe (``GET /readyz``)
    cluster_health_interval: float = 10.0
    #: deadline of one health probe (seconds); no answer marks the cluster unhealthy
    cluster_health_timeout: float = 5.0
    #: an unhealthy cluster is probed this often (seconds): how soon recovery is noticed
    cluster_health_retry_interval: float = 1.0
    #: upper bound for [`Manager.stop()`][mcruntime.manager.Manager.stop] to wait for runnables and workers;
    #: what still runs then makes ``run()`` (and a ``with mgr:`` block) raise
    #: [`GracePeriodExceeded`][mcruntime.errors.GracePeriodExceeded] (0: no wait, no error)
    graceful_shutdown_timeout: float = DEFAULT_GRACEFUL_SHUTDOWN_TIMEOUT
    #: leader election on a coordination.k8s.io/v1 Lease in the local cluster
    leader_election: bool = False
    leader_election_id: str = ""
    leader_election_namespace: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    #: decides which provider clusters this replica engages (None: all of them). A
    #: coordinator has ``bind(manager) -> Aware`` (what the provider engages with)
    #: and ``start(stop)`` (run by the manager in its own thread, on every replica).
    coordinator: Coordinator | None = None
    #: "host:port" for the Prometheus endpoint; None or "0" disables it. As Go's
    #: ``net.Listen``: ":8080" and "[::]:8080" listen on every address, IPv4 and IPv6;
    #: "0.0.0.0:8080" on every IPv4 address; "[::1]:8080" on IPv6 loopback
    metrics_bind_address: str | None = None
    #: "host:port" for /healthz and /readyz (read as ``metrics_bind_address``); None or
    #: "0" disables them
    health_probe_bind_address: str | None = None
    #: the webhook server (a [`WebhookServer`][mcruntime.webhook.WebhookServer]), served by the
    #: manager; None: one with default options is made by
    #: [`Manager.get_webhook_server`][mcruntime.manager.Manager.get_webhook_server] on first use
    webhook_server: WebhookServer | None = None
    #: serve the metrics endpoint over HTTPS (controller-runtime's ``SecureServing``): with
    #: ``metrics_cert_dir``, its ``tls.crt`` and ``tls.key`` (reloaded when they change, as
    #: cert-manager rotates them); without, a self-signed certificate made at start
    metrics_secure: bool = False
    metrics_cert_dir: str | None = None
    #: let only those the local cluster's RBAC allows read the metrics: every scrape's
    #: bearer token is reviewed by the local cluster (a TokenReview, then a
    #: SubjectAccessReview for ``get`` on the path), as controller-runtime's
    #: ``filters.WithAuthenticationAndAuthorization``; 401 or 403 otherwise. Needs
    #: ``metrics_secure`` and a local cluster whose credentials may create both reviews
    #: (the ``system:auth-delegator`` ClusterRole)
    metrics_auth: bool = False
    #: the field manager of every write through the clients of the local cluster and of each
    #: engaged cluster whose client has none (controller-runtime's ``client.Options.FieldOwner``):
    #: ``metadata.managedFields`` then name this program, not the User-Agent; a call's own
    #: ``field_manager=`` and a client's `with_field_manager()` win
    field_manager: str | None = None
    #: "host:port" for the debug pages (``/debug/threads``: every thread's stack;
    #: ``/debug/reconciles``: the reconciles running now and where each is), as
    #: controller-runtime's ``PprofBindAddress``; plain HTTP without authentication, so
    #: bind it to loopback ("127.0.0.1:8082") and reach it with ``kubectl port-forward``.
    #: None or "0" (the default) disables them
    debug_bind_address: str | None = None

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first option whose value is no valid number (NaN,
        infinite, negative, zero where it must be positive, a string), and the value.

        Called when the options are made and by [`Manager`][mcruntime.Manager] (for
        options changed since); a number read from the environment
        (``float(os.getenv(...))``) is refused at start, not met as a hang or a tight loop.
        """
        for name in _SECONDS:
            value = getattr(self, name)
            ok = (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
                and (value > 0 or (value == 0 and name == "graceful_shutdown_timeout"))
            )
            if not ok:
                wanted = "0 or more" if name == "graceful_shutdown_timeout" else "more than 0"
                raise ValueError(
                    f"ManagerOptions.{name} must be a number of seconds, {wanted}, got {value!r}"
                )
        limit = self.max_concurrent_engagements
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 1
        ):
            raise ValueError(
                "ManagerOptions.max_concurrent_engagements must be a whole number, at least "
                f"1 (None: no bound), got {limit!r}"
            )
