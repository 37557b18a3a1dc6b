"""The fault figures (hung cluster detection, p99 with one cluster frozen, leader overlap) run and print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| (?P<name>[^|]+) \| (?P<value>[-+]?[\d.]+|nan) (?P<unit>s|ms) \|")


@pytest.mark.timeout(120)
def test_quick_fault_figures_print_each_figure() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.faults", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rows = {m["name"]: m for line in out.stdout.splitlines() if (m := ROW.match(line))}
    assert len(rows) == 4, out.stdout
    assert all(m["value"] != "nan" for m in rows.values()), out.stdout
