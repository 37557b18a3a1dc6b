"""Failure streaks: how the library logs a failure that it retries.

The rule (docs/operations.md, "Failures in the log"): a failure of something
retried (an informer's list and watch, a Lease, an Event write, a review, a
health probe, a garbage collection call) is logged once per failure streak
with the cluster's name. The first failure of a streak is a warning that says
what happens next, the later ones are at debug level with their count, and the
first success after them is one info line:

    cluster=eu-1 informer kind=v1/ConfigMap: listing and watching failed: <error>; retrying with backoff; further failures are logged at debug level until it recovers
    cluster=eu-1 informer kind=v1/ConfigMap: listing and watching still failing (2): <error>
    cluster=eu-1 informer kind=v1/ConfigMap: listing and watching works again after 2 failed attempts

A `FailureStreaks` holds the streaks of one
component, keyed (by cluster and what failed, unless the caller gives a key),
and writes those three lines; every place that retries uses one, so the
wording and the counting live here once. Its counters are thread-safe, and a
line is logged outside its lock.

The error is shown as given: callers pass the library's exceptions, whose
messages are sanitised (they name the cluster and the failure, never a token,
a request body or a kubeconfig), or a reason they built from one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable, Mapping

from mcruntime._local import display_name
from mcruntime._logfields import log_fields
from mcruntime.errors import MCRuntimeError

__all__ = ["FailureStreaks", "describe_error", "error_text"]


def error_text(error: object) -> str:
    """``str(error)`` on one line, or what says it failed: a user's exception whose ``__str__``
    raises (one that reads an attribute its ``__init__`` did not set) is still logged, as
    ``traceback`` shows it (``<exception str() failed>``), never raising where it is logged.

    A message of several lines (a plain-text error body: ``[-]etcd failed ...`` per
    failed check; a pydantic ``ValidationError``) reads as its lines joined by ``; ``: a
    log line is one line, for the shippers that read a log line by line.
    """
    try:
        text = str(error)
    except Exception as inner:  # noqa: BLE001 - any failure of a user's __str__
        return f"<str() failed: {type(inner).__name__}>"
    lines = text.splitlines()
    if not text or (len(lines) == 1 and lines[0] == text):
        return text
    return "; ".join(kept for line in lines if (kept := line.strip()))


def describe_error(error: object) -> str:
    """``error`` as a log line shows it: the library's errors by their message, others with
    their type; a group by its message and each of its errors. Never raises: an
    exception whose ``__str__`` fails reads ``<str() failed: AttributeError>``."""
    if isinstance(error, MCRuntimeError) or not isinstance(error, BaseException):
        return error_text(error)
    if isinstance(error, BaseExceptionGroup):
        return f"{error_text(error.message)}: " + "; ".join(
            describe_error(e) for e in error.exceptions
        )
    text = error_text(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class FailureStreaks:
    """The failure streaks of one ``component`` (``"informer kind=v1/ConfigMap"``), logged to ``logger``.

    `fail` and `succeed` count; `log_failure` and `log_recovery` write the
    lines; `failed` and `recovered` do both, which is what most callers want.
    A key's streak starts at its first failure and ends at its next success
    (or `forget`). Thread-safe. Its lines carry ``fields`` (`log_fields`: what the
    component is about, ``controller=`` or ``kind=``) and their cluster as record
    attributes.
    """

    def __init__(
        self, logger: logging.Logger, component: str, fields: Mapping[str, str] | None = None
    ) -> None:
        self.logger = logger
        self.component = component
        #: the fields (`log_fields`) of every line, beside the ``cluster`` of the line's
        self.fields: dict[str, str] = dict(fields or {})
        self._lock = threading.Lock()
        self._failures: dict[Hashable, int] = {}
        self._failed_at: dict[Hashable, float] = {}  # the last failure of each streak

    def __repr__(self) -> str:
        return f"FailureStreaks({self.component!r}, failing={len(self._failures)})"

    # -- counting ----------------------------------------------------------------------

    def fail(self, key: Hashable) -> int:
        """Count a failure of ``key``; its number in the streak (1: the first)."""
        with self._lock:
            n = self._failures.get(key, 0) + 1
            self._failures[key] = n
            self._failed_at[key] = time.monotonic()
            return n

    def succeed(self, key: Hashable, since: float | None = None) -> int:
        """End ``key``'s streak; how many failures it had (0: it was not failing).

        ``since`` is when the call that succeeded began (``time.monotonic()``): a call begun
        before the streak's last failure, answered after it (two threads doing the same
        thing), says nothing of the fault and does not end the streak (0).
        """
        with self._lock:
            if since is not None and self._failed_at.get(key, since) > since:
                return 0
            self._failed_at.pop(key, None)
            return self._failures.pop(key, 0)

    def failures(self, key: Hashable) -> int:
        """The failures of ``key``'s streak so far (0: not failing)."""
        with self._lock:
            return self._failures.get(key, 0)

    def failing(self) -> list[Hashable]:
        """The keys failing now (a copy: `forget` may be called while going through it)."""
        with self._lock:
            return list(self._failures)

    def forget(self, key: Hashable) -> None:
        """Drop ``key``'s streak without a line (its cluster left; what failed changed)."""
        with self._lock:
            self._failures.pop(key, None)
            self._failed_at.pop(key, None)

    def clear(self) -> None:
        """Drop every streak without a line (what they were about stopped)."""
        with self._lock:
            self._failures.clear()
            self._failed_at.clear()

    # -- the lines -----------------------------------------------------------------------

    def _fields(self, cluster: str | None) -> dict[str, str]:
        return {**self.fields, **log_fields(cluster=cluster)}

    def _prefix(self, cluster: str | None, also: str = "") -> str:
        if cluster is None:  # not about one cluster (a provider's file)
            return self.component
        if also:
            return f"cluster={display_name(cluster)} {also} {self.component}"
        return f"cluster={display_name(cluster)} {self.component}"

    def log_failure(
        self,
        n: int,
        cluster: str | None,
        what: str,
        error: object,
        *,
        retry: str,
        traceback: BaseException | None = None,
        also: str = "",
    ) -> None:
        """Log failure number ``n`` of a streak: a warning for the first, debug for the rest.

        ``retry`` says what happens next ("retrying with backoff"); ``cluster``
        None for a failure that is not about one cluster; ``traceback``: an exception
        whose traceback the first line carries (a bug in user code, not a fault);
        ``also``: the other clusters the failure is about, said after ``cluster``'s name
        (``"and 499 other clusters on https://host:6443"``).
        """
        if n <= 1:
            self.logger.warning(
                "%s: %s failed: %s; %s; further failures are logged at debug level "
                "until it recovers",
                self._prefix(cluster, also),
                what,
                describe_error(error),
                retry,
                exc_info=traceback,
                extra=self._fields(cluster),
            )
        elif self.logger.isEnabledFor(logging.DEBUG):
            self.logger.debug(
                "%s: %s still failing (%d): %s",
                self._prefix(cluster, also),
                what,
                n,
                describe_error(error),
                extra=self._fields(cluster),
            )

    def log_recovery(
        self, n: int, cluster: str | None, what: str, *, detail: str = "", also: str = ""
    ) -> None:
        """Log the end of a streak of ``n`` failures (nothing when ``n`` is 0); ``detail`` is
        appended; ``also``: see `log_failure`."""
        if n:
            self.logger.info(
                "%s: %s works again after %d failed attempt%s%s",
                self._prefix(cluster, also),
                what,
                n,
                "" if n == 1 else "s",
                detail,
                extra=self._fields(cluster),
            )

    # -- both ----------------------------------------------------------------------------

    def failed(
        self,
        cluster: str | None,
        what: str,
        error: object,
        *,
        retry: str,
        key: Hashable | None = None,
        traceback: BaseException | None = None,
    ) -> bool:
        """Count and log a failure of ``what`` on ``cluster``; True when it is the first of its streak.

        The streak is ``(cluster, what)``'s unless ``key`` is given (one streak
        for failures described in different words); ``traceback``: see `log_failure`.
        """
        n = self.fail((cluster, what) if key is None else key)
        self.log_failure(n, cluster, what, error, retry=retry, traceback=traceback)
        return n == 1

    def recovered(
        self,
        cluster: str | None,
        what: str,
        *,
        key: Hashable | None = None,
        detail: str = "",
        since: float | None = None,
    ) -> int:
        """End the streak of ``what`` on ``cluster`` (or ``key``), logging it if there was one;
        how many failures it had (``since``: see `succeed`)."""
        n = self.succeed((cluster, what) if key is None else key, since)
        self.log_recovery(n, cluster, what, detail=detail)
        return n
