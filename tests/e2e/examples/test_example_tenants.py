"""``python -m mcruntime.examples.tenants``: a kubebuilder-shaped operator over a fleet."""

from __future__ import annotations

import logging
import re

import pytest

from mcruntime.examples import tenants as example
from tests.e2e.examples._example_support import leaked_threads, wait_until

READY = re.compile(
    r"^cluster=(\S+) (?:joined; )?tenant (\S+): Ready \(owner (\S+) has (\d) tenant\(s\) here\), "
    r"observedGeneration 1$",
    re.M,
)


@pytest.mark.timeout(60)
def test_tenants_get_children_status_events_and_a_finalizer_in_every_cluster(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        assert example.main(["--duration", "45"]) == 0
    # the CRD is in each cluster before it joins and the webhooks are removed from the one
    # leaving while it still answers: nothing to warn about
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    out = capsys.readouterr().out
    ready = {(c, t): (owner, int(n)) for c, t, owner, n in READY.findall(out)}
    assert set(ready) == {
        ("cluster-0", "team-a"),
        ("cluster-1", "team-a"),
        ("cluster-2", "team-a"),
        ("cluster-0", "team-b"),
        ("cluster-3", "team-c"),
    }, out
    # the field index counts the owner's Tenants per cluster, from the cache
    assert ready["cluster-0", "team-b"] == ("alice", 2)
    assert ready["cluster-1", "team-a"] == ("alice", 1)
    assert ready["cluster-3", "team-c"] == ("dave", 1)
    lines = out.splitlines()
    assert (
        "cluster=cluster-0 children of team-a (controlled by it): "
        "ConfigMap, RoleBinding, ServiceAccount"
    ) in lines
    assert "cluster=cluster-1 events of team-a: Normal Provisioned" in lines
    assert any(
        line.startswith("cluster=cluster-1 tenant greedy refused: ")
        and line.endswith("denied the request: spec.quota: 500 is more than 100")
        for line in lines
    ), out
    assert "cluster=cluster-1 configmap tenant-team-a deleted by hand: put back" in lines
    assert "cluster=cluster-2 left; engaged: cluster-0, cluster-1, cluster-3" in lines
    # the finalizer released cluster-0's team-a; cluster-2 left with its Tenant undeleted
    assert (
        "state: reservations: cluster-0/default/team-b, cluster-1/default/team-a, "
        "cluster-2/default/team-a, cluster-3/default/team-c"
    ) in lines
    wait_until(lambda: not leaked_threads(), timeout=5, what=f"threads ended: {leaked_threads()}")
