"""Health and readiness checks, served as ``/healthz`` and ``/readyz`` by the manager.

A check is a callable returning ``None`` (healthy) or raising an exception
whose message says what is wrong. Output follows kube-apiserver's format:
``[+]name ok`` / ``[-]name failed: reason`` lines, then ``healthz check passed``
(``failed: reason withheld`` where the reason is not for the caller, as
controller-runtime's public endpoints answer: the manager's probe server shows the
reasons to loopback callers only);
``?exclude=<name>`` (repeatable) leaves a check out, as a probe of a check that
is known to fail for a while may need.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass

__all__ = ["Checker", "CheckResult", "Checks", "ping"]

Checker = Callable[[], None]


def ping() -> None:
    """Always healthy: the process answers."""


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""
    #: a line that is shown but does not fail the endpoint (e.g. one unreachable cluster)
    informational: bool = False


class Checks:
    """A named set of checks (thread-safe); `run()` evaluates them all."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self._checks: dict[str, Checker] = {}
        self._extra: list[Callable[[], list[CheckResult]]] = []

    def add(self, name: str, check: Checker) -> None:
        if not name or "/" in name:
            raise ValueError(f"bad check name {name!r}")
        with self._lock:
            if name in self._checks:
                raise ValueError(f"{self.kind} check {name!r} exists already")
            self._checks[name] = check

    def add_source(self, source: Callable[[], list[CheckResult]]) -> None:
        """Add a producer of several results at once (per-cluster lines)."""
        with self._lock:
            self._extra.append(source)

    def run(self, only: str | None = None) -> list[CheckResult]:
        with self._lock:
            checks = list(self._checks.items())
            extra = list(self._extra)
        results: list[CheckResult] = []
        for name, check in checks:
            if only is not None and name != only:
                continue
            try:
                check()
                results.append(CheckResult(name, True))
            except Exception as exc:
                results.append(CheckResult(name, False, str(exc) or type(exc).__name__))
        for source in extra:
            for r in source():
                if only is None or r.name == only:
                    results.append(r)
        return results

    @staticmethod
    def render(
        results: list[CheckResult],
        kind: str,
        verbose: bool,
        exclude: Collection[str] = (),
        *,
        reasons: bool = True,
    ) -> tuple[int, str]:
        """HTTP status and body for ``results``; those named in ``exclude`` (the
        ``?exclude=`` of a probe) are shown as excluded and fail nothing, and a name no
        check has is warned about, as kube-apiserver's health endpoints answer. Without
        ``reasons``, a failing check says ``failed: reason withheld`` (controller-runtime's
        ``pkg/healthz``: "don't include the error since this endpoint is public")."""
        left = dict.fromkeys(exclude)
        failed = [r for r in results if not r.ok and not r.informational and r.name not in left]
        lines = []
        for r in results:
            if r.name in left:
                left.pop(r.name)
                lines.append(f"[+]{r.name} excluded: ok")
                continue
            mark = "+" if r.ok else ("!" if r.informational else "-")
            reason = r.detail if reasons else "failed: reason withheld"
            detail = "ok" if r.ok else (f"failed: {r.detail}" if reasons else reason)
            if r.informational and not r.ok:
                detail = f"{reason} (does not fail {kind})"
            lines.append(f"[{mark}]{r.name} {detail}")
        if not failed and not verbose:
            return 200, "ok"
        if left:
            names = ",".join(f'"{name}"' for name in left)
            lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
        lines.append(f"{kind} check {'failed' if failed else 'passed'}")
        return (500 if failed else 200), "\n".join(lines) + "\n"
