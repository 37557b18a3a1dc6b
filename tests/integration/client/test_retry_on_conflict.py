"""retry_on_conflict against an embedded API server: client-go's retry.RetryOnConflict, within
the deadline of its context and cut with its calls."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from mcruntime.client import Client, cancelled_by, deadline, retry_on_conflict
from mcruntime.errors import Conflict, NotFound

pytestmark = pytest.mark.timeout(60)


class _Counter:
    """A read-modify-write of ConfigMap ``name`` whose first ``races`` attempts another writer
    beats: their update carries a stale resourceVersion."""

    def __init__(self, client: Client, ns: str, name: str, races: int) -> None:
        self.client, self.ns, self.name, self.races = client, ns, name, races
        self.attempts = 0
        client.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns},
                "data": {"n": "0"},
            }
        )

    def __call__(self) -> dict[str, Any]:
        self.attempts += 1
        obj = self.client.get("v1/ConfigMap", self.name, self.ns)
        if self.attempts <= self.races:
            self.client.patch(
                "v1/ConfigMap", self.name, {"data": {"other": str(self.attempts)}}, self.ns
            )
        obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
        result: dict[str, Any] = self.client.update(obj)
        return result

    def stored(self) -> str:
        value: str = self.client.get("v1/ConfigMap", self.name, self.ns)["data"]["n"]
        return value


def test_a_write_that_met_conflicts_is_made_again_on_a_fresh_read(client: Client, ns: str) -> None:
    write = _Counter(client, ns, "raced", races=3)
    assert retry_on_conflict(write)["data"]["n"] == "1"
    assert write.attempts == 4 and write.stored() == "1"


def test_the_last_conflict_is_raised_when_the_attempts_run_out(client: Client, ns: str) -> None:
    write = _Counter(client, ns, "always-raced", races=100)
    with pytest.raises(Conflict):
        retry_on_conflict(write, steps=4, factor=5.0)  # client-go's retry.DefaultBackoff
    assert write.attempts == 4 and write.stored() == "0"


def test_any_other_error_is_raised_at_once(client: Client, ns: str) -> None:
    attempts = []

    def read() -> Any:
        attempts.append(1)
        return client.get("v1/ConfigMap", "absent", ns)

    with pytest.raises(NotFound):
        retry_on_conflict(read)
    assert len(attempts) == 1


def test_no_wait_is_begun_that_would_end_past_the_deadline(client: Client, ns: str) -> None:
    write = _Counter(client, ns, "deadline", races=100)
    began = time.monotonic()
    with deadline(5), pytest.raises(Conflict):
        retry_on_conflict(write, duration=30)
    assert write.attempts == 1 and time.monotonic() - began < 5


def test_a_wait_ends_when_the_calls_of_its_context_are_cut(client: Client, ns: str) -> None:
    write = _Counter(client, ns, "cut", races=100)
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    began = time.monotonic()
    try:
        with cancelled_by(stop), pytest.raises(Conflict):
            retry_on_conflict(write, duration=30)
    finally:
        timer.cancel()
    assert write.attempts == 1 and time.monotonic() - began < 10


@pytest.mark.parametrize(
    "options",
    [{"steps": 0}, {"steps": True}, {"duration": -1}, {"factor": float("inf")}, {"jitter": "x"}],
)
def test_options_that_make_no_sense_are_refused_naming_them(options: dict[str, Any]) -> None:
    name = next(iter(options))
    with pytest.raises(ValueError, match=f"retry_on_conflict\\({name}="):
        retry_on_conflict(lambda: None, **options)
