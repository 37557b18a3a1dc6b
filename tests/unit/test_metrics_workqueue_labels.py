"""Every work-queue series carries ``controller`` beside ``name``, as controller-runtime's since
v0.19: a dashboard that groups or joins by ``controller`` reads the same here."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from mcruntime.metrics import Metrics
from mcruntime.workqueue import Queue


def test_every_workqueue_series_has_a_controller_label_equal_to_its_name() -> None:
    m = Metrics()
    queue = Queue("cms", fair_key=lambda item: item.split("/")[0], metrics=m.queue_metrics("cms"))
    m.register_queue("cms", queue)
    queue.add("eu-1/a")
    queue.add("eu-1/b")
    item = queue.get()  # in flight: unfinished work and the longest processor are served
    queue.add_after("eu-1/c", 0.0)
    families = {f.name: f for f in text_string_to_metric_families(m.exposition().decode())}
    names = [n for n in families if n.startswith("workqueue_")]
    assert sorted(names) == [
        "workqueue_adds",
        "workqueue_depth",
        "workqueue_longest_running_processor_seconds",
        "workqueue_queue_duration_seconds",
        "workqueue_retries",
        "workqueue_unfinished_work_seconds",
        "workqueue_work_duration_seconds",
    ]
    for n in names:
        for sample in families[n].samples:
            assert sample.labels.get("controller") == sample.labels["name"] == "cms", sample
    queue.done(item)
