"""The uniform reconciler: one reconciler for the ConfigMaps of every cluster in a fleet.

    python -m mcruntime.examples.configmaps                 # embedded fleet, no cluster needed
    python -m mcruntime.examples.configmaps --provider file --provider-option paths=~/.kube/config

With the ``embedded`` provider (the default) it also plays a scenario:
ConfigMaps are created over time, a fourth cluster joins and one leaves while
running, and it exits after ``--duration`` seconds (or on Ctrl-C).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

import mcruntime
from mcruntime import Request, Result
from mcruntime.errors import MCRuntimeError, NotFound
from mcruntime.examples._demo import main_on_fleet, wait_engaged
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


def scenario(mgr: mcruntime.Manager, provider: Any, duration: float, stop: threading.Event) -> None:
    """Writes ConfigMaps over time; a cluster joins at 40% of the run, one leaves at 70%."""
    names = list(provider.names())
    if not wait_engaged(mgr, names, stop):
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
            wait_engaged(mgr, [new], stop)
        if not left and elapsed >= 0.7 * duration and len(names) > 1:
            left = True
            gone = names.pop(1)
            log.info("scenario: cluster %s leaves the fleet", gone)
            provider.remove_cluster(gone)
        if not names:  # --provider-option clusters=0: nothing to write to until one joins
            continue
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
    return main_on_fleet(
        argv,
        prog="mcruntime.examples.configmaps",
        doc=__doc__ or "",
        build=build,
        scenario=scenario,
        default_duration=12.0,
    )


if __name__ == "__main__":
    sys.exit(main())
