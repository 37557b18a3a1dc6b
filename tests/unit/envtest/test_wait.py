"""``mcruntime.envtest.wait_for``: the one polling wait of the tests (and of users' tests)."""

from __future__ import annotations

import threading
import time

import pytest

from mcruntime.envtest import WaitTimeout, wait_for


def test_returns_the_first_truthy_value():
    values = iter([None, 0, [], {"ready": True}])
    assert wait_for(lambda: next(values), timeout=5, interval=0.001) == {"ready": True}


def test_times_out_naming_what_was_awaited_the_timeout_and_the_last_value():
    began = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        wait_for(lambda: [], timeout=0.1, interval=0.01, what="the lease to be taken")
    assert 0.1 <= time.monotonic() - began < 5
    assert isinstance(caught.value, AssertionError)
    assert str(caught.value) == "timed out after 0.1s waiting for the lease to be taken (last: [])"


def test_without_a_description_the_predicate_is_named():
    def cache_synced() -> bool:
        return False

    with pytest.raises(WaitTimeout, match="waiting for .*cache_synced"):
        wait_for(cache_synced, timeout=0.05)
    with pytest.raises(WaitTimeout, match=r"waiting for the lambda at test_wait\.py:\d+"):
        wait_for(lambda: False, timeout=0.05)


def test_a_set_stop_event_ends_the_wait_early():
    stop = threading.Event()
    threading.Timer(0.05, stop.set).start()
    began = time.monotonic()
    with pytest.raises(WaitTimeout):
        wait_for(lambda: False, timeout=30, stop=stop, what="never")
    assert time.monotonic() - began < 10


def test_an_exception_of_the_predicate_propagates_at_once():
    def broken() -> bool:
        raise KeyError("gone")

    with pytest.raises(KeyError):
        wait_for(broken, timeout=30)
