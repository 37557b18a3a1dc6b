"""A provider late to report its initial clusters is named by the manager's warning, with why."""

from __future__ import annotations

import logging
import threading

import pytest

import mcruntime
from mcruntime.multicluster import Clusters
from mcruntime.providers import multi

pytestmark = pytest.mark.timeout(30)


class Silent(Clusters):
    reports_initial_clusters = True  # and never does: its first discovery pass hangs

    def __init__(self, error: str | None) -> None:
        super().__init__("silent-fleet")
        self.discovery_error = error

    def run(self, stop: threading.Event) -> None:
        stop.wait()


@pytest.mark.parametrize(
    ("error", "why"),
    [
        (
            "[cluster hub] cannot reach 10.0.0.1:443",
            "its last error: [cluster hub] cannot reach 10.0.0.1:443",
        ),
        (None, "it reports no error"),
    ],
    ids=["with-error", "without-error"],
)
def test_a_late_provider_is_named_with_its_last_error(
    caplog: pytest.LogCaptureFixture, error: str | None, why: str
) -> None:
    # the warning named neither the provider nor why it was late
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    mgr = mcruntime.Manager(
        provider=Silent(error), options=mcruntime.ManagerOptions(engage_sync_timeout=0.5)
    )
    mgr.start()
    try:
        late = [r.getMessage() for r in caplog.records if "initial clusters" in r.getMessage()]
        assert late == [
            f"provider=silent-fleet has not reported its initial clusters yet ({why}); "
            "continuing: its clusters are engaged as it reports them"
        ]
    finally:
        mgr.stop(5)


def test_a_late_child_of_the_multi_provider_is_named_by_its_prefix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.manager")
    provider = multi.Provider({"eu": Silent("[cluster hub] cannot reach 10.0.0.1:443")})
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(engage_sync_timeout=0.5)
    )
    mgr.start()
    try:
        late = [r.getMessage() for r in caplog.records if "initial clusters" in r.getMessage()]
        assert late == [
            "provider=multi has not reported its initial clusters yet (its last error: eu: "
            "[cluster hub] cannot reach 10.0.0.1:443); continuing: its clusters are engaged "
            "as it reports them"
        ]
    finally:
        mgr.stop(5)
