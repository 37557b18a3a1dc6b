"""Running the ``kind`` command: cluster names and kubeconfigs, interruptible by a stop event."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

from mcruntime.errors import MCRuntimeError
from mcruntime.plugins import ProviderError, kill_process_group

__all__ = ["INSTALL_HINT", "KindCLI", "KindError", "KindNotFound"]

INSTALL_HINT = (
    "install kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation, e.g. "
    "'go install sigs.k8s.io/kind@latest') or point the provider option 'binary' at it"
)
#: how often a running command looks at the stop event (seconds)
_POLL = 0.1


class KindError(MCRuntimeError):
    """A ``kind`` command failed; the message carries its stderr, never its stdout."""


class KindNotFound(ProviderError):
    """The ``kind`` binary is not installed (not on PATH, or not executable)."""


class KindCLI:
    """The ``kind`` command line: ``binary`` is a name looked up on PATH, or a path."""

    def __init__(self, binary: str = "kind", *, timeout: float = 30.0) -> None:
        self.binary = binary
        self.timeout = timeout

    def resolve(self) -> str:
        """The executable's path; [`KindNotFound`][mcruntime_kind.KindNotFound] with what to do when there is none."""
        if os.sep in self.binary or (os.altsep and os.altsep in self.binary):
            if os.path.isfile(self.binary) and os.access(self.binary, os.X_OK):
                return self.binary
            raise KindNotFound(
                f"the kind binary {self.binary!r} does not exist or is not executable; {INSTALL_HINT}"
            )
        found = shutil.which(self.binary)
        if found is None:
            raise KindNotFound(
                f"the kind binary {self.binary!r} was not found on PATH; {INSTALL_HINT}"
            )
        return found

    def run(self, *args: str, stop: threading.Event | None = None) -> bytes:
        """Run ``kind <args>``; its stdout, or [`KindError`][mcruntime_kind.KindError] naming the command and its stderr.

        Returns early with [`KindError`][mcruntime_kind.KindError] (the process killed) when ``stop`` is set.
        """
        argv = [self.resolve(), *args]
        what = "kind " + " ".join(args)
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: killed whole, docker included
            )
        except OSError as exc:
            raise KindError(f"{what}: cannot run {argv[0]}: {exc.strerror}") from None
        deadline = time.monotonic() + self.timeout
        with proc:
            while True:
                try:
                    out, err = proc.communicate(timeout=_POLL)
                    break
                except subprocess.TimeoutExpired:
                    if stop is not None and stop.is_set():
                        kill_process_group(proc)
                        raise KindError(f"{what}: interrupted (stopping)") from None
                    if time.monotonic() >= deadline:
                        kill_process_group(proc)
                        raise KindError(f"{what}: no answer within {self.timeout:g}s") from None
        if proc.returncode != 0:
            detail = " ".join(err.decode(errors="replace").split())[:300] or "no output on stderr"
            raise KindError(f"{what} failed (exit {proc.returncode}): {detail}")
        return out

    def clusters(self, stop: threading.Event | None = None) -> list[str]:
        """``kind get clusters``: the names of the kind clusters."""
        out = self.run("get", "clusters", stop=stop).decode(errors="replace")
        return [line.strip() for line in out.splitlines() if line.strip()]

    def kubeconfig(
        self, name: str, *, internal: bool = False, stop: threading.Event | None = None
    ) -> bytes:
        """``kind get kubeconfig --name <name>`` (``--internal``: the address inside the kind network)."""
        args = ["get", "kubeconfig", "--name", name]
        if internal:
            args.append("--internal")
        return self.run(*args, stop=stop)
