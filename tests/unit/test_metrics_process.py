"""A manager serves the process's own metrics, as controller-runtime serves its process and Go
runtime collectors: the CPU and memory panels and alerts of a controller's dashboard use them."""

from __future__ import annotations

import sys

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from mcruntime.metrics import Metrics


def families(m: Metrics) -> dict[str, float]:
    """The first sample of each family, by family name."""
    return {
        f.name: f.samples[0].value
        for f in text_string_to_metric_families(m.exposition().decode())
        if f.samples
    }


@pytest.mark.skipif(sys.platform != "linux", reason="process metrics are read from /proc")
def test_process_and_python_runtime_metrics_are_served() -> None:
    served = families(Metrics())
    assert served["process_resident_memory_bytes"] > 0
    assert served["process_cpu_seconds"] > 0  # (the family of process_cpu_seconds_total)
    assert served["process_open_fds"] > 0
    assert served["process_start_time_seconds"] > 0
    assert "python_info" in served
    assert "python_gc_collections" in served


def test_two_managers_in_one_process_each_serve_them() -> None:
    # each manager's registry is its own: no collector is registered twice in one
    assert "python_info" in families(Metrics())
    assert "python_info" in families(Metrics())


def test_a_registry_given_gets_no_second_process_collector() -> None:
    # the caller's registry may have them already (prometheus_client's REGISTRY has)
    m = Metrics(CollectorRegistry())
    assert "python_info" not in families(m)
