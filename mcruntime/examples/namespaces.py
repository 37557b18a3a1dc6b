"""Namespaces as clusters: every namespace of one cluster is a cluster of the fleet.

    python -m mcruntime.examples.namespaces                  # embedded API server, no cluster needed
    python -m mcruntime.examples.namespaces --kubeconfig ~/.kube/config \\
        --provider-option label_selector=tenant

The ``namespace`` provider engages each namespace of the host cluster as a
cluster named after it: its cache holds that namespace only and its client
refuses the others. The reconciler is the one a real multi-cluster program
would use on whole clusters; it prints one line per reconcile naming the
cluster and marks each ConfigMap with the annotation
``example.mcruntime.io/cluster`` through the cluster's own (confined) client.

Without ``--kubeconfig``/``--context`` the host is an embedded API server
started here and a scenario plays on it: namespaces and ConfigMaps appear over
time, one namespace is deleted (its cluster leaves), the engaged clusters are
printed, and it exits after ``--duration`` seconds (or on Ctrl-C).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import mcruntime
from mcruntime import Request, Result
from mcruntime.cli import add_arguments, parse_provider_options, setup_logging
from mcruntime.errors import MCRuntimeError, NotFound
from mcruntime.examples._demo import run_demo, say
from mcruntime.plugins import load_provider

__all__ = ["ANNOTATION", "build", "main", "make_reconciler"]

log = logging.getLogger("namespaces")

CONFIGMAP = "v1/ConfigMap"
#: set on every ConfigMap to the name of the cluster (= namespace) that reconciled it
ANNOTATION = "example.mcruntime.io/cluster"


def make_reconciler(mgr: mcruntime.Manager, out: Any = None) -> Any:
    """The reconciler: written for clusters, run here on namespaces."""

    def reconcile(req: Request) -> Result | None:
        cluster = mgr.get_cluster(req.cluster_name)
        try:
            cm = cluster.client.get(CONFIGMAP, req.name, req.namespace)
        except NotFound:
            say(f"cluster={req.cluster_name} configmap {req.key} is gone", out)
            return None
        keys = ",".join(sorted(cm.get("data") or {})) or "-"
        say(f"cluster={req.cluster_name} reconciled configmap {req.key} (keys: {keys})", out)
        if ((cm.get("metadata") or {}).get("annotations") or {}).get(
            ANNOTATION
        ) != req.cluster_name:
            patch = {"metadata": {"annotations": {ANNOTATION: req.cluster_name}}}
            cluster.client.patch(CONFIGMAP, req.name, patch, req.namespace)
        return None

    return reconcile


def build(mgr: mcruntime.Manager, out: Any = None) -> mcruntime.Controller:
    return (
        mcruntime.controller_managed_by(mgr)
        .named("namespaced-configmaps")
        .for_(CONFIGMAP)
        .complete(make_reconciler(mgr, out))
    )


# -- the demo scenario ----------------------------------------------------------------


def _namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"tenant": name}},
    }


def _configmap(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def scenario(
    mgr: mcruntime.Manager, host: Any, duration: float, stop: threading.Event, out: Any = None
) -> None:
    """Namespaces and ConfigMaps appear over time; team-b is deleted; the engaged clusters are printed."""
    start = time.monotonic()
    steps: list[tuple[float, str, list[dict[str, Any]]]] = [
        (
            0.0,
            "namespace team-a with ConfigMap settings",
            [_namespace("team-a"), _configmap("team-a", "settings", color="blue")],
        ),
        (
            0.15,
            "namespace team-b with ConfigMap settings",
            [_namespace("team-b"), _configmap("team-b", "settings", color="red")],
        ),
        (0.3, "ConfigMap features in team-a", [_configmap("team-a", "features", beta="on")]),
        (
            0.45,
            "namespace team-c with ConfigMap settings",
            [_namespace("team-c"), _configmap("team-c", "settings", size="xl")],
        ),
    ]
    try:
        for at, what, objects in steps:
            if stop.wait(max(0.0, start + at * duration - time.monotonic())):
                return
            log.info("scenario: %s", what)
            for obj in objects:
                if obj["kind"] == "ConfigMap":
                    _wait_engaged(mgr, obj["metadata"]["namespace"], stop)
                host.client.create(obj)
        if stop.wait(max(0.0, start + 0.65 * duration - time.monotonic())):
            return
        log.info("scenario: deleting namespace team-b (its cluster leaves)")
        host.client.delete("v1/Namespace", "team-b")
        if stop.wait(max(0.0, start + 0.85 * duration - time.monotonic())):
            return
        say(f"state: engaged clusters: {', '.join(mgr.engaged_clusters())}", out)
    except MCRuntimeError as exc:
        if not stop.is_set():
            log.warning("scenario step failed: %s", exc)


def _wait_engaged(
    mgr: mcruntime.Manager, name: str, stop: threading.Event, timeout: float = 10
) -> None:
    deadline = time.monotonic() + timeout
    while (
        name not in mgr.engaged_clusters() and time.monotonic() < deadline and not stop.wait(0.05)
    ):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.examples.namespaces", description=__doc__.splitlines()[0]
    )
    add_arguments(parser, default_provider="namespace")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: 10 on the embedded server, else until Ctrl-C)",
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    if args.provider != "namespace":
        print(
            "error: this example shows the 'namespace' provider; see mcruntime.examples.configmaps "
            "for any other",
            file=sys.stderr,
        )
        return 2
    from mcruntime.cluster import Cluster
    from mcruntime.envtest import APIServer

    server: APIServer | None = None
    tmp = tempfile.TemporaryDirectory(prefix="mcruntime-namespaces-")
    try:
        options = parse_provider_options(args.provider_option, provider="namespace")
        if args.kubeconfig or args.context:
            options.update(kubeconfig=args.kubeconfig, context=args.context)
        elif "kubeconfig" not in options:
            server = APIServer("host").start()
            options["kubeconfig"] = str(server.write_kubeconfig(Path(tmp.name) / "host.yaml"))
        provider = load_provider("namespace", **options)
        mgr = mcruntime.Manager(provider=provider)
    except MCRuntimeError as exc:
        if server is not None:
            server.close()
        tmp.cleanup()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    build(mgr)
    duration = (
        args.duration if args.duration is not None else (10.0 if server is not None else None)
    )
    tasks = {}
    host: Cluster | None = None
    if server is not None:
        host = Cluster.from_kubeconfig(server.kubeconfig(), name="scenario")
        scenario_host = host
        tasks["scenario"] = lambda stop: scenario(mgr, scenario_host, duration or 10.0, stop)

    def cleanup() -> None:
        if host is not None:
            host.stop()
        if server is not None:
            server.close()
        tmp.cleanup()

    return run_demo(mgr, duration=duration, tasks=tasks, cleanup=cleanup)


if __name__ == "__main__":
    sys.exit(main())
