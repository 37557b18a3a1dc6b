"""A second SIGINT or SIGTERM while ``run()`` stops ends the process at once (controller-runtime's
signal handler), rather than after ``graceful_shutdown_timeout`` of a reconcile that hangs."""

from __future__ import annotations

import signal

import pytest

from tests._signal import signal_after

pytestmark = pytest.mark.timeout(60)

_RUN_WITH_A_HUNG_RECONCILE = """
import logging
import threading

import mcruntime
from mcruntime.envtest import APIServer

logging.basicConfig(level=logging.INFO)
srv = APIServer("local").start()
mgr = mcruntime.Manager(
    srv.kubeconfig(), options=mcruntime.ManagerOptions(graceful_shutdown_timeout=40.0)
)


def reconcile(req):
    if req.name == "kube-root-ca.crt" or req.namespace != "default":
        return
    print("reconciling", flush=True)
    threading.Event().wait()  # never ends


mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(reconcile)
writer = mcruntime.Cluster.from_kubeconfig(srv.kubeconfig())
writer.client.create(
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
)
writer.stop()
mgr.run()
print("stopped", flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_second_signal_while_stopping_exits_at_once(signum: int) -> None:
    # the first signal: the manager waits for the hung reconcile; the second ends the process
    ended = signal_after(
        _RUN_WITH_A_HUNG_RECONCILE,
        "reconciling",
        signum,
        timeout=20,
        again_after="waiting up to 40s for 1 in-flight reconcile",
    )
    assert ended.returncode == 1, ended.err[-2000:]
    assert "stopped" not in ended.out
    assert f"signal {signum.name} received again while stopping: exiting at once" in ended.err
    assert ended.took < 5.0, ended.err[-2000:]
