"""``for_each_cluster``: every cluster's call at once, in the caller's context, each outcome kept."""

from __future__ import annotations

import threading
from contextvars import ContextVar

import pytest

from mcruntime.reconcile import Request, current_request, for_each_cluster, reconciling

pytestmark = pytest.mark.timeout(30)


def test_a_call_that_hangs_holds_back_no_other() -> None:
    # the slow member's call waits for every other member's call to have ended: one after
    # the other, it would wait for ever (here: its 10 s, then raise)
    others = {name: threading.Event() for name in ("m1", "m2", "m3")}

    def copy(name: str) -> str:
        if name == "m0":
            if not all(e.wait(10) for e in others.values()):
                raise TimeoutError("the other members waited for m0")
            return "late"
        others[name].set()
        return "copied"

    outcomes = for_each_cluster(["m0", "m1", "m2", "m3"], copy)
    assert outcomes == {"m0": "late", "m1": "copied", "m2": "copied", "m3": "copied"}


def test_each_cluster_gets_its_outcome_in_the_order_named_and_a_name_given_twice_runs_once() -> (
    None
):
    calls: list[str] = []

    def copy(name: str) -> int:
        calls.append(name)
        if name == "bad":
            raise ValueError(f"{name} refused")
        return len(name)

    outcomes = for_each_cluster(["eu-1", "bad", "us-east-1", "eu-1"], copy, max_concurrency=2)
    assert list(outcomes) == ["eu-1", "bad", "us-east-1"]
    assert outcomes["eu-1"] == 4 and outcomes["us-east-1"] == 9
    assert isinstance(outcomes["bad"], ValueError) and str(outcomes["bad"]) == "bad refused"
    assert sorted(calls) == ["bad", "eu-1", "us-east-1"]
    assert for_each_cluster([], copy) == {}


_seen: ContextVar[str] = ContextVar("seen", default="none")


def test_every_call_runs_in_the_callers_context() -> None:
    # a reconcile's context: its request, a deadline, what its calls failed to reach
    token = _seen.set("the caller's")
    try:
        with reconciling(Request("default", "web", "hub")):
            outcomes = for_each_cluster(
                ["m0", "m1", "m2"], lambda name: (_seen.get(), current_request())
            )
    finally:
        _seen.reset(token)
    assert set(outcomes.values()) == {("the caller's", Request("default", "web", "hub"))}


def test_its_threads_are_named_for_their_cluster_and_end_with_it() -> None:
    names: dict[str, str] = {}

    def copy(name: str) -> None:
        names[name] = threading.current_thread().name

    before = set(threading.enumerate())
    for_each_cluster(["eu-1", "us-1"], copy)
    assert names == {"eu-1": "mcruntime/fan-out/eu-1", "us-1": "mcruntime/fan-out/us-1"}
    assert [t for t in threading.enumerate() if t not in before] == []


def test_a_base_exception_stops_the_calls_not_begun_and_is_raised_once_the_others_ended() -> None:
    started: list[str] = []
    m1_started, m0_raising, m1_ended = threading.Event(), threading.Event(), threading.Event()

    def copy(name: str) -> None:
        started.append(name)
        if name == "m0":
            assert m1_started.wait(10)
            m0_raising.set()
            raise KeyboardInterrupt
        if name == "m1":
            m1_started.set()
            assert m0_raising.wait(10)
            m1_ended.set()

    with pytest.raises(KeyboardInterrupt):
        for_each_cluster(["m0", "m1", "m2", "m3"], copy, max_concurrency=2)
    assert m1_ended.is_set(), "m1's call, begun, ended before the raise"
    assert sorted(started) == ["m0", "m1"]


def test_max_concurrency_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be at least 1, not 0"):
        for_each_cluster(["m0"], str, max_concurrency=0)
