"""The micro-benchmarks run in quick mode and print their figures (measured, never asserted on)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(
    r"^\| (?P<name>[^|]+) \| (?P<value>[\d,]+) \w+/s \| [^|]+ \| (?P<base>[\d,]+) \w+/s \| (?P<ratio>\d+\.\d+) \|$"
)


@pytest.mark.timeout(90)
def test_quick_benchmarks_print_a_figure_and_a_ratio_per_row() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=80,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {m["name"]: m for line in out.stdout.splitlines() if (m := ROW.match(line))}
    assert set(rows) == {
        "informer list -> handler",
        "informer watch -> handler",
        "queue + 4 workers + no-op reconciler",
        "webhook admission, 1 client",
        "webhook admission, 4 clients",
        "async reconciler writes, 12 workers, 0.05s latency",
        "kubeconfig context -> Configuration",
        "GET with an expiring exec credential",
        "kubeconfig context -> Configuration, 400 more env variables",
        "GET with an expiring exec credential, 400 more env variables",
        "context of a 1,000-context kubeconfig dict -> Configuration",
        "metrics scrape, 100 clusters",
        "informer list of Secrets, metadata only",
    }, out.stdout
    assert "KiB held per Secret" in out.stdout, out.stdout
    for m in rows.values():
        assert int(m["value"].replace(",", "")) > 0 and int(m["base"].replace(",", "")) > 0
        assert float(m["ratio"]) > 0
