"""The event correlator: deduplication, aggregation and the per-object token bucket (no I/O)."""

from __future__ import annotations

from typing import Any

from mcruntime.recorder import CorrelatorOptions, EventCorrelator


def _event(
    name: str = "web", reason: str = "Synced", message: str = "ok", n: int = 0
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.{n:x}", "namespace": "default"},
        "involvedObject": {"kind": "ConfigMap", "namespace": "default", "name": name, "uid": "u"},
        "source": {"component": "ctl", "host": "h"},
        "type": "Normal",
        "reason": reason,
        "message": message,
        "count": 1,
        "firstTimestamp": f"t{n}",
        "lastTimestamp": f"t{n}",
    }


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_repeat_patches_the_first_event_with_a_higher_count() -> None:
    c = EventCorrelator()
    first = c.correlate(_event(n=1))
    assert first.patch is None and not first.skip
    c.observe(first.event)
    second = c.correlate(_event(n=2))
    assert second.event["metadata"]["name"] == "web.1"
    assert second.patch == {"count": 2, "lastTimestamp": "t2", "message": "ok"}
    c.observe(second.event)
    assert c.correlate(_event(n=3)).patch == {"count": 3, "lastTimestamp": "t3", "message": "ok"}
    other = c.correlate(_event(name="db", n=4))  # another object: its own Event
    assert other.patch is None


def test_the_token_bucket_refills_over_time_per_object() -> None:
    clock = Clock()
    c = EventCorrelator(CorrelatorOptions(spam_burst=2, spam_qps=0.5), clock=clock)
    assert [c.correlate(_event()).skip for _ in range(3)] == [False, False, True]
    assert not c.correlate(_event(name="db")).skip  # other objects have their own bucket
    clock.now = 2.0  # one token back
    assert [c.correlate(_event()).skip for _ in range(2)] == [False, True]


def test_more_distinct_messages_than_max_events_are_combined_into_one_event() -> None:
    clock = Clock()
    c = EventCorrelator(CorrelatorOptions(max_events=2, interval=10.0), clock=clock)
    for i in range(2):
        c.observe(c.correlate(_event(message=f"m{i}", n=i)).event)
    combined = c.correlate(_event(message="m2", n=2))
    assert combined.patch is None and combined.event["message"].startswith(
        "(combined from similar events): "
    )
    c.observe(combined.event)
    again = c.correlate(_event(message="m3", n=3))
    assert again.event["metadata"]["name"] == "web.2" and again.patch is not None
    clock.now = 11.0  # a new window: messages stand alone again
    assert c.correlate(_event(message="m4", n=4)).event["message"] == "m4"


def test_an_events_count_includes_the_repeats_the_rate_limit_kept_from_being_written() -> None:
    """client-go counts a repeat before its spam filter: the rate limit spares the API server
    writes, not the count `kubectl describe` shows (about ``x3300 over 55m``, not ``x36``)."""
    clock = Clock()
    c = EventCorrelator(clock=clock)  # client-go's defaults: burst 25, then one per 5 minutes
    written: dict[int, dict[str, Any]] = {}
    for second in range(3600):  # the same Warning every second for an hour
        clock.now = float(second)
        result = c.correlate(_event(reason="SyncFailed", message="quota", n=second))
        if not result.skip:
            c.observe(result.event)
            written[second] = result.event
    assert len(written) == 36  # the burst, then one every 5 minutes
    assert {e["metadata"]["name"] for e in written.values()} == {"web.0"}  # one Event
    at = max(written)
    assert at > 3000
    last = written[at]
    assert last["count"] == at + 1  # every repeat until that write, not 36
    assert (last["firstTimestamp"], last["lastTimestamp"]) == ("t0", f"t{at}")


def test_distinct_messages_kept_for_aggregation_are_bounded() -> None:
    """Counted before the rate limit, every message is seen by the aggregation: as client-go,
    it keeps at most ``max_events`` of them per object and reason."""
    clock = Clock()
    c = EventCorrelator(clock=clock)
    for i in range(10_000):
        clock.now = i / 100
        c.correlate(_event(message=f"generation {i}", n=i))
    (aggregate,) = c._aggregates.items.values()
    assert len(aggregate.messages) == 10


def test_an_event_first_seen_while_rate_limited_is_created_with_its_count() -> None:
    """Its first occurrence was counted but not written: its next write patched an Event
    never created (a 404, then a create that started its count again at 1)."""
    clock = Clock()
    c = EventCorrelator(CorrelatorOptions(spam_burst=1, spam_qps=0.5), clock=clock)
    c.observe(c.correlate(_event(reason="Synced", n=1)).event)  # takes the object's token
    assert c.correlate(_event(reason="Degraded", n=2)).skip  # counted, not written
    clock.now = 2.0  # a token back
    again = c.correlate(_event(reason="Degraded", n=3))
    assert not again.skip and again.patch is None  # created, not patched
    assert (again.event["count"], again.event["firstTimestamp"]) == (2, "t2")
    c.observe(again.event)
    clock.now = 4.0
    third = c.correlate(_event(reason="Degraded", n=4))
    assert third.patch == {"count": 3, "lastTimestamp": "t4", "message": "ok"}
    assert third.event["metadata"]["name"] == again.event["metadata"]["name"]
