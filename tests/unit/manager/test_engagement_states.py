"""The engagement state machine: the states users see in ``cluster_states()`` and the transitions allowed."""

from __future__ import annotations

import pytest

from mcruntime.cluster import Cluster
from mcruntime.manager import EngagementState
from mcruntime.manager._engagement import TRANSITIONS, Engagement

S = EngagementState


def _engagement() -> Engagement:
    return Engagement("eu-1", Cluster.from_kubeconfig(_KUBECONFIG, name="eu-1"))


_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


def test_states_read_and_compare_as_their_names():
    assert [str(s) for s in S] == ["syncing", "engaged", "failed", "ended"]
    assert S.ENGAGED == "engaged" and f"{S.SYNCING}" == "syncing"


def test_an_engagement_syncs_then_engages_then_ends():
    eng = _engagement()
    assert eng.state is S.SYNCING
    assert eng.move_to(S.ENGAGED) is S.SYNCING
    assert eng.move_to(S.ENDED) is S.ENGAGED
    assert eng.move_to(S.ENDED) is S.ENDED  # ending twice changes nothing


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ([S.ENGAGED], S.SYNCING),
        ([S.ENGAGED], S.FAILED),
        ([S.FAILED], S.ENGAGED),
        ([S.ENDED], S.ENGAGED),
        ([S.ENDED], S.SYNCING),
    ],
)
def test_transitions_outside_the_diagram_are_refused(path, illegal):
    eng = _engagement()
    for state in path:
        eng.move_to(state)
    with pytest.raises(RuntimeError, match=f"no transition {path[-1]} -> {illegal}"):
        eng.move_to(illegal)
    assert eng.state is path[-1]


def test_every_state_can_end_except_ended_which_is_final():
    assert all(S.ENDED in TRANSITIONS[s] for s in S if s is not S.ENDED)
    assert TRANSITIONS[S.ENDED] == frozenset()
