"""What a user's type checker sees of the calls that passed keywords on (``**options``) or took a
cluster as ``Any``: checked by ``mypy`` and ``pyright`` (strict; see pyproject.toml), never run.

Correct calls pass; each ``# type: ignore[...]`` marks a mistake the signatures must report
(a misspelled keyword, a wrong value), and fails as unused when they take ``Any`` again.
"""

from __future__ import annotations

from mcruntime.cache import CacheOptions
from mcruntime.cluster import Cluster
from mcruntime.leaderelection import LeaderElector, LeaseClient
from mcruntime.webhook import AdmissionRequest, AdmissionResponse, WebhookServer, allowed


def clusters(opts: CacheOptions) -> None:
    Cluster.from_kubeconfig("/etc/kubeconfig", cache_options=opts, uncached=["v1/Secret"])
    Cluster.in_cluster("local", uncached=["v1/Secret"])
    Cluster.from_kubeconfig("/etc/kubeconfig", cache_option=opts)  # type: ignore[call-arg]
    Cluster.in_cluster(cache_options=42)  # type: ignore[arg-type]


def webhooks(server: WebhookServer) -> None:
    def handle(request: AdmissionRequest) -> AdmissionResponse:
        return allowed()

    server.register("/mutate-pods", handle, mutating=True, rules=[], timeout_seconds=5)
    server.register("/mutate-x", handle, mutatin=True)  # type: ignore[call-arg]
    server.register("/mutate-y", handle, timeout_seconds="5")  # type: ignore[arg-type]
    server.register("/mutate-z", "handle")  # type: ignore[arg-type]


def leases(cluster: Cluster) -> None:
    LeaderElector(cluster, name="widgets", namespace="kube-system")
    LeaseClient(cluster.rest, "kube-system")
    LeaderElector("cluster", name="widgets", namespace="kube-system")  # type: ignore[arg-type]
    LeaseClient(42, "kube-system")  # type: ignore[arg-type]
