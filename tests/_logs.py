"""The log lines a test captured, picked by level and text (tests of the one-warning-per-streak rule)."""

from __future__ import annotations

import pytest


def logged(
    caplog: pytest.LogCaptureFixture,
    level: int,
    *,
    starting: str = "",
    containing: str = "",
    logger: str | None = None,
) -> list[str]:
    """The messages captured at exactly ``level`` that start with ``starting`` and contain
    ``containing``, from ``logger`` when given, in the order they were logged."""
    return [
        m
        for r in caplog.records
        if r.levelno == level
        and (logger is None or r.name == logger)
        and (m := r.getMessage()).startswith(starting)
        and containing in m
    ]
