"""The uniform reconciler: one reconciler for the ConfigMaps of every cluster in a fleet.

    python -m mcruntime.examples.configmaps                 # embedded fleet, no cluster needed
    python -m mcruntime.examples.configmaps --provider file --provider-option paths=~/.kube/config

With the ``embedded`` provider (the default) it also plays a scenario:
ConfigMaps are created over time, a fourth cluster joins and one leaves while
running, and it exits after ``--duration`` seconds (or on Ctrl-C).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from typing import Any

import mcruntime
from mcruntime import Request, Result
from mcruntime.cli import add_arguments, manager_from_args, setup_logging
from mcruntime.errors import MCRuntimeError, NotFound
from mcruntime.examples._demo import run_demo
from mcruntime.multicluster import display_name

log = logging.getLogger("configmaps")


def make_reconciler(mgr: mcruntime.Manager, out: Any = None) -> Any:
    """The reconciler: the same code for one cluster or a thousand (prints to ``out``, default stdout)."""

    def reconcile(req: Request) -> Result | None:
        nonlocal out
        out = out or sys.stdout
        cluster = mgr.get_cluster(req.cluster_name)
        try:
            cm = cluster.client.get("v1/ConfigMap", req.name, req.namespace)
        except NotFound:
            print(
                f"cluster={display_name(req.cluster_name)} configmap {req.key} is gone",
                file=out,
                flush=True,
            )
            return None
        keys = ",".join(sorted(cm.get("data") or {})) or "-"
        print(
            f"cluster={display_name(req.cluster_name)} reconciled configmap {req.key} (keys: {keys})",
            file=out,
            flush=True,
        )
        return None

    return reconcile


def build(mgr: mcruntime.Manager, out: Any = None) -> mcruntime.Controller:
    return (
        mcruntime.controller_managed_by(mgr)
        .named("configmaps")
        .for_("v1/ConfigMap")
        .complete(make_reconciler(mgr, out))
    )


def _wait_engaged(
    mgr: mcruntime.Manager, names: list[str], stop: threading.Event, timeout: float = 30
) -> bool:
    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline:
        if all(n in mgr.engaged_clusters() for n in names):
            return True
        stop.wait(0.05)
    return False


def scenario(mgr: mcruntime.Manager, provider: Any, duration: float, stop: threading.Event) -> None:
    """Writes ConfigMaps over time; a cluster joins at 40% of the run, one leaves at 70%."""
    names = list(provider.names())
    if not _wait_engaged(mgr, names, stop):
        log.error("clusters did not engage in time: %s", names)
        return
    start = time.monotonic()
    joined = left = False
    i = 0
    while not stop.wait(max(0.05, duration / 20)):
        elapsed = time.monotonic() - start
        if not joined and elapsed >= 0.4 * duration:
            joined = True
            new = f"{provider.options.prefix}-{len(names)}"
            log.info("scenario: cluster %s joins the fleet", new)
            provider.add_cluster(new)
            names.append(new)
            _wait_engaged(mgr, [new], stop)
        if not left and elapsed >= 0.7 * duration and len(names) > 1:
            left = True
            gone = names.pop(1)
            log.info("scenario: cluster %s leaves the fleet", gone)
            provider.remove_cluster(gone)
        name = names[i % len(names)]
        i += 1
        try:
            mgr.get_cluster(name).client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"generateName": "demo-", "namespace": "default"},
                    "data": {"written-at": f"{elapsed:.1f}s"},
                }
            )
        except MCRuntimeError as exc:
            log.warning("scenario: write to %s failed: %s", name, exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.examples.configmaps", description=__doc__.splitlines()[0]
    )
    add_arguments(parser, default_provider="embedded")
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: 12 on the embedded fleet, else run until Ctrl-C)",
    )
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    try:
        mgr = manager_from_args(args)
    except MCRuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    build(mgr)
    embedded = args.provider == "embedded"
    duration = args.duration if args.duration is not None else (12.0 if embedded else None)
    tasks = {}
    if embedded:
        provider = mgr.provider
        provider.start_fleet()
        tasks["scenario"] = lambda stop: scenario(mgr, provider, duration or 12.0, stop)
    return run_demo(mgr, duration=duration, tasks=tasks)


if __name__ == "__main__":
    sys.exit(main())
