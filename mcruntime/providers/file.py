"""``file``: clusters from kubeconfig files, directories and globs, watched for changes.

Each context of each file is a cluster named ``<file>+<context>``. A new file
or context engages, a changed one re-engages (one whose user's credentials alone
changed has the engaged cluster take them in place), a removed one disengages. A
broken file is logged with its path and skipped; the other clusters keep
running (clusters it held before keep running until it is fixed or removed). A
context whose cluster name has control characters (a newline, a terminal escape),
which would forge log lines, is skipped with a warning.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import Field

from mcruntime._kubeconfig import default_kubeconfig_path, yaml_problem
from mcruntime._local import check_cluster_name
from mcruntime._logfields import log_fields
from mcruntime._streak import FailureStreaks
from mcruntime.multicluster import PROVIDER_API_VERSION, Clusters
from mcruntime.plugins import CommaSeparated, ProviderOptions, ProviderSpec, hookimpl

__all__ = ["Provider", "Options"]

log = logging.getLogger("mcruntime.providers.file")


def _default_paths() -> list[str]:
    return [p for p in default_kubeconfig_path().split(os.pathsep) if p]


class Options(ProviderOptions):
    """``paths``: kubeconfig files, directories (every file in them) or glob patterns."""

    paths: CommaSeparated = Field(default_factory=_default_paths)
    interval: float = Field(default=1.0, gt=0, description="seconds between scans for changes")
    separator: str = "+"


@dataclass
class _FileState:
    stamp: tuple[int, int]
    contexts: dict[str, str]  # context -> content hash


def _context_hashes(doc: Any) -> dict[str, str]:
    if doc is None:
        raise ValueError("the file is empty")
    if not isinstance(doc, dict):
        raise ValueError("not a kubeconfig (top level is not a mapping)")
    by_name = {
        section: {e.get("name"): e for e in (doc.get(section) or []) if isinstance(e, dict)}
        for section in ("clusters", "users", "contexts")
    }
    out: dict[str, str] = {}
    for name, ctx in by_name["contexts"].items():
        spec = ctx.get("context") or {}
        material = repr(
            (
                spec,
                by_name["clusters"].get(spec.get("cluster")),
                by_name["users"].get(spec.get("user")),
            )
        ).encode()
        out[str(name)] = hashlib.sha256(material).hexdigest()
    if not out:
        raise ValueError("no contexts")
    return out


class Provider(Clusters):
    """Engages every context of the kubeconfig files found under ``options.paths``.

    Its initial clusters are reported after the first scan of the files.
    """

    reports_initial_clusters = True

    def __init__(self, options: Options | None = None) -> None:
        super().__init__("file")
        self.options = options or Options()
        self._files: dict[str, _FileState] = {}
        self._hashes: dict[str, str] = {}  # cluster name -> content hash
        self._broken_contexts: dict[str, str] = {}  # cluster name -> hash of the unusable context
        #: files that cannot be read (key: ("file", path)) and contexts that cannot be loaded
        #: (key: ("context", cluster name)), retried at every scan
        self._streaks = FailureStreaks(log, "file provider", log_fields(provider="file"))
        #: scans made so far
        self.scans = 0

    def _find(self) -> list[str]:
        found: list[str] = []
        for p in map(os.path.expanduser, self.options.paths):
            if any(ch in p for ch in "*?["):
                found.extend(sorted(x for x in glob.glob(p) if os.path.isfile(x)))
            elif os.path.isdir(p):
                found.extend(
                    sorted(
                        os.path.join(p, f)
                        for f in os.listdir(p)
                        if not f.startswith(".") and os.path.isfile(os.path.join(p, f))
                    )
                )
            elif os.path.isfile(p):
                found.append(p)
            else:
                # a typo must not look like an empty fleet: say so once, then keep watching
                self._streaks.failed(
                    None,
                    f"finding {p}",
                    "no such file or directory",
                    retry="watched: its contexts engage when it appears",
                    key=("path", p),
                )
                continue
            self._streaks.recovered(None, f"finding {p}", key=("path", p), detail="; reading it")
        return list(dict.fromkeys(found))

    def scan(self) -> None:
        """Look at every file once: engage new contexts, re-engage changed ones, drop removed ones."""
        from mcruntime.cluster import Cluster

        self.scans += 1
        sep = self.options.separator
        desired: dict[str, tuple[str, str, str]] = {}  # name -> (file, context, hash)
        broken: set[str] = set()
        found = self._find()
        for path in found:
            try:
                st = os.stat(path)
                stamp = (st.st_mtime_ns, st.st_size)
                state = self._files.get(path)
                if state is None or state.stamp != stamp:
                    with open(path, "rb") as fh:
                        contexts = _context_hashes(yaml.safe_load(fh))
                    state = _FileState(stamp, contexts)
                    self._files[path] = state
            except (OSError, ValueError, yaml.YAMLError) as exc:
                if isinstance(exc, yaml.YAMLError):
                    reason = f"the file {yaml_problem(exc)}"
                elif isinstance(exc, OSError):
                    reason = exc.strerror or type(exc).__name__
                else:
                    reason = str(exc)
                self._files.pop(path, None)
                self._streaks.failed(
                    None,
                    f"reading kubeconfig {path}",
                    reason,
                    retry="skipped (its clusters keep running); read again at every scan",
                    key=("file", path),
                )
                broken.add(path)
                continue
            self._streaks.recovered(None, f"reading kubeconfig {path}", key=("file", path))
            for ctx, digest in state.contexts.items():
                desired[f"{path}{sep}{ctx}"] = (path, ctx, digest)
        self._forget_gone(found, desired, broken)
        for name in list(self._hashes):
            file_of = name.rsplit(sep, 1)[0]
            if name not in desired and file_of not in broken:
                self._hashes.pop(name, None)
                self.remove(name)
        for name, (path, ctx, digest) in desired.items():
            if self._hashes.get(name) == digest:
                continue
            what = f"loading context {ctx!r}"
            try:
                # a context name (or file name) with control characters would forge the
                # log lines of its cluster: skipped, warned about once
                check_cluster_name(name)
                cluster = Cluster.from_kubeconfig(path, context=ctx, name=name)
            except Exception as exc:
                # Unlike a streak of retries, each change of a broken context is a new
                # attempt by whoever edits the file: its error is a warning again (the
                # unchanged context is retried at every scan, at debug level).
                if self._broken_contexts.get(name) != digest:
                    self._streaks.forget(("context", name))
                self._streaks.failed(
                    name,
                    what,
                    exc,
                    retry="skipped; loaded again at every scan",
                    key=("context", name),
                )
                self._broken_contexts[name] = digest
                continue
            self._broken_contexts.pop(name, None)
            self._streaks.recovered(name, what, key=("context", name))
            self._hashes[name] = digest
            self.add(name, cluster)

    def _forget_gone(
        self, found: list[str], desired: dict[str, tuple[str, str, str]], broken: set[str]
    ) -> None:
        """Drop what is kept about files and contexts that are gone: a file removed (or a
        context taken out of its file) ends its failure streak, so if it comes back broken
        it is warned about again, and a directory whose files come and go does not grow
        the provider's memory."""
        present = set(found)
        for path in [p for p in self._files if p not in present]:
            del self._files[path]
        for key in self._streaks.failing():
            if not isinstance(key, tuple):
                continue
            kind, name = key
            if (kind == "file" and name not in present) or (
                kind == "context"
                and name not in desired
                and name.rsplit(self.options.separator, 1)[0] not in broken
            ):
                self._streaks.forget(key)
                self._broken_contexts.pop(name, None)

    def run(self, stop: threading.Event) -> None:
        try:
            self.scan()
        finally:
            self.initial_clusters_reported()
        while not stop.wait(self.options.interval):
            try:
                self.scan()
            except Exception:
                log.exception("file provider: scan failed")
        self._hashes.clear()
        self._files.clear()


@hookimpl
def mcruntime_providers() -> list[ProviderSpec]:
    return [
        ProviderSpec(
            "file",
            Options,
            Provider,
            "kubeconfig files, directories and globs",
            api_version=PROVIDER_API_VERSION,
        )
    ]
