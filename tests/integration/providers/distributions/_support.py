"""Helpers shared by the provider plugin tests: a recording Aware, polling, secrets, a ConfigMap manager."""

from __future__ import annotations

import base64
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import AlreadyExists, NotFound
from mcruntime.plugins import load_provider
from tests._silent import silent_server


class RecordingAware:
    """An Aware that records engagements and their ends: ``("engage"|"end", name, cluster)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, Cluster]] = []
        self.active: dict[str, Cluster] = {}
        self._lock = threading.Lock()

    def engage(self, cluster_name: str, cluster: Cluster, lifetime: threading.Event) -> None:
        with self._lock:
            self.events.append(("engage", cluster_name, cluster))
            self.active[cluster_name] = cluster

        def ended() -> None:
            with self._lock:
                self.events.append(("end", cluster_name, cluster))
                if self.active.get(cluster_name) is cluster:
                    del self.active[cluster_name]

        lifetime.add_callback(ended)  # type: ignore[attr-defined]

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self.active)

    def count(self, kind: str, name: str) -> int:
        with self._lock:
            return sum(1 for k, n, _ in self.events if k == kind and n == name)

    def cluster(self, name: str) -> Cluster | None:
        with self._lock:
            return self.active.get(name)


class Running:
    """A provider's ``start(aware, stop)`` on a thread of the test, stopped by `stop()`."""

    def __init__(self, provider: Any, aware: Any) -> None:
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

        def run() -> None:
            try:
                provider.start(aware, self.stop_event)
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run, name="test/provider", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "provider did not stop within 30s"


def b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def put_secret(
    cluster: Cluster,
    namespace: str,
    name: str,
    data: dict[str, str | bytes],
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Create or replace Secret ``namespace/name`` with ``data`` (encoded here) and ``labels``."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "data": {k: b64(v) for k, v in data.items()},
    }
    try:
        out: dict[str, Any] = cluster.client.create(body)
        return out
    except AlreadyExists:
        current = cluster.api_reader.get("v1/Secret", name, namespace)
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        out = cluster.client.update(body)
        return out


def delete_secret(cluster: Cluster, namespace: str, name: str) -> None:
    with contextlib.suppress(NotFound):
        cluster.client.delete("v1/Secret", name, namespace)


def ensure_namespace(cluster: Cluster, name: str) -> None:
    with contextlib.suppress(AlreadyExists):
        cluster.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def create_configmap(cluster: Cluster, namespace: str, name: str) -> None:
    cluster.client.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"k": "v"},
        }
    )


class ConfigMapManager:
    """A real Manager running a ConfigMap controller that records ``(cluster, namespace/name)``."""

    def __init__(self, provider: Any) -> None:
        import mcruntime
        from mcruntime.reconcile import Request

        self.seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.mgr = mcruntime.Manager(provider=provider)

        def reconcile(req: Request) -> None:
            with self._lock:
                self.seen.add((req.cluster_name, req.key))

        mcruntime.controller_managed_by(self.mgr).named("configmaps").for_("v1/ConfigMap").complete(
            reconcile
        )

    def saw(self, cluster: str, key: str) -> bool:
        with self._lock:
            return (cluster, key) in self.seen

    def engaged(self) -> list[str]:
        return sorted(self.mgr.engaged_clusters())


def stop_while_management_hangs(name: str, tmp_path: Path, **options: Any) -> Any:
    """Run provider ``name`` over a hung management cluster, stop it once its first call
    waits there, and check that it stopped at once; returns the provider."""
    with silent_server() as server:
        path = tmp_path / "management.yaml"
        path.write_text(yaml.safe_dump(server.kubeconfig()))
        provider = load_provider(name, kubeconfig=str(path), **options)
        run = Running(provider, RecordingAware())
        wait_for(lambda: server.accepted, what=f"the {name} provider's first call")
        run.stop_event.set()
        run.thread.join(2)
        assert not run.thread.is_alive(), f"the {name} provider waited for its call past its stop"
        assert run.error is None and provider.management.stopped
    return provider


def stop_while_callers_management_hangs(make: Callable[[Cluster], Any]) -> Any:
    """Run ``make(cluster)``, a provider over the caller's own cluster of a hung management
    server, stop it once its first call waits there, and check that it stopped at once and
    left the caller's cluster alone; returns the provider."""
    with silent_server() as server:
        callers = Cluster.from_kubeconfig(server.kubeconfig(), name="callers")
        try:
            provider = make(callers)
            run = Running(provider, RecordingAware())
            wait_for(lambda: server.accepted, what="the provider's first call")
            run.stop_event.set()
            run.thread.join(2)
            assert not run.thread.is_alive(), "the provider waited for its call past its stop"
            assert run.error is None and not callers.stopped
        finally:
            callers.stop()
    return provider


def grant(cluster: Cluster, name: str, rules: list[dict[str, Any]], service_account: str) -> None:
    """Give ServiceAccount ``"namespace/name"`` of ``cluster`` ClusterRole ``name`` with ``rules``
    (created, or replaced when it exists), bound cluster-wide."""
    namespace, _, account = service_account.partition("/")
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": rules,
    }
    try:
        cluster.client.create(role)
    except AlreadyExists:
        current = cluster.api_reader.get("rbac.authorization.k8s.io/v1/ClusterRole", name)
        role["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        cluster.client.update(role)
    with contextlib.suppress(AlreadyExists):
        cluster.client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": name,
                },
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            }
        )


#: what a provider reading Secrets needs
READ_SECRETS = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}


def check_refused_list_is_said_and_does_not_hold_start(
    provider: Any, run: Callable[[Any, Any], Running], allow: Callable[[], None], engaged: str
) -> None:
    """Run ``provider`` (its management credentials refused a list): it reports its initial
    clusters well before its 30 s bound, its ``discovery_error`` names the refusal, and once
    ``allow()`` grants the list, cluster ``engaged`` is engaged and the error is gone."""
    aware = RecordingAware()
    run(provider, aware)
    assert provider.wait_for_initial_clusters(10), "a refused list held start() up"
    error = provider.discovery_error
    assert error is not None and "forbidden" in error and "secrets" in error, error
    allow()
    wait_for(lambda: aware.names() == [engaged], timeout=30, what=f"{engaged} engaged")
    wait_for(lambda: provider.discovery_error is None, timeout=10, what="the error cleared")


def check_management_hang_is_said(
    make: Callable[[Cluster], Any], path: Any, monkeypatch: Any, caplog: Any
) -> None:
    """Run ``make(cluster)``, a provider over the management cluster behind ``path`` (an envtest
    `Proxy`), freeze the path once its first lists are in, and check that the hang is said
    once (naming the provider and the management cluster, ``hub``), that ``discovery_error``
    says it, and that both end at the thaw."""
    from mcruntime.multicluster import _management

    for name, value in (("HEALTH_INTERVAL", 1.0), ("HEALTH_TIMEOUT", 1.0), ("HEALTH_RETRY", 0.2)):
        monkeypatch.setattr(_management, name, value, raising=False)
    caplog.set_level(logging.INFO, logger="mcruntime.multicluster")

    def said(level: int, containing: str) -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "mcruntime.multicluster"
            and r.levelno == level
            and "management cluster: probing GET /readyz" in r.getMessage()
            and containing in r.getMessage()
        ]

    hub = Cluster.from_kubeconfig(path.kubeconfig(), name="hub")
    try:
        provider = make(hub)
        run = Running(provider, RecordingAware())
        try:
            assert provider.wait_for_initial_clusters(15), "the first lists are not in"
            assert provider.discovery_error is None, provider.discovery_error
            path.freeze()
            wait_for(lambda: said(logging.WARNING, "no answer"), timeout=8, what="the hang said")
            (line,) = said(logging.WARNING, "")
            assert line.startswith(f"cluster=hub provider={provider.provider_name} "), line
            error = wait_for(lambda: provider.discovery_error, timeout=5, what="discovery_error")
            assert "management cluster hub" in error and "no answer" in error, error
            path.thaw()
            wait_for(lambda: provider.discovery_error is None, timeout=8, what="the recovery")
            assert len(said(logging.INFO, "works again")) == 1
            assert len(said(logging.WARNING, "")) == 1
        finally:
            path.thaw()
            run.stop()
    finally:
        hub.stop()
