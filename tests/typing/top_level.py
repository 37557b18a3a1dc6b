"""What a user's type checker sees of ``import mcruntime``: checked by ``mypy`` (strict, with
``warn_unused_ignores``: see pyproject.toml), never run.

The public subpackages are attributes of ``mcruntime`` without an import, and a type checker
knows them: ``mcruntime.errors.NotFound`` is the class, not ``Any``. A name ``mcruntime`` does
not have (a typo) is an error, as it is at run time: each ``# type: ignore[...]`` below fails
as unused when it is not.
"""

from __future__ import annotations

from typing import assert_type

import mcruntime
from mcruntime.errors import NotFound
from mcruntime.handler import EventHandler
from mcruntime.manager import Manager


def subpackages() -> None:
    assert_type(mcruntime.errors.NotFound, type[NotFound])
    assert_type(mcruntime.handler.enqueue_request_for_object(), EventHandler)
    assert_type(mcruntime.Manager, type[Manager])
    assert_type(mcruntime.__version__, str)


def typos(mgr: mcruntime.Manager) -> None:
    mcruntime.Mangaer()  # type: ignore[attr-defined]
    mcruntime.controller_manged_by(mgr)  # type: ignore[attr-defined]
    print(mcruntime.erorrs.NotFound)  # type: ignore[attr-defined]
