"""Where a program without an explicit kubeconfig gets its config, in controller-runtime's
order (``loadConfig``, pkg/client/config/config.go, and kubectl's): ``$KUBECONFIG``, else
the in-cluster config, else ``~/.kube/config``: "If the recommended kubeconfig env variable
is set, or there is no in-cluster config, try the default recommended locations". A pod
whose service account token is not mounted (``automountServiceAccountToken: false``) has
no in-cluster config, however ``KUBERNETES_SERVICE_HOST`` is set."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
import yaml
from kubernetes.config import incluster_config

from mcruntime._kubeconfig import contexts, load_config
from mcruntime.cli import add_arguments, manager_from_args, wants_local_cluster
from mcruntime.cluster import Cluster
from mcruntime.errors import ConfigError
from mcruntime.manager import Manager
from mcruntime.providers import file

pytestmark = pytest.mark.timeout(10)

HOME_SERVER = "https://management.example:6443"


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pod's environment whose service account files would be in ``tmp_path/sa``, none
    mounted; HOME is ``tmp_path/home`` (empty)."""
    sa = tmp_path / "sa"
    sa.mkdir()
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(sa / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(sa / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return sa


def write_home_kubeconfig(home: Path) -> None:
    (home / ".kube").mkdir()
    (home / ".kube" / "config").write_text(
        yaml.safe_dump(
            {
                "current-context": "mgmt",
                "clusters": [
                    {
                        "name": "mgmt",
                        "cluster": {"server": HOME_SERVER, "insecure-skip-tls-verify": True},
                    }
                ],
                "users": [{"name": "me", "user": {"token": "t"}}],
                "contexts": [{"name": "mgmt", "context": {"cluster": "mgmt", "user": "me"}}],
            }
        )
    )


def test_a_pod_without_its_token_falls_back_to_the_home_kubeconfig(
    pod: Path, tmp_path: Path
) -> None:
    write_home_kubeconfig(tmp_path / "home")
    assert load_config().host == HOME_SERVER


def test_a_pod_with_neither_names_the_missing_token_and_the_home_kubeconfig(
    pod: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config()
    assert str(err.value) == (
        f"no kubeconfig: cannot load the in-cluster config: its service account token "
        f"{pod / 'token'} does not exist, and {tmp_path / 'home' / '.kube' / 'config'} "
        "does not exist"
    )


def test_a_pod_with_its_token_uses_the_in_cluster_config(pod: Path, tmp_path: Path) -> None:
    write_home_kubeconfig(tmp_path / "home")
    (pod / "token").write_text("sa-token")
    (pod / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    assert load_config().host == "https://10.96.0.1:443"


def test_cli_auto_wants_a_local_cluster_only_in_a_pod_with_its_token(pod: Path) -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    provider = object()
    assert not wants_local_cluster(parser.parse_args([]), provider)
    (pod / "token").write_text("sa-token")
    (pod / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    assert wants_local_cluster(parser.parse_args([]), provider)


@pytest.fixture
def no_home(monkeypatch: pytest.MonkeyPatch) -> int:
    """A container run as an arbitrary user id (OpenShift's, ``runAsUser: 12345``): HOME is
    not set and the password database has no entry for the user id, so ``~`` names no
    directory (``os.path.expanduser`` leaves it, ``Path.expanduser`` raises RuntimeError)."""
    import pwd

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(f"getpwuid(): uid not found: {uid}")

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    return os.getuid()


def test_a_pod_without_its_token_nor_a_home_says_what_to_set(pod: Path, no_home: int) -> None:
    for load in (load_config, lambda: Cluster.from_kubeconfig(), lambda: Manager()):
        with pytest.raises(ConfigError) as err:
            load()
        assert str(err.value) == (
            f"no kubeconfig: cannot load the in-cluster config: its service account token "
            f"{pod / 'token'} does not exist, and ~/.kube/config cannot be found: HOME is not "
            f"set and user id {no_home} has no entry in the password database (a container run "
            "as an arbitrary user): set KUBECONFIG, or pass a kubeconfig"
        )


def test_outside_a_pod_without_a_home_the_error_says_what_to_set(
    no_home: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    wanted = (
        "no kubeconfig: KUBECONFIG is not set, and ~/.kube/config cannot be found: HOME is not "
        f"set and user id {no_home} has no entry in the password database (a container run "
        "as an arbitrary user): set KUBECONFIG, or pass a kubeconfig"
    )
    for load in (load_config, contexts, file.Options):
        with pytest.raises(ConfigError) as err:
            load()
        assert str(err.value) == wanted


def test_cli_without_a_home_is_a_usage_error_not_a_traceback(
    no_home: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    parser = argparse.ArgumentParser(prog="fleetop")
    add_arguments(parser)
    with pytest.raises(SystemExit) as exit_:
        manager_from_args(parser.parse_args([]), parser=parser)
    assert exit_.value.code == 2
    assert "fleetop: error: no kubeconfig: KUBECONFIG is not set" in capsys.readouterr().err


def test_a_kubeconfig_under_a_tilde_without_a_home_is_a_config_error_naming_it(
    no_home: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ENV KUBECONFIG=~/.kube/config`` in a Dockerfile (Docker does not expand ``~``) run
    as an arbitrary user: pathlib's ``RuntimeError: Could not determine home directory``
    became a ConfigError naming the file, as a missing file is."""
    from mcruntime_kubeconfig import create_kubeconfig_secret

    monkeypatch.setenv("KUBECONFIG", "~/.kube/config")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    loads = (
        load_config,
        contexts,
        lambda: Cluster.from_kubeconfig("~/fleet.yaml"),
        lambda: create_kubeconfig_secret(kubeconfig="~/fleet.yaml"),
    )
    for load in loads:
        with pytest.raises(ConfigError) as err:
            load()
        assert "~/" in str(err.value)
