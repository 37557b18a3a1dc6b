"""The fleet under load: envtest API servers in processes of their own, seeding, and the writer.

The servers run as ``python -m mcruntime.envtest`` processes (at most
``per_process`` clusters each), so their CPU and memory never count as the
measured process's. The writer patches a timestamp annotation into objects
from the orchestrator's own threads and HTTP connections. The servers speak
HTTPS like real clusters (``tls=False``: plain HTTP, for a side-by-side figure).
"""

from __future__ import annotations

import base64
import os
import pathlib
import ssl
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3
import yaml

from tests.benchmarks.fleet._subject import ANNOTATION

__all__ = ["EnvFleet", "WriteStats", "NAMESPACE", "object_name"]

NAMESPACE = "default"
READY_TIMEOUT = 120.0
_MERGE_PATCH = "application/merge-patch+json"


def object_name(i: int) -> str:
    return f"obj-{i:05d}"


@dataclass
class _Target:
    name: str
    server: str
    headers: dict[str, str]


@dataclass
class WriteStats:
    """What the writer did: writes sent, failed, over how long, and the rate asked for."""

    sent: int
    errors: int
    seconds: float
    rate: float | None

    @property
    def achieved(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "target_rate": self.rate,
            "achieved_rate": round(self.achieved, 1),
        }


class EnvFleet:
    """``clusters`` envtest clusters served by ``ceil(clusters / per_process)`` processes."""

    def __init__(
        self,
        clusters: int,
        workdir: pathlib.Path,
        *,
        per_process: int = 100,
        history: int = 200000,
        tls: bool = True,
    ) -> None:
        self.clusters = clusters
        self.tls = tls
        self.workdir = workdir
        self.per_process = per_process
        self.history = history
        self.procs: list[subprocess.Popen[str]] = []
        self.kubeconfig = workdir / f"fleet-{clusters}.kubeconfig"
        self.names: list[str] = []
        self._doc: dict[str, Any] = {}
        self._targets: list[_Target] = []
        self._http = urllib3.PoolManager(num_pools=max(16, clusters + 4), maxsize=16, retries=False)

    def start(self) -> EnvFleet:
        self.workdir.mkdir(parents=True, exist_ok=True)
        parts: list[pathlib.Path] = []
        left, i = self.clusters, 0
        try:
            while left > 0:
                n = min(left, self.per_process)
                path = self.workdir / f"envtest-{self.clusters}-{i}.kubeconfig"
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "mcruntime.envtest",
                        "--clusters",
                        str(n),
                        "--kubeconfig",
                        str(path),
                        "--prefix",
                        f"e{i}",
                        "--history",
                        str(self.history),
                        *([] if self.tls else ["--plain-http"]),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
                self.procs.append(proc)
                parts.append(path)
                left -= n
                i += 1
            for proc in self.procs:
                _wait_ready(proc)
        except BaseException:
            self.close()
            raise
        self._merge(parts)
        return self

    def _merge(self, parts: list[pathlib.Path]) -> None:
        doc: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [],
            "users": [],
            "contexts": [],
        }
        for path in parts:
            part = yaml.safe_load(path.read_text())
            for section in ("clusters", "users", "contexts"):
                doc[section] += part[section]
        doc["current-context"] = doc["contexts"][0]["name"]
        fd = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(doc, f)
        self._doc = doc
        self.names = [c["name"] for c in doc["contexts"]]
        clusters = {c["name"]: c["cluster"] for c in doc["clusters"]}
        users = {u["name"]: u["user"] for u in doc["users"]}
        # each envtest process has its own CA: the writer trusts all of them
        cas = {
            c["certificate-authority-data"]
            for c in clusters.values()
            if "certificate-authority-data" in c
        }
        if cas:
            ctx = ssl.create_default_context()
            for ca in sorted(cas):
                ctx.load_verify_locations(cadata=base64.b64decode(ca).decode())
            self._http.clear()
            self._http = urllib3.PoolManager(
                num_pools=max(16, self.clusters + 4), maxsize=16, retries=False, ssl_context=ctx
            )
        for ctx in doc["contexts"]:
            spec = ctx["context"]
            token = users[spec["user"]].get("token")
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self._targets.append(_Target(ctx["name"], clusters[spec["cluster"]]["server"], headers))

    def single_kubeconfig(self, name: str, path: pathlib.Path) -> pathlib.Path:
        """A kubeconfig with only context ``name`` (current), for one-cluster tools such as kopf."""
        ctx = next(c for c in self._doc["contexts"] if c["name"] == name)
        spec = ctx["context"]
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [c for c in self._doc["clusters"] if c["name"] == spec["cluster"]],
            "users": [u for u in self._doc["users"] if u["name"] == spec["user"]],
            "contexts": [ctx],
            "current-context": name,
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(doc, f)
        return path

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        self.procs = []
        self._http.clear()

    def __enter__(self) -> EnvFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ---------------------------------------------------------------------

    def _request(
        self, t: _Target, method: str, path: str, body: Any, content_type: str | None = None
    ) -> int:
        headers = t.headers if content_type is None else {**t.headers, "Content-Type": content_type}
        resp = self._http.request(
            method,
            t.server + path,
            body=orjson.dumps(body),
            headers=headers,
            timeout=urllib3.Timeout(connect=10, read=60),
        )
        return int(resp.status)

    def seed(self, objects: int, *, threads: int = 8) -> float:
        """Create ``objects`` ConfigMaps in every cluster; returns the seconds it took."""
        t0 = time.monotonic()
        base = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        jobs = [(t, i) for t in self._targets for i in range(objects)]

        def create(job: tuple[_Target, int]) -> None:
            t, i = job
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": object_name(i),
                    "namespace": NAMESPACE,
                    "labels": {"app": "bench", "shard": str(i % 10)},
                },
                "data": {"index": str(i), "payload": "x" * 128},
            }
            status = self._request(t, "POST", base, body)
            if status not in (201, 409):
                raise RuntimeError(f"seeding {t.name}/{object_name(i)}: HTTP {status}")

        with ThreadPoolExecutor(threads, thread_name_prefix="bench/seed") as pool:
            list(pool.map(create, jobs))
        return time.monotonic() - t0

    def _write(self, i: int, objects: int) -> bool:
        t = self._targets[i % len(self._targets)]
        name = object_name((i // len(self._targets)) % objects)
        body = {"metadata": {"annotations": {ANNOTATION: f"{time.time():.6f}"}}}
        try:
            status = self._request(
                t, "PATCH", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}", body, _MERGE_PATCH
            )
        except urllib3.exceptions.HTTPError:
            return False
        return status == 200

    def write(self, rate: float, seconds: float, objects: int, *, threads: int = 8) -> WriteStats:
        """Open-loop writes at ``rate`` per second for ``seconds``, round-robin over the clusters.

        Write ``i`` is due at ``start + i / rate``; a writer that falls behind
        sends at once, so the rate achieved shows where the writer or the servers saturate.
        """
        total = max(1, int(rate * seconds))
        sent = [0] * threads
        errors = [0] * threads
        start = time.monotonic() + 0.05

        def run(k: int) -> None:
            for i in range(k, total, threads):
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                if self._write(i, objects):
                    sent[k] += 1
                else:
                    errors[k] += 1

        self._run_threads(run, threads)
        return WriteStats(sum(sent), sum(errors), time.monotonic() - start, rate)

    def flood(self, seconds: float, objects: int, *, threads: int = 8) -> WriteStats:
        """Writes as fast as ``threads`` writers can for ``seconds``."""
        sent = [0] * threads
        errors = [0] * threads
        start = time.monotonic()
        end = start + seconds

        def run(k: int) -> None:
            i = k
            while time.monotonic() < end:
                if self._write(i, objects):
                    sent[k] += 1
                else:
                    errors[k] += 1
                i += threads

        self._run_threads(run, threads)
        return WriteStats(sum(sent), sum(errors), time.monotonic() - start, None)

    @staticmethod
    def _run_threads(fn: Any, n: int) -> None:
        ts = [
            threading.Thread(target=fn, args=(k,), name=f"bench/writer-{k}", daemon=True)
            for k in range(n)
        ]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    result: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        result.append(proc.stdout.readline())

    reader = threading.Thread(target=read, name="bench/envtest-ready", daemon=True)
    reader.start()
    reader.join(READY_TIMEOUT)
    if not result or "serving" not in result[0]:
        raise RuntimeError(
            f"envtest process {proc.pid} did not become ready (exit code {proc.poll()})"
        )
