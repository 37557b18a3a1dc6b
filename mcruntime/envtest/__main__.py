"""``python -m mcruntime.envtest``: run a fleet of API servers until SIGTERM/SIGINT.

The kubeconfig it writes is marked as its own (a top-level extension, which
``kubectl config`` keeps) and removed when it stops: its servers and tokens end
with the process. It never overwrites a file it did not write, such as
``~/.kube/config``, nor one that another running envtest uses.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import sys
import threading
from types import FrameType
from typing import Any

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


def _claim(path: pathlib.Path) -> None:
    """Mark ``path`` as this process's kubeconfig now, before the servers start (which takes
    a while), so that an envtest started meanwhile refuses it; `ValueError` naming why not.

    A path that is not there is created whole and marked, or not at all (another process
    got it first: then what it wrote decides); an empty one, or a killed envtest's, is
    replaced.
    """
    _check_free(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.claim")
    write_kubeconfig_file(tmp, {"apiVersion": "v1", "kind": "Config", "extensions": [_mark()]})
    try:
        try:
            os.link(tmp, path)  # fails if the path is there
            return
        except FileExistsError:
            pass
        _check_free(path)  # (what is there now)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _check_free(path: pathlib.Path) -> None:
    """Raise `ValueError` unless ``path`` is absent, empty, or a killed envtest's kubeconfig."""
    pid = _owner(path)
    if pid is not None and _alive(pid):
        raise ValueError(
            f"{path} is in use by another python -m mcruntime.envtest (pid {pid}): stop it or "
            "choose another path"
        )


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
        _claim(path)
    except ValueError as exc:
        parser.error(f"--kubeconfig: {exc}")

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

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
        path = write_kubeconfig_file(path, cfg)
        print(f"envtest: serving {len(fleet)} clusters, kubeconfig at {path}", flush=True)
        print(f"envtest: kubectl --kubeconfig {path} get ns", flush=True)
        if len(fleet) > 1:
            print(
                f"envtest: other clusters: kubectl --kubeconfig {path} --context "
                f"{fleet.names[1]} get ns (contexts: {', '.join(fleet.names)})",
                flush=True,
            )
        while not stop.wait(0.5):
            pass
    finally:
        fleet.close()
        if _remove_if_ours(path):
            print(f"envtest: stopped, removed {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
