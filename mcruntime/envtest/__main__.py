"""``python -m mcruntime.envtest``: run a fleet of API servers until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from mcruntime.envtest._fleet import Fleet


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.envtest",
        description="Run embedded Kubernetes API servers and write a kubeconfig for them.",
    )
    parser.add_argument("--clusters", type=int, default=1, help="number of clusters (default 1)")
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument("--prefix", default="cluster", help="cluster name prefix (default cluster)")
    parser.add_argument(
        "--history",
        type=int,
        default=10000,
        help="watch events kept per cluster for resuming (default 10000)",
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds added to every request (default 0)"
    )
    parser.add_argument(
        "--auth",
        choices=("token", "certificate"),
        default="token",
        help="credentials the kubeconfig carries: a bearer token or a client certificate "
        "(default token)",
    )
    parser.add_argument(
        "--plain-http",
        action="store_true",
        help="serve plain HTTP instead of HTTPS (kubectl sends no token over plain HTTP)",
    )
    args = parser.parse_args(argv)
    if args.plain_http and args.auth == "certificate":
        parser.error("--auth certificate needs TLS: drop --plain-http")
    if args.clusters < 1:
        parser.error("--clusters must be at least 1")
    if args.history < 1:
        parser.error("--history must be at least 1")
    if args.latency < 0:
        parser.error("--latency must not be negative")

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fleet = Fleet(
        args.clusters,
        prefix=args.prefix,
        history=args.history,
        latency=args.latency,
        tls=not args.plain_http,
        root_ca_configmap=True,
    )
    fleet.start()
    try:
        path = fleet.write_kubeconfig(args.kubeconfig, auth=args.auth)
        print(f"envtest: serving {len(fleet)} clusters, kubeconfig at {path}", flush=True)
        print(f"envtest: kubectl --kubeconfig {path} get ns", flush=True)
        if len(fleet) > 1:
            print(
                f"envtest: other clusters: kubectl --kubeconfig {path} --context "
                f"{fleet.names[1]} get ns (contexts: {', '.join(fleet.names)})",
                flush=True,
            )
        while not stop.wait(0.5):
            pass
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
