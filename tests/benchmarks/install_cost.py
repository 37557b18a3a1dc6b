"""``python -m tests.benchmarks.install_cost [-n N] [--install on|off]``: what the webhook
installer costs per engaged cluster (threads, RSS, file descriptors).

N embedded API servers run in a process of their own (``python -m mcruntime.envtest``),
each with a CRD of two versions; this process engages them all with a manager whose
webhook server has one validating hook and one converter, waits until every cluster is
installed, lets it settle, and prints the process's threads, RSS and open file
descriptors before and after. ``--install off`` is the same manager without
installation: the difference between the two runs is the installer's.
Figures are measured, never asserted on.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import yaml

import mcruntime
from mcruntime.client import Resource
from mcruntime.crd import CRDOptions, install_crds
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters
from mcruntime.webhook import AdmissionRequest, WebhookServer, WebhookServerOptions

GROUP = "bench.mcruntime.io"


class App(Resource):
    api_version: ClassVar[str] = f"{GROUP}/v2"
    kind: ClassVar[str] = "App"
    spec: dict[str, Any] = {}


class AppV1(Resource):
    api_version: ClassVar[str] = f"{GROUP}/v1"
    kind: ClassVar[str] = "App"
    crd_options: ClassVar[CRDOptions] = CRDOptions(storage=False)
    spec: dict[str, Any] = {}


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _snapshot() -> tuple[int, float, int]:
    gc.collect()
    return threading.active_count(), _rss_mib(), len(os.listdir("/proc/self/fd"))


def _same(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


def _allow(request: AdmissionRequest, obj: Any) -> None:
    return None


def run(n: int, install: bool, settle: float) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kubeconfig"
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcruntime.envtest", "--clusters", str(n)]
            + ["--kubeconfig", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # the servers are up once it writes a line
            wait_for(path.exists, timeout=120, what="the kubeconfig written")
            config = yaml.safe_load(path.read_text())
            names = [c["name"] for c in config["contexts"]]
            members = {}
            for name in names:
                member = mcruntime.Cluster.from_kubeconfig(
                    {**config, "current-context": name}, name=name
                )
                install_crds(member, [App, AppV1], timeout=30)
                members[name] = member
            provider = clusters.Provider()
            server = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, install=install))
            mgr = mcruntime.Manager(
                provider=provider, options=mcruntime.ManagerOptions(webhook_server=server)
            )
            mcruntime.webhook_managed_by(mgr).for_(App).with_converter(
                "v2", {"v1": (_same, _same)}
            ).with_validator(_allow).complete()
            with mgr:
                before = _snapshot()
                began = time.monotonic()
                for name in names:
                    provider.add(name, members[name])
                if install:
                    wait_for(
                        lambda: len(server.installed_clusters()) == n,
                        timeout=600,
                        interval=0.5,
                        what="every cluster installed",
                    )
                took = time.monotonic() - began
                time.sleep(settle)  # (a quiet period: what stays, not what the install used)
                after = _snapshot()
                kinds = collections.Counter(
                    re.sub(r"/cluster-?\d+/", "/<cluster>/", re.sub(r"_\d+$", "_<n>", t.name))
                    for t in threading.enumerate()
                )
        finally:
            proc.terminate()
            proc.wait(30)
    per = 1024 * (after[1] - before[1]) / n
    return (
        f"n={n} install={'on' if install else 'off'}: engaged in {took:.1f}s; "
        f"threads {before[0]} -> {after[0]}, RSS {before[1]:.1f} -> {after[1]:.1f} MiB "
        f"({per:.0f} KiB per cluster), fds {before[2]} -> {after[2]}\n"
        f"threads: {dict(kinds.most_common(8))}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.install_cost", description=__doc__.splitlines()[0]
    )
    parser.add_argument("-n", type=int, default=100, help="engaged clusters (default 100)")
    parser.add_argument("--install", choices=("on", "off"), default="on")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before measuring")
    args = parser.parse_args(argv)
    print(run(args.n, args.install == "on", args.settle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
