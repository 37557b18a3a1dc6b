"""60-second chaos soaks over 10 clusters and a hub hold every invariant (see
docs/reliability.md): two replicas with leader election, and two replicas sharding the clusters."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import pytest

ROOT = Path(__file__).resolve().parents[2]


REPLICATIONS = ("leader-election", "sharded")


@pytest.fixture(scope="module")
def soaks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Popen[str], Path]]]:
    """Both soaks, started at once: each is a minute of wall clock, mostly waiting (run one
    after the other, they took 158 s of the suite; together, 81 s). Each runs in its own
    process: the soak captures every log record at DEBUG and measures the process's RSS."""
    started: dict[str, tuple[Popen[str], Path]] = {}
    try:
        for replication in REPLICATIONS:
            out = tmp_path_factory.mktemp(f"soak-{replication}")
            log = (out / "output.txt").open("w")  # (a file, not a pipe nobody reads yet)
            proc = Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.soak",
                    "--minutes",
                    "1",
                    "--seed",
                    "16",
                    "--out",
                    str(out),
                    *(["--sharded"] if replication == "sharded" else []),
                ],
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
            log.close()  # (the child has its own copy)
            started[replication] = (proc, out)
        yield started
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("replication", REPLICATIONS)
def test_a_one_minute_soak_loses_no_event_and_leaks_nothing(
    soaks: dict[str, tuple[Popen[str], Path]], replication: str
) -> None:
    proc, tmp_path = soaks[replication]
    returncode = proc.wait(timeout=580)
    output = (tmp_path / "output.txt").read_text()
    assert returncode == 0, output[-8000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] and report["violations"] == []
    assert report["events_lost"] == 0
    assert report["overlaps"] == 0
    assert report["secrets_in_logs"] == 0 and report["log_records_scanned"] > 0
    assert report["quiet_points"] >= 3
    assert report["faults_total"] >= 5, report["faults"]
    assert all(f["not_recovered"] == 0 for f in report["faults"].values()), report["faults"]
    assert report["writes_acknowledged"] > 0 and report["reconciles"] > 0
    # the hub's sources: every member caught up at each quiet point and after each fault, no
    # two writes to one member at once, no request left waiting for a cluster
    assert report["copy_writes"] > 0
    assert report["copies_behind"] == 0
    assert report["copy_overlaps"] == 0
    assert report["requests_left_waiting"] == 0
    assert all(f["copy_recovery_not_recovered"] == 0 for f in report["faults"].values()), report[
        "faults"
    ]
    assert (tmp_path / "report.md").read_text().startswith("# Soak run")
    replaced = "kill-shard-owner" if replication == "sharded" else "kill-leader"
    assert report["sharded"] == (replication == "sharded")
    assert report["faults"][replaced]["injected"] >= 1, report["faults"]
    if replication == "sharded":
        # clusters did move between the replicas (kills, and rebalancing as replacements joined)
        assert report["owner_changes"] >= 1
