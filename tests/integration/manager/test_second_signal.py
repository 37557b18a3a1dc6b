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


#: the logging cookbook's set-up for services whose loop must not block on log I/O: records
#: go through a queue to a listener thread, here writing to stderr through a slow sink
_QUEUE_LOGGING = """
import logging
import logging.handlers
import queue
import sys
import time


class SlowSink(logging.StreamHandler):
    def emit(self, record):
        time.sleep(0.02)  # a sink slower than the records come (a remote collector)
        super().emit(record)


records = queue.Queue()
sink = SlowSink(sys.stderr)
sink.setFormatter(logging.Formatter("queued %(levelname)s %(name)s: %(message)s"))
logging.handlers.QueueListener(records, sink).start()
logging.getLogger().addHandler(logging.handlers.QueueHandler(records))
logging.getLogger().setLevel(logging.INFO)
"""


def test_the_exit_warning_reaches_queue_logging_and_stderr() -> None:
    """With QueueHandler/QueueListener logging the warning used to be left in the queue at
    ``os._exit``: the log ended with the first stop's lines, not saying why the pod died."""
    script = _RUN_WITH_A_HUNG_RECONCILE.replace(
        "logging.basicConfig(level=logging.INFO)", _QUEUE_LOGGING
    )
    ended = signal_after(
        script,
        "reconciling",
        signal.SIGTERM,
        timeout=20,
        again_after="waiting up to 40s for 1 in-flight reconcile",
    )
    assert ended.returncode == 1, ended.err[-2000:]
    warning = "signal SIGTERM received again while stopping: exiting at once (exit status 1)"
    assert f"queued WARNING mcruntime.manager: {warning}" in ended.err  # the queue drained
    assert f"\nWARNING mcruntime.manager: {warning}\n" in ended.err  # and straight to stderr
    assert ended.took < 5.0, ended.err[-2000:]
