"""What a child forked from this process (``os.fork``, multiprocessing's ``fork`` start method, a
pre-fork server's workers) must forget of the parent: its threads are not in the child, and
whatever they held (connections, locks, work handed to them) is the parent's.

Each module that keeps such state registers its own hook here; where the OS has no fork
(Windows), there is nothing to register.
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = ["in_a_forked_child"]


def in_a_forked_child(hook: Callable[[], None]) -> None:
    """Run ``hook`` in every child forked from this process, before it runs anything else
    (``os.register_at_fork(after_in_child=...)``). It must not log or take a lock a parent
    thread may have held."""
    register = getattr(os, "register_at_fork", None)
    if register is not None:
        register(after_in_child=hook)
