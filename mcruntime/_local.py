"""The local cluster's name, and how a cluster name reads in logs, thread names and errors."""

from __future__ import annotations

__all__ = ["LOCAL", "check_cluster_name", "display_name"]

#: the name of the local cluster (the manager's own): the empty string
LOCAL = ""


def display_name(name: str) -> str:
    """``name`` as logs, thread names and errors show it: the local cluster reads ``local``.

    A name with characters a line of text cannot show as they are (a newline, a terminal
    escape, a line separator: what `str.isprintable` refuses) reads as its `repr`, quoted
    and escaped, so it cannot split a log line in two or forge one about another cluster;
    any other name reads unchanged.
    """
    if not name.isprintable():
        return repr(name)
    return name or "local"


def check_cluster_name(name: str) -> None:
    """Raise `ValueError` naming what makes ``name`` no name for a provider's cluster: the
    empty name, which is the local cluster's, or characters a log line cannot show as they
    are (control characters, line separators)."""
    if name == LOCAL:
        raise ValueError(
            "a provider's cluster needs a name: the empty cluster name is reserved for the "
            "local cluster"
        )
    if not name.isprintable():
        raise ValueError(
            f"cluster name {name!r} has characters a log line cannot show as they are "
            "(control characters, line separators): every log line, error and thread of a "
            "cluster carries its name"
        )
