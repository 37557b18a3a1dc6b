"""Lease expiry as client-go judges it: by the local clock since the current record was first seen."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mcruntime.errors import NotFound
from mcruntime.leaderelection import (
    LeaderElector,
    LeaseHolder,
    LeaseObserver,
    LeaseRecord,
    default_namespace,
    micro_time,
)

pytestmark = pytest.mark.timeout(10)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lease(name: str, rv: str, holder: str = "a", duration: int = 15, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": rv},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, **spec},
    }


def test_a_lease_is_valid_for_its_duration_after_first_seen_by_the_local_clock() -> None:
    clock = FakeClock()
    obs = LeaseObserver(clock)
    # the renewTime written by the holder (an hour ago, by its clock) does not matter
    obs.observe(lease("l", "1", renewTime="2000-01-01T00:00:00.000000Z"))
    clock.now += 14.9
    assert obs.valid("l")
    clock.now += 0.2
    assert not obs.valid("l")
    assert obs.valid_until("l") == 1015.0


def test_seeing_the_same_record_again_does_not_extend_it() -> None:
    clock = FakeClock()
    obs = LeaseObserver(clock)
    obs.observe(lease("l", "1"))
    clock.now += 10
    obs.observe(lease("l", "1"))
    clock.now += 5.1
    assert not obs.valid("l")


def test_a_changed_record_restarts_the_clock() -> None:
    clock = FakeClock()
    obs = LeaseObserver(clock)
    obs.observe(lease("l", "1"))
    clock.now += 10
    obs.observe(lease("l", "2"))
    clock.now += 10
    assert obs.valid("l")
    clock.now += 5.1
    assert not obs.valid("l")


def test_the_record_duration_is_used_not_a_local_setting() -> None:
    clock = FakeClock()
    obs = LeaseObserver(clock)
    obs.observe(lease("l", "1", duration=3))
    clock.now += 2.9
    assert obs.valid("l")
    clock.now += 0.2
    assert not obs.valid("l")


def test_free_and_unknown_leases_are_never_valid() -> None:
    obs = LeaseObserver(FakeClock())
    assert not obs.valid("unknown")
    obs.observe(lease("released", "1", holder="", duration=1))
    assert not obs.valid("released")
    assert obs.record("released") == LeaseRecord(holder="", lease_duration_seconds=1)


def test_forget_and_retain_drop_deleted_leases() -> None:
    obs = LeaseObserver(FakeClock())
    for n in ("a", "b", "c"):
        obs.observe(lease(n, "1"))
    obs.forget("a")
    obs.retain({"b"})
    assert [obs.valid(n) for n in ("a", "b", "c")] == [False, True, False]


def test_lease_record_round_trips_through_a_lease_spec() -> None:
    rec = LeaseRecord("me", 15, micro_time(), micro_time(), 3)
    assert LeaseRecord.of({"spec": rec.spec()}) == rec


def test_micro_time_is_rfc3339_with_microseconds() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", micro_time())


def test_default_namespace_reads_the_service_account_file(tmp_path: Any) -> None:
    f = tmp_path / "namespace"
    f.write_text("team-a\n")
    assert default_namespace(str(f)) == "team-a"
    assert default_namespace(str(tmp_path / "missing")) == "default"


@pytest.mark.parametrize(
    ("duration", "deadline", "retry", "match"),
    [(10, 10, 2, "lease_duration"), (15, 2, 2, "renew_deadline"), (15, 10, 0, "retry_period")],
)
def test_elector_rejects_timings_that_break_the_guarantee(
    duration: float, deadline: float, retry: float, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        LeaderElector(
            object(),
            name="x",
            namespace="default",
            lease_duration=duration,
            renew_deadline=deadline,
            retry_period=retry,
        )


class DeletedMeanwhile:
    """A LeaseClient whose free Lease is deleted (collected as garbage) between its read and
    the write that would take it."""

    namespace = "default"

    def get(self, name: str, *, timeout: float) -> dict[str, Any]:
        return lease(name, "7", holder="")

    def update(self, *args: Any, **kw: Any) -> dict[str, Any]:
        raise NotFound('leases.coordination.k8s.io "fence" not found')


def test_a_lease_deleted_between_read_and_take_is_lost_to_a_race_not_an_error() -> None:
    holder = LeaseHolder(DeletedMeanwhile(), "fence", "a", lease_duration=15)  # type: ignore[arg-type]
    assert holder.try_acquire_or_renew(5) is False
    assert holder.held is False
    assert holder.last_error is None  # not an API failure: the next try creates it
