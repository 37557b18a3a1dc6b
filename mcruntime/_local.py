"""The local cluster's name, and how a cluster name reads in logs, thread names and errors."""

from __future__ import annotations

__all__ = ["LOCAL", "display_name"]

#: the name of the local cluster (the manager's own): the empty string
LOCAL = ""


def display_name(name: str) -> str:
    """``name`` as logs, thread names and errors show it: the local cluster reads ``local``."""
    return name or "local"
