"""One manager replica for the sharding end-to-end test (run as its own process).

The ``file`` provider reads every cluster from ``--clusters`` (a kubeconfig),
the [`Sharded`][mcruntime.manager.coordinator.Sharded] coordinator keeps its Leases
on the ``--management`` server, and a ConfigMap reconciler appends one line per
reconcile to ``--log``: ``<replica> <cluster> <start> <end>`` (wall-clock
seconds). It runs until SIGTERM (clean stop) or SIGKILL.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.manager import Manager, ManagerOptions
from mcruntime.manager.coordinator import Sharded
from mcruntime.providers import file
from mcruntime.reconcile import Request, Result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--id", required=True)
    parser.add_argument("--management", required=True, help="kubeconfig of the management server")
    parser.add_argument("--clusters", required=True, help="kubeconfig with one context per cluster")
    parser.add_argument("--log", required=True, help="file the reconcile records are appended to")
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--renew", type=float, default=1.0)
    parser.add_argument("--probe", type=float, default=1.0)
    parser.add_argument("--requeue", type=float, default=0.25)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s {args.id} %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("mcruntime.cache", "mcruntime.controller", "mcruntime.cluster", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    provider = file.Provider(file.Options(paths=[args.clusters], interval=0.5))
    lease_cluster = Cluster.from_kubeconfig(args.management)
    coordinator = Sharded(
        lease_cluster,
        namespace="default",
        peer_id=args.id,
        lease_duration=args.lease,
        renew_period=args.renew,
        probe_interval=args.probe,
    )
    mgr = Manager(
        provider=provider,
        options=ManagerOptions(coordinator=coordinator, graceful_shutdown_timeout=10),
    )
    out = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def reconcile(req: Request) -> Result:
        start = time.time()
        cluster = mgr.get_cluster(req.cluster_name)
        cluster.client.get("v1/ConfigMap", req.name, req.namespace)
        name = req.cluster_name.rsplit("+", 1)[-1]
        os.write(out, f"{args.id} {name} {start:.6f} {time.time():.6f}\n".encode())
        return Result(requeue_after=args.requeue)

    mcruntime.controller_managed_by(mgr).named("configmaps").for_("v1/ConfigMap").complete(
        reconcile
    )
    try:
        mgr.run()
    finally:
        lease_cluster.stop()
        os.close(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
