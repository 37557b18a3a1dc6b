"""60-second chaos soaks over 10 clusters hold every invariant (see docs/reliability.md): two
replicas with leader election, and two replicas sharding the clusters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("replication", ["leader-election", "sharded"])
def test_a_one_minute_soak_loses_no_event_and_leaks_nothing(
    tmp_path: Path, replication: str
) -> None:
    # its own process: the soak captures every log record at DEBUG and measures the process's RSS
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.soak",
            "--minutes",
            "1",
            "--seed",
            "16",
            "--out",
            str(tmp_path),
            *(["--sharded"] if replication == "sharded" else []),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=580,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] and report["violations"] == []
    assert report["events_lost"] == 0
    assert report["overlaps"] == 0
    assert report["secrets_in_logs"] == 0 and report["log_records_scanned"] > 0
    assert report["quiet_points"] >= 3
    assert report["faults_total"] >= 5, report["faults"]
    assert all(f["not_recovered"] == 0 for f in report["faults"].values()), report["faults"]
    assert report["writes_acknowledged"] > 0 and report["reconciles"] > 0
    assert (tmp_path / "report.md").read_text().startswith("# Soak run")
    replaced = "kill-shard-owner" if replication == "sharded" else "kill-leader"
    assert report["sharded"] == (replication == "sharded")
    assert report["faults"][replaced]["injected"] >= 1, report["faults"]
    if replication == "sharded":
        # clusters did move between the replicas (kills, and rebalancing as replacements joined)
        assert report["owner_changes"] >= 1
