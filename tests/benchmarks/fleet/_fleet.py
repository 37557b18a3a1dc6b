"""The fleet under load: envtest API servers in processes of their own, seeding, and the writers.

The servers run as ``python -m tests.benchmarks.fleet._envserver`` processes (at
most ``per_process`` clusters each), so their CPU and memory never count as the
measured process's; each takes control commands on its stdin (seed in-process,
freeze and thaw a named cluster). The writer patches a timestamp annotation into
objects, from the orchestrator's own threads and HTTP connections or (to offer
more than one process can send) from several writer processes
(``python -m tests.benchmarks.fleet._writer``) at once. The servers speak HTTPS
like real clusters (``tls=False``: plain HTTP, for a side-by-side figure).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pathlib
import resource
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

from tests.benchmarks.fleet._objects import ANNOTATION, NAMESPACE, configmap, object_name

__all__ = [
    "EnvFleet",
    "Writer",
    "WriterPool",
    "WriteStats",
    "NAMESPACE",
    "object_name",
    "raise_fd_limit",
]

READY_TIMEOUT = 120.0
_MERGE_PATCH = "application/merge-patch+json"
ROOT = pathlib.Path(__file__).resolve().parents[3]


def raise_fd_limit() -> int:
    """Raise this process's soft limit of open files to the hard limit (children inherit it).

    1,000 clusters mean thousands of sockets: the subject's watches and pooled
    connections, and the writers' pools. Returns the soft limit now in force.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft


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
    processes: int = 1

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
            "processes": self.processes,
        }

    @staticmethod
    def merge(parts: list[WriteStats], rate: float | None) -> WriteStats:
        """The stats of writers that ran side by side: sums over the longest of their windows."""
        return WriteStats(
            sum(p.sent for p in parts),
            sum(p.errors for p in parts),
            max((p.seconds for p in parts), default=0.0),
            rate,
            len(parts),
        )


class Writer:
    """Patches the timestamp annotation into the ConfigMaps of the clusters of a kubeconfig.

    Write ``i`` goes to cluster ``i % clusters``, object ``(i // clusters) % objects``;
    ``offset``/``stride`` let several writer processes share one sequence.
    """

    def __init__(self, doc: dict[str, Any], names: list[str] | None = None) -> None:
        clusters = {c["name"]: c["cluster"] for c in doc["clusters"]}
        users = {u["name"]: u["user"] for u in doc["users"]}
        # each envtest process has its own CA: the writer trusts all of them
        cas = {
            c["certificate-authority-data"]
            for c in clusters.values()
            if "certificate-authority-data" in c
        }
        ctx: ssl.SSLContext | None = None
        if cas:
            ctx = ssl.create_default_context()
            for ca in sorted(cas):
                ctx.load_verify_locations(cadata=base64.b64decode(ca).decode())
        wanted = set(names) if names is not None else None
        self.targets: list[_Target] = []
        for c in doc["contexts"]:
            if wanted is not None and c["name"] not in wanted:
                continue
            spec = c["context"]
            token = users[spec["user"]].get("token")
            headers = {"Content-Type": "application/json", "Accept": "application/json"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            self.targets.append(_Target(c["name"], clusters[spec["cluster"]]["server"], headers))
        self._http = urllib3.PoolManager(
            num_pools=max(16, len(self.targets) + 4), maxsize=16, retries=False, ssl_context=ctx
        )

    def close(self) -> None:
        self._http.clear()

    def warm(self, *, threads: int = 8) -> float:
        """Open a connection to every cluster (a GET each), so no measured write pays for a
        TCP and TLS handshake; returns the seconds it took."""
        t0 = time.monotonic()

        def get(t: _Target) -> None:
            with contextlib.suppress(urllib3.exceptions.HTTPError):
                self._http.request(
                    "GET",
                    f"{t.server}/api/v1/namespaces/{NAMESPACE}/configmaps?limit=1",
                    headers=t.headers,
                    timeout=urllib3.Timeout(connect=10, read=60),
                )

        with ThreadPoolExecutor(threads, thread_name_prefix="bench/warm") as pool:
            list(pool.map(get, self.targets))
        return time.monotonic() - t0

    def request(
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

    def _write(self, i: int, objects: int) -> bool:
        t = self.targets[i % len(self.targets)]
        name = object_name((i // len(self.targets)) % objects)
        body = {"metadata": {"annotations": {ANNOTATION: f"{time.time():.6f}"}}}
        try:
            status = self.request(
                t, "PATCH", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name}", body, _MERGE_PATCH
            )
        except urllib3.exceptions.HTTPError:
            return False
        return status == 200

    def write(
        self,
        rate: float,
        seconds: float,
        objects: int,
        *,
        threads: int = 8,
        offset: int = 0,
        stride: int = 1,
        start_at: float | None = None,
        stop: threading.Event | None = None,
    ) -> WriteStats:
        """Open-loop writes at ``rate`` per second (all strides together) for ``seconds``.

        Write ``i`` is due at ``start + i / rate``; a writer that falls behind
        sends at once, so the rate achieved shows where the writer or the servers
        saturate. This writer sends the writes ``offset, offset + stride, ...``;
        ``start_at`` is a ``time.time()`` (so processes agree); ``stop`` ends early.
        """
        total = max(1, int(rate * seconds))
        sent = [0] * threads
        errors = [0] * threads
        start = time.monotonic() + (
            max(0.0, start_at - time.time()) if start_at is not None else 0.05
        )

        def run(k: int) -> None:
            for i in range(offset + k * stride, total, stride * threads):
                if stop is not None and stop.is_set():
                    return
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    if stop is not None:
                        if stop.wait(delay):
                            return
                    else:
                        time.sleep(delay)
                if self._write(i, objects):
                    sent[k] += 1
                else:
                    errors[k] += 1

        _run_threads(run, threads)
        return WriteStats(sum(sent), sum(errors), time.monotonic() - start, rate)

    def flood(
        self,
        seconds: float,
        objects: int,
        *,
        threads: int = 8,
        offset: int = 0,
        stride: int = 1,
        start_at: float | None = None,
    ) -> WriteStats:
        """Writes as fast as ``threads`` writers can for ``seconds`` (from ``start_at``, a ``time.time()``)."""
        sent = [0] * threads
        errors = [0] * threads
        if start_at is not None and start_at > time.time():
            time.sleep(start_at - time.time())
        start = time.monotonic()
        end = start + seconds

        def run(k: int) -> None:
            i = offset + k * stride
            while time.monotonic() < end:
                if self._write(i, objects):
                    sent[k] += 1
                else:
                    errors[k] += 1
                i += stride * threads

        _run_threads(run, threads)
        return WriteStats(sum(sent), sum(errors), time.monotonic() - start, None)


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
        #: seconds until every envtest process served, and to connect the writer to every cluster
        self.start_s = 0.0
        self.warm_s = 0.0
        self._owner: dict[str, subprocess.Popen[str]] = {}
        self._doc: dict[str, Any] = {}
        self._writer: Writer | None = None
        self._pool: WriterPool | None = None

    def start(self) -> EnvFleet:
        t0 = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        raise_fd_limit()
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
                        "tests.benchmarks.fleet._envserver",
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
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    cwd=ROOT,
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
        self.start_s = time.monotonic() - t0
        self.warm_s = self.writer.warm()
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
        for path, proc in zip(parts, self.procs, strict=True):
            part = yaml.safe_load(path.read_text())
            for section in ("clusters", "users", "contexts"):
                doc[section] += part[section]
            for c in part["contexts"]:
                self._owner[c["name"]] = proc
        doc["current-context"] = doc["contexts"][0]["name"]
        fd = os.open(self.kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(doc, f)
        self._doc = doc
        self.names = [c["name"] for c in doc["contexts"]]
        self._writer = Writer(doc)

    @property
    def writer(self) -> Writer:
        """The in-process writer over every cluster."""
        assert self._writer is not None, "EnvFleet not started"
        return self._writer

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
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        _end(self.procs, 15)  # end of input: the servers close and exit
        self.procs = []
        if self._writer is not None:
            self._writer.close()

    def __enter__(self) -> EnvFleet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- control ----------------------------------------------------------------------

    @staticmethod
    def _control(proc: subprocess.Popen[str], timeout: float = 600, **cmd: Any) -> dict[str, Any]:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(cmd) + "\n")
        proc.stdin.flush()
        answer = _readline(proc, timeout)
        if not answer:
            raise RuntimeError(f"envtest process {proc.pid} gave no answer to {cmd}")
        got: dict[str, Any] = json.loads(answer)
        if "error" in got:
            raise RuntimeError(f"envtest process {proc.pid}: {got['error']}")
        return got

    def freeze(self, name: str) -> None:
        """Hang cluster ``name`` (`APIServer.freeze()` inside its envtest process)."""
        self._control(self._owner[name], op="freeze", name=name)

    def thaw(self, name: str) -> None:
        """Let cluster ``name`` answer again."""
        self._control(self._owner[name], op="thaw", name=name)

    # -- requests ---------------------------------------------------------------------

    def seed(self, objects: int) -> float:
        """Create ``objects`` ConfigMaps in every cluster, inside the envtest processes (all at
        once); returns the seconds it took."""
        t0 = time.monotonic()
        with ThreadPoolExecutor(max(1, len(self.procs)), thread_name_prefix="bench/seed") as pool:
            list(pool.map(lambda p: self._control(p, op="seed", objects=objects), self.procs))
        return time.monotonic() - t0

    def seed_over_http(self, objects: int, *, threads: int = 8) -> float:
        """Create ``objects`` ConfigMaps in every cluster with POSTs; returns the seconds it took."""
        t0 = time.monotonic()
        base = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        jobs = [(t, i) for t in self.writer.targets for i in range(objects)]

        def create(job: tuple[_Target, int]) -> None:
            t, i = job
            status = self.writer.request(t, "POST", base, configmap(i))
            if status not in (201, 409):
                raise RuntimeError(f"seeding {t.name}/{object_name(i)}: HTTP {status}")

        with ThreadPoolExecutor(threads, thread_name_prefix="bench/seed") as pool:
            list(pool.map(create, jobs))
        return time.monotonic() - t0

    def inject(
        self, rate: float | None, seconds: float, objects: int, start_at: float | None = None
    ) -> WriteStats:
        """Every envtest process patches its own clusters' objects (no HTTP), together ``rate``
        per second (shared by their numbers of clusters) or as fast as each can (``None``),
        from ``start_at`` (a ``time.time()``; default: in 0.2 s)."""
        start_at = time.time() + 0.2 if start_at is None else start_at
        share = {p: 0 for p in self.procs}
        for p in self._owner.values():
            share[p] += 1

        def one(p: subprocess.Popen[str]) -> WriteStats:
            r = None if rate is None else rate * share[p] / len(self._owner)
            got = self._control(
                p,
                timeout=seconds + 180,
                op="inject",
                seconds=seconds,
                objects=objects,
                rate=r,
                start_at=start_at,
            )
            return WriteStats(got["sent"], got["errors"], got["seconds"], r)

        with ThreadPoolExecutor(max(1, len(self.procs)), thread_name_prefix="bench/inject") as pool:
            parts = list(pool.map(one, self.procs))
        return WriteStats.merge(parts, rate)

    def write(self, rate: float, seconds: float, objects: int, *, threads: int = 8) -> WriteStats:
        """Open-loop writes at ``rate`` per second for ``seconds``, round-robin over the clusters."""
        return self.writer.write(rate, seconds, objects, threads=threads)

    def flood(
        self, seconds: float, objects: int, *, threads: int = 8, processes: int = 1
    ) -> WriteStats:
        """Writes as fast as ``processes`` writer processes of ``threads`` threads each can."""
        if processes <= 1:
            return self.writer.flood(seconds, objects, threads=threads)
        if self._pool is None or len(self._pool.procs) != processes:
            if self._pool is not None:
                self._pool.close()
            self._pool = WriterPool(self.kubeconfig, processes)
        return self._pool.run(mode="flood", seconds=seconds, objects=objects, threads=threads)


class WriterPool:
    """Writer processes (``python -m tests.benchmarks.fleet._writer``), each with its own
    connections, kept for the life of a fleet and run side by side on one shared write
    sequence: together they offer more writes than one Python process can send."""

    def __init__(
        self, kubeconfig: pathlib.Path, processes: int, names: list[str] | None = None
    ) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
        self.procs: list[subprocess.Popen[str]] = []
        try:
            for _ in range(processes):
                proc = subprocess.Popen(
                    [sys.executable, "-m", "tests.benchmarks.fleet._writer"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    cwd=ROOT,
                    env=env,
                )
                self.procs.append(proc)
                self._send(proc, {"kubeconfig": str(kubeconfig), "names": names})
            for proc in self.procs:  # "ready" once its imports are done
                if "ready" not in _readline(proc, 120):
                    raise RuntimeError(f"writer process {proc.pid} did not start")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _send(proc: subprocess.Popen[str], msg: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()

    def run(
        self,
        *,
        mode: str,
        seconds: float,
        objects: int,
        threads: int,
        rate: float | None = None,
    ) -> WriteStats:
        """``mode`` ``"flood"`` (as fast as they can) or ``"rate"`` (open loop at ``rate``, all
        processes together) for ``seconds``, starting together."""
        start_at = time.time() + 0.1
        for k, proc in enumerate(self.procs):
            self._send(
                proc,
                {
                    "mode": mode,
                    "seconds": seconds,
                    "objects": objects,
                    "threads": threads,
                    "rate": rate,
                    "offset": k,
                    "stride": len(self.procs),
                    "start_at": start_at,
                },
            )
        parts = []
        for proc in self.procs:
            got = json.loads(_readline(proc, seconds + 120) or "{}")
            if "sent" not in got:
                raise RuntimeError(f"writer process {proc.pid} failed")
            parts.append(WriteStats(got["sent"], got["errors"], got["seconds"], rate))
        return WriteStats.merge(parts, rate)

    def close(self) -> None:
        _end(self.procs, 10)  # end of input: the writers exit
        self.procs = []


def _end(procs: list[subprocess.Popen[str]], grace: float) -> None:
    """Close the processes' stdin (their end of input), wait ``grace`` seconds for them to
    exit, then terminate and at last kill the ones still running."""
    for proc in procs:
        if proc.poll() is None and proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
    for proc in procs:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _run_threads(fn: Any, n: int) -> None:
    ts = [
        threading.Thread(target=fn, args=(k,), name=f"bench/writer-{k}", daemon=True)
        for k in range(n)
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    """One line of ``proc``'s stdout, or ``""`` after ``timeout`` seconds or at its end."""
    assert proc.stdout is not None
    result: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        result.append(proc.stdout.readline())

    reader = threading.Thread(target=read, name="bench/readline", daemon=True)
    reader.start()
    reader.join(timeout)
    return result[0] if result else ""


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    line = _readline(proc, READY_TIMEOUT)
    if "serving" not in line:
        raise RuntimeError(
            f"envtest process {proc.pid} did not become ready (exit code {proc.poll()})"
        )
