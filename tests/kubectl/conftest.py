"""Fixtures of the kubectl suite: one TLS envtest server per module, kubeconfigs, a kubectl runner.

The real ``kubectl`` binary drives the server with nothing but ``--kubeconfig``
(and ``--context``); the suite is skipped, with the reason, when no ``kubectl``
is on ``PATH``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mcruntime.envtest import APIServer

KUBECTL_TIMEOUT = 20.0


@dataclass
class Kubectl:
    """Runs one kubectl binary against one kubeconfig; ``run`` raises on a non-zero exit unless ``check=False``."""

    binary: str
    kubeconfig: pathlib.Path

    def run(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = KUBECTL_TIMEOUT,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={
                **os.environ,
                "KUBECACHEDIR": str(self.kubeconfig.parent / "cache"),
                **(env or {}),
            },
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def __call__(self, *args: str, input: str | None = None) -> str:
        return self.run(*args, input=input).stdout


def kubectl_binary(name: str = "kubectl") -> str:
    """``name`` from ``PATH``, or beside the real ``kubectl`` (the Cloud SDK ships ``kubectl.1.27`` ... there)."""
    path = shutil.which(name)
    if path is None and name != "kubectl":
        main = shutil.which("kubectl")
        if main is not None:
            beside = pathlib.Path(os.path.realpath(main)).parent / name
            path = str(beside) if os.access(beside, os.X_OK) else None
    if path is None:
        pytest.skip(f"no {name} on PATH: the kubectl suite drives the real binary")
    return path


@pytest.fixture(scope="module")
def envtest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[APIServer]:
    """One HTTPS envtest server for the module, with kube-root-ca.crt like a real cluster."""
    kubectl_binary()
    with APIServer("kubectl", root_ca_configmap=True) as server:
        yield server


@pytest.fixture(scope="module", params=["token", "certificate"])
def kubectl(
    request: pytest.FixtureRequest, envtest: APIServer, tmp_path_factory: pytest.TempPathFactory
) -> Kubectl:
    """``kubectl`` with a bearer-token kubeconfig, then with a client-certificate one."""
    auth = request.param
    path = envtest.write_kubeconfig(tmp_path_factory.mktemp(f"kc-{auth}") / "config", auth=auth)
    return Kubectl(kubectl_binary(), path)
