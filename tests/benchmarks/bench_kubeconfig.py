"""A cluster's configuration from a kubeconfig context, and a request with an expiring credential,
beside the ``kubernetes`` package's own loader (measured in the same run).

Both sides load the same context into a ``Configuration``. The ``kubernetes``
``Configuration`` reads the proxy environment when built and again each time
its ``host`` is set: by the loader, and, with a credential that expires (an
exec plugin's ``expirationTimestamp``), by the refresh hook before every
request. mcruntime reads it once per configuration. Each read decodes the
whole environment, so the rows run with the machine's environment and with
400 more variables, as a pod in a namespace of many services has (one
``*_SERVICE_*``/``*_PORT_*`` set per service).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes.client import ApiClient, Configuration
from kubernetes.config.kube_config import KubeConfigLoader

from mcruntime import Cluster
from mcruntime._kubeconfig import load_config
from mcruntime.client import RESTClient
from tests.benchmarks._common import Row, best_rate, envtest_process, quick_main

POD_VARIABLES = 400


@contextmanager
def _service_variables(n: int) -> Iterator[None]:
    """``n`` more environment variables, like the service links of a pod."""
    names = [f"MCRUNTIME_BENCH_SVC{i}_SERVICE_PORT" for i in range(n)]
    for name in names:
        os.environ[name] = "8080"
    try:
        yield
    finally:
        for name in names:
            del os.environ[name]


def _kubernetes_config(kubeconfig: dict[str, Any]) -> Configuration:
    """What ``kubernetes.config.load_kube_config`` does for one context."""
    cfg = Configuration()
    KubeConfigLoader(config_dict=copy.deepcopy(kubeconfig)).load_and_set(cfg)
    return cfg


def _exec_credential(kubeconfig: dict[str, Any], plugin_dir: str) -> dict[str, Any]:
    """``kubeconfig`` with its token handed out by an exec plugin, with an expiry."""
    token = kubeconfig["users"][0]["user"]["token"]
    plugin = Path(plugin_dir) / "credential.py"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token, "expirationTimestamp": "2099-01-01T00:00:00Z"},
    }
    plugin.write_text(f"print({json.dumps(json.dumps(credential))})\n")
    doc = copy.deepcopy(kubeconfig)
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": [str(plugin)],
            "interactiveMode": "Never",
        }
    }
    return doc


FLEET_CONTEXTS = 1000


def _fleet_doc(kubeconfig: dict[str, Any], n: int) -> dict[str, Any]:
    """``kubeconfig``'s one context as ``n`` contexts of one document, each with its own
    cluster and user (the shape of a fleet's merged kubeconfig)."""
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": []}
    doc["contexts"] = []
    for i in range(n):
        cluster = copy.deepcopy(kubeconfig["clusters"][0])
        user = copy.deepcopy(kubeconfig["users"][0])
        cluster["name"], user["name"] = f"cluster-{i}", f"user-{i}"
        doc["clusters"].append(cluster)
        doc["users"].append(user)
        doc["contexts"].append(
            {"name": f"ctx-{i}", "context": {"cluster": f"cluster-{i}", "user": f"user-{i}"}}
        )
    doc["current-context"] = "ctx-0"
    return doc


def _each_context(n: int, load: Callable[[str], object]) -> Callable[[], float]:
    """Seconds to load ``n`` contexts in turn (every one once, as a provider adding a fleet)."""

    def measure() -> float:
        began = time.perf_counter()
        for i in range(n):
            load(f"ctx-{i % FLEET_CONTEXTS}")
        return time.perf_counter() - began

    return measure


def _kubernetes_context(doc: dict[str, Any], context: str) -> Configuration:
    """The ``kubernetes`` loader on one context of a big document (no copy of the document)."""
    cfg = Configuration()
    KubeConfigLoader(config_dict=doc, active_context=context).load_and_set(cfg)
    return cfg


def _timed(n: int, fn: Callable[[], object]) -> Callable[[], float]:
    def measure() -> float:
        began = time.perf_counter()
        for _ in range(n):
            fn()
        return time.perf_counter() - began

    return measure


def run(quick: bool = False) -> list[Row]:
    loads, requests, runs = (50, 50, 1) if quick else (1000, 1000, 5)
    rows: list[Row] = []
    with envtest_process(history=100) as kubeconfig, tempfile.TemporaryDirectory() as tmp:
        exec_doc = _exec_credential(kubeconfig, tmp)
        ours = Cluster.from_kubeconfig(exec_doc, name="bench").rest
        theirs = RESTClient(ApiClient(_kubernetes_config(exec_doc)), cluster_name="bench")
        for extra, label in ((0, ""), (POD_VARIABLES, f", {POD_VARIABLES} more env variables")):
            with _service_variables(extra):
                rows.append(
                    Row(
                        f"kubeconfig context -> Configuration{label}",
                        "loads",
                        best_rate(
                            loads, runs, _timed(loads, lambda: load_config(config_dict=kubeconfig))
                        ),
                        "kubernetes KubeConfigLoader",
                        best_rate(
                            loads, runs, _timed(loads, lambda: _kubernetes_config(kubeconfig))
                        ),
                    )
                )
                rows.append(
                    Row(
                        f"GET with an expiring exec credential{label}",
                        "requests",
                        best_rate(
                            requests,
                            runs,
                            _timed(requests, lambda: ours.request("GET", "/version")),
                        ),
                        "kubernetes Configuration, same client",
                        best_rate(
                            requests,
                            runs,
                            _timed(requests, lambda: theirs.request("GET", "/version")),
                        ),
                    )
                )
        fleet = _fleet_doc(kubeconfig, FLEET_CONTEXTS)
        rows.append(
            Row(
                f"context of a {FLEET_CONTEXTS:,}-context kubeconfig dict -> Configuration",
                "loads",
                best_rate(
                    loads,
                    runs,
                    _each_context(loads, lambda c: load_config(config_dict=fleet, context=c)),
                ),
                "kubernetes KubeConfigLoader",
                best_rate(
                    loads, runs, _each_context(loads, lambda c: _kubernetes_context(fleet, c))
                ),
            )
        )
        ours.close()
        theirs.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    return quick_main(run, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
