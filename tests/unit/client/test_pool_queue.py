"""The connection pool's slot queue: filled without a lock per slot, a plain LIFO queue after."""

from __future__ import annotations

import logging
import queue
import threading

import pytest

from mcruntime.client._rest import _SlotQueue, _Sockets, _TLSPool
from tests._logs import logged

pytestmark = pytest.mark.timeout(10)


def test_a_new_pool_holds_its_empty_slots_and_hands_them_out_last_in_first_out() -> None:
    pool = _TLSPool("127.0.0.1", 6443, maxsize=3)
    q = pool.pool
    assert isinstance(q, _SlotQueue)
    assert q.full() and q.qsize() == 3 and list(q.queue) == [None, None, None]
    assert q.get(block=False) is None
    q.put("conn")
    assert q.get(block=False) == "conn"  # LIFO: the connection just returned comes first
    assert [q.get(block=False), q.get(block=False)] == [None, None]
    with pytest.raises(queue.Empty):
        q.get(block=False)
    pool.close()


def test_once_read_a_slot_put_back_wakes_a_waiting_reader() -> None:
    q = _SlotQueue(1)
    q.put(None)
    assert q.get() is None  # the pool is in use: a reader may now wait
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(q.get(timeout=30)), daemon=True)
    reader.start()
    q.put(None)  # as urllib3 returns a discarded connection's slot
    reader.join(5)  # a put that did not notify would leave it waiting its 30 s
    assert got == [None]


def test_the_fast_fill_stops_at_maxsize() -> None:
    q = _SlotQueue(2)
    q.put(None)
    q.put(None)
    with pytest.raises(queue.Full):
        q.put(None, block=False)


def test_a_slot_given_back_to_a_full_pool_is_said_once_by_cluster_not_by_urllib3(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a call that failed gives back an empty slot (its connection closed); the pool may be full
    # then, when more calls than it holds were in flight: urllib3 would warn at each, unnamed
    pool = _TLSPool("127.0.0.1", 6443, maxsize=1)
    pool._mcr_sockets = _Sockets("eu-1")
    caplog.set_level(logging.DEBUG)
    pool._put_conn(None)  # a new pool is full of its empty slots
    pool._put_conn(None)
    pool.close()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("urllib3")] == []
    (said,) = logged(caplog, logging.WARNING, logger="mcruntime.client")
    assert said.startswith("cluster=eu-1: more calls at once than its 1 pooled connections")
