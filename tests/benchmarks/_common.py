"""Shared pieces of the micro-benchmarks: result rows, the markdown table, an envtest server process."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Row:
    """One measurement beside its baseline, both in ``unit`` per second."""

    name: str
    unit: str
    value: float
    baseline_name: str
    baseline: float

    @property
    def ratio(self) -> float:
        return self.value / self.baseline if self.baseline else float("nan")


def table(rows: list[Row]) -> str:
    """The rows as a markdown table."""
    lines = [
        "| benchmark | mcruntime | baseline | baseline rate | ratio |",
        "|---|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.value:,.0f} {r.unit}/s | {r.baseline_name} | "
            f"{r.baseline:,.0f} {r.unit}/s | {r.ratio:.2f} |"
        )
    return "\n".join(lines)


def quick_main(run: Callable[..., list[Row]], doc: str, argv: list[str] | None = None) -> int:
    """The ``main`` of a micro-benchmark whose one option is ``--quick``: print its table."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    print(table(run(quick=args.quick)))
    return 0


def best_rate(count: int, runs: int, measure: Callable[[], float]) -> float:
    """``count`` divided by the shortest of ``runs`` timings of ``measure`` (seconds)."""
    return count / min(measure() for _ in range(max(1, runs)))


@contextmanager
def envtest_process(history: int) -> Iterator[dict[str, Any]]:
    """An embedded API server in a process of its own (so it does not share our GIL); yields its kubeconfig."""
    with tempfile.TemporaryDirectory(prefix="mcruntime-bench-") as tmp:
        path = Path(tmp) / "kubeconfig"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mcruntime.envtest",
                "--kubeconfig",
                str(path),
                "--history",
                str(history),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if "serving" not in line:
                raise RuntimeError(f"envtest server did not start: {line!r}")
            yield yaml.safe_load(path.read_text())
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
