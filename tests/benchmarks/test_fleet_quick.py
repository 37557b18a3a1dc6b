"""The fleet benchmark's quick mode runs end to end, so the suite never rots between full runs."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import platform
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.timeout(150)
def test_quick_fleet_benchmark_prints_every_table_and_writes_the_json(
    tmp_path: pathlib.Path,
) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "tests.benchmarks.fleet", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for heading in (
        "Initial sync",
        "Footprint after sync",
        "Write-to-handler latency",
        "Throughput under a flood",
        "One cluster frozen",
        "Saturation",
        "Churn at scale",
        "Churn (one cluster",
        "Per engaged cluster",
        "Targets",
    ):
        assert heading in proc.stdout, f"{heading!r} missing from the printed tables"

    results = json.loads((out / "results.json").read_text())
    assert (out / "results.md").read_text().strip()
    assert results["mode"] == "quick"
    assert [s["clusters"] for s in results["sizes"]] == [c for c, _ in results["plan"]["sizes"]]
    for size in results["sizes"]:
        for subject in ("mcruntime", "bare", "handrolled"):
            fig = size[subject]
            assert "error" not in fig, (
                f"{subject} at {size['clusters']} clusters: {fig.get('error')}"
            )
            assert fig["sync_s"] > 0 and fig["rss"] > 0
            for rate in results["plan"]["rates"]:
                assert fig["latency"][str(rate)]["n"] > 0
            assert fig["throughput"]["per_s"] > 0
            assert fig["throughput"]["writes"]["processes"] == results["plan"]["writer_procs"]
            assert fig["saturation"]["per_s"] > 0
            assert fig["saturation"]["per_cpu_s"] > 0
            if size["clusters"] > 1:
                assert fig["frozen"]["n"] > 0, f"{subject}: no write to a healthy cluster handled"
        assert size["mcruntime"]["threads_per_cluster"] >= 1
        assert "rss" in size["kopf"] or "skipped" in size["kopf"]
    for ratios in results["ratios"].values():
        assert ratios["sync_vs_bare"] is not None

    churn = results["churn"]
    assert len(churn["series"]) == results["plan"]["churn_cycles"]
    assert churn["leftover_threads"] == [], "a removed cluster left threads behind"
    assert churn["end"]["threads"] == churn["start"]["threads"], churn.get("threads_gained")
    fc = results["fleet_churn"]
    assert fc["add"]["synced"], "the added clusters never synced"
    assert fc["remove"]["leftover_threads"] == [], "removed clusters left threads behind"
    assert fc["stat_engaged"]["threads"] > fc["stat_before"]["threads"]
    assert fc["stat_after"]["threads"] <= fc["stat_before"]["threads"]
    if platform.libc_ver()[0] == "glibc":  # RSS once the allocator gave back its free pages
        assert fc["stat_after_trimmed"]["rss"] > 0
    assert len(fc["repeats"]) == results["plan"]["fleet_churn_cycles"] - 1
    for cycle in fc["repeats"]:
        assert cycle["leftover_threads"] == []
        assert cycle["stat"]["threads"] <= fc["stat_before"]["threads"]
    assert fc["before"]["n"] > 0 and fc["during_add"]["n"] > 0 and fc["during_remove"]["n"] > 0
    # the baseline: the bare client starting to watch the same clusters under the same writes
    assert fc["bare"]["add"]["synced"] and fc["bare"]["during_add"]["n"] > 0
    # the control: the same clusters joining another process, the machine's share of the move
    assert fc["control"]["before"]["n"] > 0 and fc["control"]["during_add"]["n"] > 0
    assert results["estimated_seconds"] > 0
    assert results["reference"]["go_multicluster_runtime_mib_per_cluster"] == 14.0
    assert {t["target"].split()[0] for t in results["targets"]} >= {"initial", "p99", "total"}

    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "latency.png").stat().st_size > 0
        assert (out / "memory.png").stat().st_size > 0
        assert (out / "sync.png").stat().st_size > 0
