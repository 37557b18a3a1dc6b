"""``python -m mcruntime.examples.configmaps`` end to end, as a user runs it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


@pytest.mark.timeout(60)
def test_the_configmaps_example_reconciles_every_cluster_and_handles_a_join_and_a_leave() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcruntime.examples.configmaps", "--duration", "4"],
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    reconciled = set(re.findall(r"^cluster=(\S+) reconciled configmap ", proc.stdout, re.MULTILINE))
    assert reconciled >= {"cluster-0", "cluster-1", "cluster-2", "cluster-3"}, proc.stdout
    assert re.search(r"cluster cluster-3 joins", proc.stderr), proc.stderr[-3000:]
    left = re.search(r"cluster (cluster-\d) leaves", proc.stderr)
    assert left, proc.stderr[-3000:]
    assert re.search(rf"cluster={left.group(1)} disengaged", proc.stderr)
    assert "Traceback" not in proc.stderr
    assert not re.search(r"^\S+ (ERROR|WARNING) ", proc.stderr, re.MULTILINE), proc.stderr[-3000:]


@pytest.mark.timeout(60)
def test_the_configmaps_example_starts_with_an_empty_fleet_and_serves_the_cluster_that_joins() -> (
    None
):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcruntime.examples.configmaps",
            "--provider-option",
            "clusters=0",
            "--duration",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert re.search(r"cluster cluster-0 joins", proc.stderr), proc.stderr[-3000:]
    assert re.search(r"^cluster=cluster-0 reconciled configmap ", proc.stdout, re.MULTILINE)
