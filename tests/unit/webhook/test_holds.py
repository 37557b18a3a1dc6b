"""The installer's record of the holds it read, per cluster: nothing of a cluster that left."""

from __future__ import annotations

import json
import logging

import pytest

from mcruntime.webhook._install import HOLDERS, _Holds
from tests._logs import logged

pytestmark = pytest.mark.timeout(30)


def _configuration(holds: dict[str, object]) -> dict[str, object]:
    return {
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "mcruntime-webhooks", "annotations": {HOLDERS: json.dumps(holds)}},
    }


def test_a_cluster_that_left_leaves_nothing_of_its_holds_and_is_warned_again_when_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # clusters come and go daily under new names: what was read of each must go with it
    caplog.set_level(logging.WARNING, "mcruntime.webhook")
    holds = _Holds("replica-a", 60)
    crafted = _configuration({"intruder": {"host": "h", "pid": "1", "expires": "2999"}})
    for i in range(100):
        holds.read(crafted, f"member-{i}")
        holds.read(crafted, f"member-{i}")  # the same content: said once
        holds.forget(f"member-{i}")
    assert len(logged(caplog, logging.WARNING, containing=HOLDERS)) == 100
    assert holds._seen == {}  # noqa: SLF001
    assert holds._warned == {}  # noqa: SLF001
    holds.read(crafted, "member-0")  # back under the same name: a new engagement says it
    assert len(logged(caplog, logging.WARNING, containing=HOLDERS)) == 101
