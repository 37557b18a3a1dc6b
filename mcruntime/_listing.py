"""A paginated list in progress (below the client and the cache): its pages so far and the
one deadline of the whole list, which its pages share.

The list's loop (`APIReader.list`, an informer's list) notes each page it gets; the client
reads it when a page's deadline ends. A deadline of the whole list that ends while a page is
under way cut the list: the server answered every page before it, so the error says how far
the list got and whose deadline it was, and is no failure of the cluster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

#: a page that timed out with less than this left of its list's deadline ended with it
_SLACK = 0.05


class ListProgress:
    """One paginated list: the deadline of the whole list and the pages got so far."""

    __slots__ = ("began", "by_caller", "end", "objects", "pages", "whose")

    def __init__(self, end: float | None, whose: str, by_caller: bool) -> None:
        #: absolute time.monotonic() deadline of the whole list (None: none)
        self.end = end
        #: whose deadline it is, as the error names it ("its timeout (3s for the whole list)")
        self.whose = whose
        #: whether the deadline is the caller's (its timeout=, an enclosing deadline())
        self.by_caller = by_caller
        self.began = time.monotonic()
        self.pages = 0
        self.objects = 0

    def page(self, objects: int) -> None:
        """A page of ``objects`` objects came in."""
        self.pages += 1
        self.objects += objects

    def cut(self) -> bool:
        """Whether the list's own deadline has ended (or is about to) after a page came in:
        a page that timed out now was cut by it, not left unanswered by the server."""
        return self.pages > 0 and self.end is not None and self.end - time.monotonic() < _SLACK

    def describe(self) -> str:
        """How far the list got: ``the list was cut by its timeout (...) after 5 pages, 2500
        objects, in 3s``."""
        pages = "1 page" if self.pages == 1 else f"{self.pages} pages"
        objects = "1 object" if self.objects == 1 else f"{self.objects} objects"
        took = time.monotonic() - self.began
        return f"the list was cut by {self.whose} after {pages}, {objects}, in {took:.3g}s"


_current: ContextVar[ListProgress | None] = ContextVar("mcruntime_list_progress", default=None)


def current() -> ListProgress | None:
    """The list the calls of the current context are pages of (None: they are not)."""
    return _current.get()


@contextlib.contextmanager
def listing(progress: ListProgress) -> Iterator[ListProgress]:
    """The calls of the block are pages of the list ``progress`` follows."""
    token = _current.set(progress)
    try:
        yield progress
    finally:
        _current.reset(token)
