"""A blocking call on a thread of its own, ended by what a test does: for tests that show a
call hung on a frozen server ends at once when it is cut, cancelled or its cluster stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def ended_at_once(call: Callable[[], Any], end: Callable[[], Any], name: str) -> BaseException:
    """Run ``call`` on a thread ``name``; once it is blocked (still running after 0.5 s),
    ``end()`` must end it within a second. Returns what ``call`` raised (it must raise)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            raised.append(exc)

    t = threading.Thread(target=run, name=name)
    t.start()
    t.join(0.5)
    assert t.is_alive(), f"{name}: not blocked"
    began = time.monotonic()
    end()
    t.join(5)
    assert not t.is_alive(), f"{name}: still blocked 5 s after it was ended"
    took = time.monotonic() - began
    assert took < 1.0, f"{name}: ended {took:.2f}s after it was ended"
    assert len(raised) == 1, f"{name}: returned instead of raising"
    return raised[0]
