"""The kopf baseline: one ``kopf run --standalone`` operator process per cluster (kopf is single-cluster).

Each operator has a no-op ``@kopf.on.event`` handler for ConfigMaps (no state
kept in annotations, no finalizers) that writes a file once it has seen every
object of its cluster. Figures: time from launch to the last operator synced,
each operator's startup-to-synced time, and total RSS/PSS of all processes.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import time
from typing import Any

from tests.benchmarks.fleet._fleet import EnvFleet
from tests.benchmarks.fleet._procstat import proc_stat, pss_bytes

__all__ = ["kopf_available", "run_kopf"]

OPERATOR = """\
import os, time
import kopf

EXPECT = int(os.environ["BENCH_EXPECT"])
DONE = os.environ["BENCH_DONE"]
seen = set()
written = False

@kopf.on.startup()
def started(settings, **_):
    settings.posting.enabled = False
    with open(DONE + ".started", "w") as f:
        f.write(repr(time.time()))

@kopf.on.event("configmaps")
def handle(name, namespace, **_):
    global written
    if not name.startswith("obj-"):  # only the seeded objects (not kube-root-ca.crt)
        return
    seen.add((namespace, name))
    if not written and len(seen) >= EXPECT:
        written = True
        with open(DONE + ".tmp", "w") as f:
            f.write(repr(time.time()))
        os.replace(DONE + ".tmp", DONE)
"""


def kopf_available() -> bool:
    return importlib.util.find_spec("kopf") is not None and shutil.which("kopf") is not None


def _read_float(path: pathlib.Path) -> float | None:
    try:
        return float(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def run_kopf(
    fleet: EnvFleet, objects: int, workdir: pathlib.Path, *, timeout: float = 600
) -> dict[str, Any]:
    """Run one kopf operator per cluster of ``fleet`` until all have seen every object, then stop them."""
    workdir.mkdir(parents=True, exist_ok=True)
    op = workdir / "operator.py"
    op.write_text(OPERATOR)
    kopf_bin = shutil.which("kopf") or "kopf"
    procs: list[tuple[subprocess.Popen[bytes], pathlib.Path]] = []
    launched = time.time()
    try:
        for name in fleet.names:
            kc = fleet.single_kubeconfig(name, workdir / f"{name}.kubeconfig")
            done = workdir / f"{name}.done"
            for p in (done, pathlib.Path(str(done) + ".started")):
                p.unlink(missing_ok=True)
            env = {
                **os.environ,
                "KUBECONFIG": str(kc),
                "BENCH_EXPECT": str(objects),
                "BENCH_DONE": str(done),
            }
            proc = subprocess.Popen(
                [kopf_bin, "run", "--standalone", "--all-namespaces", "--quiet", str(op)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=workdir,
            )
            procs.append((proc, done))
        deadline = time.monotonic() + timeout
        pending = list(procs)
        while pending and time.monotonic() < deadline:
            pending = [(p, d) for p, d in pending if not d.exists() and p.poll() is None]
            if pending:
                time.sleep(0.1)
        dead = [p.pid for p, _ in procs if p.poll() is not None]
        synced = [_read_float(d) for _, d in procs]
        started = [_read_float(pathlib.Path(str(d) + ".started")) for _, d in procs]
        ok = all(s is not None for s in synced) and not dead
        per_process = sorted(
            s - b for s, b in zip(synced, started, strict=True) if s is not None and b is not None
        )
        time.sleep(1.0)  # let every operator settle past its first burst before sampling memory
        stats = [proc_stat(p.pid) for p, _ in procs]
        return {
            "processes": len(procs),
            "synced": ok,
            "exited_early": len(dead),
            "sync_s": (max(s for s in synced if s is not None) - launched) if ok else None,
            "per_process_sync_s_median": per_process[len(per_process) // 2]
            if per_process
            else None,
            "rss": sum(s["rss"] for s in stats),
            "peak_rss": sum(s["peak_rss"] for s in stats),
            "pss": sum(pss_bytes(p.pid) for p, _ in procs),
            "threads": sum(s["threads"] for s in stats),
            "rss_per_process": (sum(s["rss"] for s in stats) / len(stats)) if stats else 0,
        }
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
