"""A Kind source started by a controller, against an embedded API server over HTTP."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

import mcruntime
from mcruntime import Manager, ManagerOptions, Request
from mcruntime import predicate as p
from tests._logs import logged

pytestmark = pytest.mark.timeout(30)


def _configmap(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
    }


def refuse_bad(obj: dict[str, Any]) -> bool:
    if obj["metadata"]["name"] == "bad":
        raise ValueError("no bad objects")
    return True


def test_a_failing_predicate_is_logged_naming_the_controller_source_predicate_and_object(
    envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The error line of a predicate that raises says which controller, source and predicate
    it was, and for which object (badinput #15: it named an ``_Adapter object at 0x...``)."""
    good = threading.Event()

    def reconcile(req: Request) -> None:
        if req.name == "good":
            good.set()

    mgr = Manager(envtest_server.kubeconfig(), options=ManagerOptions(graceful_shutdown_timeout=5))
    (
        mcruntime.controller_managed_by(mgr)
        .named("cms")
        .for_("v1/ConfigMap")
        .with_event_filter(p.from_func(refuse_bad))
        .complete(reconcile)
    )
    try:
        mgr.start()
        with caplog.at_level(logging.ERROR, logger="mcruntime.cache"):
            mgr.get_cluster("").client.create(_configmap("bad"))
            mgr.get_cluster("").client.create(_configmap("good"))
            assert good.wait(10)
    finally:
        mgr.stop(5.0)
    (line,) = logged(caplog, logging.ERROR, logger="mcruntime.cache")
    assert line.endswith(
        ": event handler <controller 'cms' source Kind('v1/ConfigMap'): predicates "
        "from_func(refuse_bad); handler EnqueueRequestForObject> failed in on_add for default/bad"
    )
