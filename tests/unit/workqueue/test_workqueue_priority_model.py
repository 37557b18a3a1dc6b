"""Random adds, takes, dones, drops and per-key limits against the queue's invariants and a
plain model: what is handed out is always of the highest ready priority, nothing queued is
lost or handed out twice, and the bookkeeping of turns matches the FIFOs."""

from __future__ import annotations

import random

import pytest

from mcruntime.workqueue import LOW_PRIORITY, NOTHING, Queue
from tests.unit.workqueue._requests import Req, by_cluster

pytestmark = pytest.mark.timeout(60)

PRIORITIES = (LOW_PRIORITY, -1, 0, 0, 0, 5)


def check_invariants(q: Queue) -> None:
    """The structure the queue's docstrings promise (white-box: the turns of each level)."""
    queued = 0
    for level in q._order:  # noqa: SLF001
        keys = list(level.turns)
        assert len(keys) == len(set(keys)), f"a key twice in the turns of {level.priority}"
        for key, fifo in level.ready.items():
            in_turns = key in keys
            assert in_turns == (bool(fifo) and key not in q._parked), (  # noqa: SLF001
                f"priority {level.priority}, key {key}: in turns {in_turns}, "
                f"{len(fifo)} ready, parked {key in q._parked}"  # noqa: SLF001
            )
            for entry in fifo:
                assert entry.dirty and entry.started is None
                assert entry.priority == level.priority
            queued += len(fifo)
            # levels other than 0 keep no emptied FIFO: no memory per cluster after a list
            assert fifo or level.priority == 0, f"an empty FIFO of {key} at {level.priority}"
        assert set(keys) <= set(level.ready)
        assert level.ready or level.priority == 0, f"an empty level {level.priority}"
    priorities = [lv.priority for lv in q._order]  # noqa: SLF001
    assert priorities == sorted(priorities, reverse=True)
    held_dirty = sum(
        1
        for e in q._entries.values()  # noqa: SLF001
        if e.dirty and e.started is not None
    )
    assert q._pending == queued + held_dirty  # noqa: SLF001


@pytest.mark.parametrize("seed", range(30))
def test_random_operations_keep_the_invariants_and_the_priority_order(seed: int) -> None:
    rnd = random.Random(seed)
    q = Queue(fair_key=by_cluster)
    want: dict[Req, int] = {}  # queued (not held) -> its priority, as the model has it
    held: dict[Req, int | None] = {}  # held -> priority of an add made while held (None: none)
    for _ in range(400):
        op = rnd.random()
        req = Req(rnd.choice("abc"), str(rnd.randrange(6)))
        if op < 0.45:
            p = rnd.choice(PRIORITIES)
            q.add(req, priority=p)
            if req in held:
                held[req] = p if held[req] is None else max(held[req], p)  # type: ignore[type-var]
            else:
                want[req] = max(want.get(req, p), p)
        elif op < 0.75:
            got = q.done_and_take(Req("-", "-"))  # done of an item nobody holds: a no-op
            if got is NOTHING:
                ready = {
                    r
                    for r in want
                    if q.limit_per_key is None
                    or sum(1 for h in held if h.cluster_name == r.cluster_name) < q.limit_per_key
                }
                assert not ready, f"nothing handed out while {ready} were ready"
                continue
            assert got in want, f"{got} handed out but not queued"
            p = want.pop(got)
            takeable = [
                want_p
                for r, want_p in want.items()
                if q.limit_per_key is None
                or sum(1 for h in held if h.cluster_name == r.cluster_name) < q.limit_per_key
            ]
            assert all(p >= other for other in takeable), (
                f"{got} at {p} handed out before one at {max(takeable)}"
            )
            assert q.held_priority(got) == p
            held[got] = None
        elif op < 0.9 and held:
            req = rnd.choice(sorted(held))
            again = held.pop(req)
            q.done(req)
            if again is not None:
                want[req] = again
        elif op < 0.95:
            cluster = rnd.choice("abc")
            q.drop(lambda r, c=cluster: r.cluster_name == c)
            want = {r: p for r, p in want.items() if r.cluster_name != cluster}
            held = {r: (None if r.cluster_name == cluster else p) for r, p in held.items()}
        else:
            q.limit_per_key = rnd.choice((None, 1, 2))
        check_invariants(q)
        assert len(q) == len(want) + sum(1 for p in held.values() if p is not None)
