"""Admission webhooks for a whole fleet: defaults and validation of a custom resource in every cluster.

    python -m mcruntime.examples.webhooks             # an embedded fleet of 3 clusters

One webhook server (HTTPS, certificates generated at start) serves every
cluster of the fleet. The manager installs a Mutating and a Validating
WebhookConfiguration in each cluster as it joins, each pointing at that
cluster's own URL (``/clusters/<name>/...``), and removes them when it leaves.
A ``Widget`` (``example.mcruntime.io/v1``, installed here) gets
``spec.replicas: 1`` and a label naming its cluster when created without
them, and one asking for more than ``MAX_REPLICAS`` replicas is refused with
a message the API server shows. The scenario writes a good and a bad Widget
to every cluster, prints what the API servers answered, and exits (``--stay``
keeps serving until Ctrl-C).
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from typing import Any, ClassVar

import mcruntime
from mcruntime.client import Model, Resource
from mcruntime.crd import install_crds
from mcruntime.errors import MCRuntimeError
from mcruntime.examples._demo import run_demo, say
from mcruntime.providers import embedded
from mcruntime.webhook import AdmissionRequest, Denied, WebhookServer, WebhookServerOptions

__all__ = [
    "CRD",
    "MAX_REPLICAS",
    "Widget",
    "WidgetValidator",
    "build",
    "default_widget",
    "install_crd",
    "main",
]

log = logging.getLogger("webhooks")

GROUP = "example.mcruntime.io"
MAX_REPLICAS = 5
CLUSTER_LABEL = f"{GROUP}/cluster"


class WidgetSpec(Model):
    replicas: int | None = None
    color: str = "blue"


class Widget(Resource):
    """The typed view the webhooks see."""

    api_version: ClassVar[str] = f"{GROUP}/v1"
    kind: ClassVar[str] = "Widget"
    spec: WidgetSpec = WidgetSpec()


CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


def default_widget(request: AdmissionRequest, widget: Widget) -> None:
    """The defaulter: one replica, and a label naming the cluster the Widget lives in."""
    if widget.spec.replicas is None:
        widget.spec.replicas = 1
    labels = dict(widget.metadata.labels or {})
    labels.setdefault(CLUSTER_LABEL, request.cluster_name)
    widget.metadata.labels = labels


class WidgetValidator:
    """The validator: at most ``MAX_REPLICAS`` replicas; a warning for red Widgets."""

    def _check(self, request: AdmissionRequest, widget: Widget) -> list[str]:
        replicas = widget.spec.replicas or 0
        if replicas > MAX_REPLICAS:
            raise Denied(
                f"spec.replicas: {replicas} is more than {MAX_REPLICAS} "
                f"(cluster {request.cluster_name})",
                code=422,
                reason="Invalid",
            )
        return ["red widgets fade in the sun"] if widget.spec.color == "red" else []

    def validate_create(self, request: AdmissionRequest, obj: Widget) -> list[str]:
        return self._check(request, obj)

    def validate_update(self, request: AdmissionRequest, old: Widget, new: Widget) -> list[str]:
        return self._check(request, new)

    def validate_delete(self, request: AdmissionRequest, obj: Widget) -> None:
        return None


def build(mgr: mcruntime.Manager) -> list[str]:
    """Register the Widget webhooks with the manager's webhook server."""
    return (
        mcruntime.webhook_managed_by(mgr)
        .for_(Widget)
        .with_defaulter(default_widget)
        .with_validator(WidgetValidator())
        .complete()
    )


def install_crd(cluster: mcruntime.Cluster) -> None:
    """Install the Widget CRD in a cluster before the manager engages it (the embedded
    provider's ``prepare``): the webhooks are installed for a kind the cluster serves
    (else retried, with a warning)."""
    install_crds(cluster.uncached_client, [CRD])


def scenario(mgr: mcruntime.Manager, names: list[str], stop: threading.Event) -> None:
    """In every cluster: wait for the webhooks, write a good and a bad Widget."""
    server = mgr.get_webhook_server()
    deadline = time.monotonic() + 30
    while set(server.installed_clusters()) < set(names) and not stop.is_set():
        if time.monotonic() > deadline:
            say(f"webhooks not installed in time (installed: {server.installed_clusters()})")
            return
        stop.wait(0.05)
    for name in names:
        if stop.is_set():  # (a Ctrl-C)
            return
        client = mgr.get_cluster(name).client
        good = Widget.from_dict({"metadata": {"name": "good", "namespace": "default"}})
        made = client.create(good)
        say(
            f"cluster={name} widget good created: replicas={made.spec.replicas} "
            f"label={(made.metadata.labels or {}).get(CLUSTER_LABEL)}"
        )
        bad = Widget.from_dict(
            {"metadata": {"name": "bad", "namespace": "default"}, "spec": {"replicas": 50}}
        )
        try:
            client.create(bad)
            say(f"cluster={name} widget bad created (unexpected)")
        except MCRuntimeError as exc:
            if stop.is_set():  # not refused: its cluster left, or its webhook server stopped
                return
            say(f"cluster={name} widget bad refused: {getattr(exc, 'message', exc)}")
    say(f"state: webhooks installed in: {', '.join(server.installed_clusters())}")


def _play(mgr: mcruntime.Manager, names: list[str], stop: threading.Event, stay: bool) -> None:
    try:
        scenario(mgr, names, stop)
    finally:
        if not stay:
            mgr.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.examples.webhooks", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--clusters", type=int, default=3, help="embedded clusters (default 3)")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds at most (default: when the scenario ends, "
        "with --stay at Ctrl-C)",
    )
    parser.add_argument(
        "--stay", action="store_true", help="keep serving after the scenario (until Ctrl-C)"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    provider = embedded.Provider(embedded.Options(clusters=args.clusters), prepare=install_crd)
    names = list(provider.fleet.names)
    server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=True))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(webhook_server=server)
    )
    build(mgr)
    return run_demo(
        mgr,
        duration=args.duration,
        tasks={"scenario": lambda stop: _play(mgr, names, stop, args.stay)},
        cleanup=provider.close,
    )


if __name__ == "__main__":
    raise SystemExit(main())
