"""A SIGTERM or SIGINT that comes while ``run()`` is still starting stops the manager at once;
a Ctrl-C while a bare ``start()`` waits (a notebook cell, a script's ``with mgr:``) stops what
the start had started."""

from __future__ import annotations

import signal

import pytest

from tests._signal import signal_after

pytestmark = pytest.mark.timeout(30)

_A_MANAGER_ON_A_HUNG_LOCAL_CLUSTER = """
import faulthandler
import threading

import mcruntime
from mcruntime.envtest import wait_for
from tests._silent import SilentServer

hung = SilentServer()  # the local cluster: accepts connections, never answers


def report() -> None:
    wait_for(lambda: hung.accepted, timeout=20)
    print("starting", flush=True)  # start() waits for the local cluster's caches now
    # the stacks of a stop that never ends, for the test's failure (it kills it at 15 s)
    faulthandler.dump_traceback_later(12)


threading.Thread(target=report, daemon=True).start()
mgr = mcruntime.Manager(
    hung.kubeconfig(), options=mcruntime.ManagerOptions(engage_sync_timeout=20.0)
)
mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
"""

_RUN_WITH_A_HUNG_LOCAL_CLUSTER = (
    _A_MANAGER_ON_A_HUNG_LOCAL_CLUSTER
    + """
mgr.run()
left = [t.name for t in threading.enumerate() if t.name.startswith("mcruntime/")]
print("stopped", left, flush=True)
hung.close()
"""
)

# Ctrl-C is a KeyboardInterrupt here: start() installs no signal handler (run() does)
_START_WITH_A_HUNG_LOCAL_CLUSTER = (
    _A_MANAGER_ON_A_HUNG_LOCAL_CLUSTER
    + """
try:
    {start}
except KeyboardInterrupt:
    stopped = mgr.wait(0)
    # a thread the stop cut may still be ending for a moment: the Ctrl-C interrupted start()'s
    # join of the engagement's thread, and CPython's later join of that thread can then
    # return before it has ended
    try:
        wait_for(
            lambda: not [t for t in threading.enumerate() if t.name.startswith("mcruntime/")],
            timeout=2,
        )
    except Exception:
        pass
    left = [t.name for t in threading.enumerate() if t.name.startswith("mcruntime/")]
    print("interrupted", left, stopped, flush=True)
hung.close()
"""
)


_RUN_WITH_A_PROVIDER_THAT_NEVER_REPORTS = """
import threading

import mcruntime
from mcruntime.envtest import APIServer
from mcruntime.multicluster import Clusters


class Silent(Clusters):
    reports_initial_clusters = True  # and never does: its first discovery pass hangs

    def run(self, stop: threading.Event) -> None:
        print("starting", flush=True)  # start() waits for the initial clusters now
        stop.wait()


srv = APIServer("local").start()
mgr = mcruntime.Manager(
    srv.kubeconfig(),
    provider=Silent(),
    options=mcruntime.ManagerOptions(engage_sync_timeout=20.0),
)
mgr.run()
left = [t.name for t in threading.enumerate() if t.name.startswith("mcruntime/")
        and "/envtest" not in t.name]
print("stopped", left, flush=True)
srv.stop()
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize(
    "script",
    [_RUN_WITH_A_HUNG_LOCAL_CLUSTER, _RUN_WITH_A_PROVIDER_THAT_NEVER_REPORTS],
    ids=["hung-local-cluster", "provider-never-reports"],
)
def test_a_signal_while_start_waits_stops_the_manager_at_once(script: str, signum: int) -> None:
    ended = signal_after(script, "starting", signum)
    assert ended.returncode == 0, ended.err[-2000:]
    assert ended.out.strip() == "stopped []", (ended.out, ended.err[-2000:])
    assert ended.took < 5.0, (
        f"the manager stopped {ended.took:.1f}s after the signal: start() held it"
    )


@pytest.mark.parametrize("start", ["mgr.start()", "with mgr:\n        pass"], ids=["start", "with"])
def test_ctrl_c_while_start_waits_leaves_no_thread_of_the_manager_running(start: str) -> None:
    """Before, the engagement, the health check and the workers went on running (and logging
    their retries) with no owner, and ``with mgr:`` never called ``__exit__``."""
    script = _START_WITH_A_HUNG_LOCAL_CLUSTER.format(start=start)
    ended = signal_after(script, "starting", signal.SIGINT)
    assert ended.returncode == 0, ended.err[-2000:]
    # no thread of it left, and the manager stopped (wait() says so at once)
    assert ended.out.strip() == "interrupted [] True", (ended.out, ended.err[-2000:])
    assert ended.took < 5.0, f"the start ended {ended.took:.1f}s after Ctrl-C"
