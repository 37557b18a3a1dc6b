"""``python -m mcruntime.envtest``: run a fleet of API servers until SIGTERM/SIGINT.

The kubeconfig it writes is marked as its own (a top-level extension, which
``kubectl config`` keeps) and removed when it stops: its servers and tokens end
with the process. It never overwrites a file it did not write, such as
``~/.kube/config``, nor one that another running envtest uses. It writes it
whole once its servers serve: a script may wait for the file, then use it.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pathlib
import select
import signal
import socket
import sys
from types import FrameType
from typing import IO, Any

import yaml

from mcruntime.envtest._fleet import Fleet
from mcruntime.envtest._server import write_kubeconfig_file

#: the name of the kubeconfig extension that marks a file as written by this command
_MARK = "mcruntime.envtest"


def _owner(path: pathlib.Path) -> int | None:
    """The pid that wrote the envtest kubeconfig at ``path``, or None (absent, empty or ours).

    Raises `ValueError` naming why when ``path`` holds anything else.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{path} cannot be read ({exc.strerror})") from None
    if not text.strip():
        return None  # e.g. made by mktemp for us
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError:
        cfg = None
    pid = _marked_pid(cfg)
    if pid is None:
        raise ValueError(
            f"{path} exists and was not written by python -m mcruntime.envtest "
            "(it may be your own kubeconfig): remove it or choose another --kubeconfig"
        )
    return pid


def _marked_pid(cfg: Any) -> int | None:
    if not isinstance(cfg, dict):
        return None
    for ext in cfg.get("extensions") or ():
        if isinstance(ext, dict) and ext.get("name") == _MARK:
            pid = (ext.get("extension") or {}).get("pid")
            return pid if isinstance(pid, int) else 0
    return None


def _alive(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _mark() -> dict[str, Any]:
    """The extension that marks a kubeconfig as this process's."""
    return {"name": _MARK, "extension": {"pid": os.getpid()}}


def _claim(path: pathlib.Path) -> IO[str]:
    """Claim ``path`` for this process now, before the servers start (which takes a while),
    so that an envtest started meanwhile refuses it; `ValueError` naming why not.

    The claim is a lock (``flock``) on a hidden file beside it, ``.<name>.envtest.lock``,
    held until the process ends: the kernel lets go of it when the process dies, even
    killed. The kubeconfig itself is written only once the servers serve, so a file that
    appears there is one to use (a script that waits for it never reads a half-started
    envtest's). Returns the lock's file, to keep open.
    """
    lock_path = _lock_of(path)
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock = lock_path.open("a+")
    except OSError as exc:
        raise ValueError(f"{lock_path} cannot be written ({exc.strerror})") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip()
        lock.close()
        raise ValueError(
            f"{path} is in use by another python -m mcruntime.envtest"
            f"{f' (pid {holder})' if holder.isdigit() else ''}: stop it or choose another path"
        ) from None
    try:
        # what is there: absent, empty, or a killed envtest's, pointing at servers that are
        # gone (removed now: it is no kubeconfig to use while this one starts)
        if _check_free(path) is not None:
            path.unlink(missing_ok=True)
    except (ValueError, OSError) as exc:
        lock.close()
        if isinstance(exc, ValueError):
            raise
        raise ValueError(f"{path} cannot be replaced ({exc.strerror})") from None
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def _lock_of(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(f".{path.name}.envtest.lock")


def _check_free(path: pathlib.Path) -> int | None:
    """Raise `ValueError` unless ``path`` is absent, empty, or a killed envtest's kubeconfig;
    the killed envtest's pid in that last case."""
    pid = _owner(path)
    if pid is not None and _alive(pid):
        raise ValueError(
            f"{path} is in use by another python -m mcruntime.envtest (pid {pid}): stop it or "
            "choose another path"
        )
    return pid


def _remove_if_ours(path: pathlib.Path) -> bool:
    """Remove ``path`` if it still carries this process's mark (``kubectl config`` edits keep it)."""
    try:
        if _marked_pid(yaml.safe_load(path.read_text())) != os.getpid():
            return False
        path.unlink()
    except (OSError, yaml.YAMLError):
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcruntime.envtest",
        description="Run embedded Kubernetes API servers and write a kubeconfig for them.",
    )
    parser.add_argument("--clusters", type=int, default=1, help="number of clusters (default 1)")
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig")
    parser.add_argument("--prefix", default="cluster", help="cluster name prefix (default cluster)")
    parser.add_argument(
        "--history",
        type=int,
        default=10000,
        help="watch events kept per cluster for resuming (default 10000)",
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds added to every request (default 0)"
    )
    parser.add_argument(
        "--auth",
        choices=("token", "certificate"),
        default="token",
        help="credentials the kubeconfig carries: a bearer token or a client certificate "
        "(default token)",
    )
    parser.add_argument(
        "--plain-http",
        action="store_true",
        help="serve plain HTTP instead of HTTPS (kubectl sends no token over plain HTTP)",
    )
    args = parser.parse_args(argv)
    if args.plain_http and args.auth == "certificate":
        parser.error("--auth certificate needs TLS: drop --plain-http")
    if args.clusters < 1:
        parser.error("--clusters must be at least 1")
    if args.history < 1:
        parser.error("--history must be at least 1")
    if args.latency < 0:
        parser.error("--latency must not be negative")
    path = pathlib.Path(args.kubeconfig)
    try:
        lock = _claim(path)
    except ValueError as exc:
        parser.error(f"--kubeconfig: {exc}")

    # SIGTERM and SIGINT wake the main thread through a socket the interpreter writes the
    # signal's number to: a handler that took a lock (an Event's set) could deadlock on the
    # one the main thread held when the signal came
    woken, wake = socket.socketpair()
    wake.setblocking(False)
    signal.set_wakeup_fd(wake.fileno(), warn_on_full_buffer=False)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        pass  # handled by the wakeup socket; this only keeps the default action away

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fleet = Fleet(
        args.clusters,
        prefix=args.prefix,
        history=args.history,
        latency=args.latency,
        tls=not args.plain_http,
        root_ca_configmap=True,
    )
    try:
        fleet.start()
        cfg = fleet.kubeconfig(auth=args.auth)
        cfg["extensions"] = [_mark()]
        # whole or not at all: a script waiting for the file reads it once it is there
        tmp = write_kubeconfig_file(path.with_name(f".{path.name}.{os.getpid()}.tmp"), cfg)
        os.replace(tmp, path)
        print(f"envtest: serving {len(fleet)} clusters, kubeconfig at {path}", flush=True)
        if args.plain_http:
            # client-go reads a kubeconfig's credentials only for TLS: kubectl would be 401
            print(
                "envtest: plain HTTP: kubectl sends no credentials over it (401); use the "
                "kubeconfig from Python, or drop --plain-http for kubectl",
                flush=True,
            )
        else:
            print(f"envtest: kubectl --kubeconfig {path} get ns", flush=True)
        if len(fleet) > 1 and not args.plain_http:
            print(
                f"envtest: other clusters: kubectl --kubeconfig {path} --context "
                f"{fleet.names[1]} get ns (contexts: {', '.join(fleet.names)})",
                flush=True,
            )
        select.select([woken], [], [])  # until SIGTERM or SIGINT
    finally:
        signal.set_wakeup_fd(-1)
        woken.close()
        wake.close()
        fleet.close()
        removed = _remove_if_ours(path)
        # the lock goes last: an envtest that takes the path next finds it free of ours
        _lock_of(path).unlink(missing_ok=True)
        lock.close()
        if removed:
            print(f"envtest: stopped, removed {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
