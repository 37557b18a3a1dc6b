"""A function run in a forked child (multiprocessing's ``fork`` start method), for the tests of
what a process forked from one that uses mcruntime does."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["in_a_child"]


def in_a_child(
    target: Callable[..., None], *args: Any, meanwhile: Callable[[], None] | None = None
) -> Any:
    """Run ``target(conn, *args)`` in a forked child, and ``meanwhile()`` here once it is
    forked; what the child sends on ``conn``."""
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_reporting, args=(target, theirs, *args), name="test/fork-child")
    child.start()
    theirs.close()
    try:
        if meanwhile is not None:
            meanwhile()
        assert ours.poll(30), "the child said nothing within 30 s"
        said = ours.recv()
    finally:
        child.join(10)
        if child.is_alive():
            child.kill()
            child.join(5)
    assert child.exitcode == 0, said
    return said


def _reporting(target: Callable[..., None], conn: Connection, *args: Any) -> None:
    try:
        target(conn, *args)
    except BaseException as exc:
        conn.send(f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()
