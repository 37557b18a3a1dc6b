"""``python -m mcruntime.examples.webhooks``: defaults and validation served to every cluster of a fleet."""

from __future__ import annotations

import logging
import re

import pytest

from mcruntime.examples import webhooks as example
from tests.e2e.examples._example_support import leaked_threads, wait_until

GOOD = re.compile(r"^cluster=(\S+) widget good created: replicas=1 label=(\S+)$", re.M)
BAD = re.compile(
    r"^cluster=(\S+) widget bad refused: .*denied the request: spec\.replicas: 50 is more than 5 \(cluster (\S+)\)$",
    re.M,
)


@pytest.mark.timeout(40)
def test_every_cluster_defaults_and_refuses_widgets_by_its_own_name(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcruntime"):
        assert example.main(["--duration", "30"]) == 0
    # a first run shows no warning: the CRD is there before the webhooks are installed,
    # and they are removed before the embedded clusters stop
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    out = capsys.readouterr().out
    clusters = {"cluster-0", "cluster-1", "cluster-2"}
    good = GOOD.findall(out)
    bad = BAD.findall(out)
    assert {c for c, _ in good} == clusters, out
    assert all(c == label for c, label in good), out  # the defaulter saw the request's cluster
    assert {c for c, _ in bad} == clusters and all(c == n for c, n in bad), out
    assert "state: webhooks installed in: cluster-0, cluster-1, cluster-2" in out
    wait_until(lambda: not leaked_threads(), timeout=5, what=f"threads ended: {leaked_threads()}")
