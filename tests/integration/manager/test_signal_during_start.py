"""A SIGTERM or SIGINT that comes while ``run()`` is still starting stops the manager at once."""

from __future__ import annotations

import signal

import pytest

from tests._signal import signal_after

pytestmark = pytest.mark.timeout(30)

_RUN_WITH_A_HUNG_LOCAL_CLUSTER = """
import threading

import mcruntime
from mcruntime.envtest import wait_for
from tests._silent import SilentServer

hung = SilentServer()  # the local cluster: accepts connections, never answers


def report() -> None:
    wait_for(lambda: hung.accepted, timeout=20)
    print("starting", flush=True)  # start() waits for the local cluster's caches now


threading.Thread(target=report, daemon=True).start()
mgr = mcruntime.Manager(
    hung.kubeconfig(), options=mcruntime.ManagerOptions(engage_sync_timeout=20.0)
)
mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
mgr.run()
left = [t.name for t in threading.enumerate() if t.name.startswith("mcruntime/")]
print("stopped", left, flush=True)
hung.close()
"""


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
