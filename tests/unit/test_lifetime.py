import threading

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.multicluster import Lifetime, on_end


def test_lifetime_runs_callbacks_once_and_late_callbacks_at_once():
    calls = []
    lt = Lifetime()
    lt.add_callback(lambda: calls.append("a"))
    cancel = lt.add_callback(lambda: calls.append("cancelled"))
    cancel()
    lt.set()
    lt.set()
    assert calls == ["a"]
    lt.add_callback(lambda: calls.append("late"))
    assert calls == ["a", "late"]


def test_a_failing_callback_does_not_stop_the_others(caplog):
    calls = []
    lt = Lifetime()
    lt.add_callback(lambda: 1 / 0)
    lt.add_callback(lambda: calls.append("ok"))
    lt.set()
    assert calls == ["ok"]
    assert "lifetime callback" in caplog.text


@pytest.mark.timeout(10)
def test_on_end_with_a_plain_event_watches_with_a_thread_that_stops():
    ev = threading.Event()
    fired = threading.Event()
    on_end(ev, fired.set, name="plain")
    ev.set()
    assert fired.wait(5)
    ev2 = threading.Event()
    cancel = on_end(ev2, lambda: None, name="cancelled")
    cancel()
    deadline = threading.Event()
    for _ in range(100):
        if not [t for t in mcruntime_threads() if t.name.startswith("mcruntime/lifetime/")]:
            break
        deadline.wait(0.05)
    assert not [t for t in mcruntime_threads() if t.name.startswith("mcruntime/lifetime/")]


def test_a_provider_waits_for_what_still_needs_the_cluster_after_its_lifetime_ended() -> None:
    lt = Lifetime()
    removal = lt.hold("the removal of its webhook configurations")
    other = lt.hold("a flush")
    lt.set()
    assert lt.wait_released(0.01) == ["a flush", "the removal of its webhook configurations"]
    other()
    other()  # (twice: nothing more)
    assert lt.wait_released(0) == ["the removal of its webhook configurations"]
    waiting = threading.Event()
    threading.Thread(target=lambda: (waiting.wait(5), removal())).start()
    waiting.set()
    assert lt.wait_released(5) == []  # returns when released, not after 5 s
    assert Lifetime().wait_released(0) == []
