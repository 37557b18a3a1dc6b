"""``Metrics.collector()``: a manager's metrics served on an application's own registry (a web
application that serves prometheus_client's ``REGISTRY`` at its ``/metrics``).

Before, the manager's registry could not join another: it carries the process's and the
interpreter's metrics, which that registry has already (``Duplicated timeseries``), and the
manager offered nothing else but its own endpoint on a port of its own."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, ProcessCollector, generate_latest

from mcruntime.metrics import Metrics


def _application_registry() -> CollectorRegistry:
    """Like prometheus_client's ``REGISTRY``: the process's metrics, and the application's."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    Counter("app_requests_total", "Requests the application served", registry=registry)
    return registry


def test_a_managers_metrics_join_an_applications_registry_and_are_served_there() -> None:
    metrics = Metrics()
    metrics.reconciled("copies", "eu-1", "success", 0.02)
    Counter("myctl_copies_total", "Objects copied", registry=metrics.registry).inc()
    app = _application_registry()
    app.register(metrics.collector())
    labels = {"controller": "copies", "cluster": "eu-1", "result": "success"}
    assert app.get_sample_value("controller_runtime_reconcile_total", labels) == 1.0
    assert app.get_sample_value("myctl_copies_total") == 1.0  # registered on the manager's
    text = generate_latest(app).decode()
    # one process_* family (the application's), and no _created series of the manager's
    assert text.count("# TYPE process_start_time_seconds gauge") == 1
    assert "controller_runtime_reconcile_total_created" not in text


def test_a_second_managers_collector_is_refused_until_the_first_is_unregistered() -> None:
    app = _application_registry()
    first = Metrics().collector()
    app.register(first)
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        app.register(Metrics().collector())  # a notebook cell that made the manager again
    app.unregister(first)
    app.register(Metrics().collector())
