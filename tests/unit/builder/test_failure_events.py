"""The builder's failure_events option."""

from __future__ import annotations

import pytest

import mcruntime
from mcruntime.controller import ControllerOptions
from mcruntime.handler import enqueue_request_for_object
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider


def test_failure_events_without_a_for_kind_is_refused_not_ignored() -> None:
    # the Events are about the for_() object: without one, none would ever be posted
    mgr = mcruntime.Manager(provider=Provider())
    builder = (
        mcruntime.controller_managed_by(mgr)
        .named("watcher")
        .watches("v1/ConfigMap", enqueue_request_for_object())
        .with_options(failure_events=True)
    )
    with pytest.raises(ValueError, match="failure_events needs for_"):
        builder.complete(lambda req: None)
    assert mgr.controllers == []


def test_failure_events_of_every_controller_leave_a_controller_without_for_alone() -> None:
    # set for the manager's controllers: one without for_() has nothing to post them about
    mgr = mcruntime.Manager(
        provider=Provider(),
        options=ManagerOptions(controller=ControllerOptions(failure_events=True)),
    )
    ctrl = (
        mcruntime.controller_managed_by(mgr)
        .named("watcher")
        .watches("v1/ConfigMap", enqueue_request_for_object())
        .complete(lambda req: None)
    )
    assert ctrl.on_failure is None
