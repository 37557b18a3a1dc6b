"""Fleet of servers and the ``python -m mcruntime.envtest`` command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
import yaml
from kubernetes import client, config

from mcruntime.envtest import APIServer, Fleet, wait_for

pytestmark = pytest.mark.timeout(60)


def _core(cfg: dict, context: str | None = None) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config_dict(cfg, context=context))


def test_fleet_servers_are_independent_clusters() -> None:
    with Fleet(3) as fleet:
        assert fleet.names == ["cluster-0", "cluster-1", "cluster-2"] and len(fleet) == 3
        assert [s.name for s in fleet] == fleet.names
        assert len({s.port for s in fleet}) == 3
        cfg = fleet.kubeconfig()
        assert cfg["current-context"] == "cluster-0"
        assert [c["name"] for c in cfg["contexts"]] == fleet.names
        _core(cfg, "cluster-1").create_namespaced_config_map(
            "default", {"metadata": {"name": "only-1"}}
        )
        assert [
            i.metadata.name
            for i in _core(cfg, "cluster-1").list_namespaced_config_map("default").items
        ] == ["only-1"]
        assert _core(cfg, "cluster-2").list_namespaced_config_map("default").items == []
        assert fleet["cluster-1"].token != fleet["cluster-2"].token
    assert not any(s.running for s in fleet)


def test_fleet_add_and_remove_while_running(tmp_path) -> None:
    with Fleet(names=["eu", "us"], history=50) as fleet:
        added = fleet.add("ap")
        assert isinstance(added, APIServer) and added.running and added.history == 50
        assert fleet.names == ["eu", "us", "ap"]
        path = fleet.write_kubeconfig(tmp_path / "kubeconfig")
        assert [c["name"] for c in yaml.safe_load(path.read_text())["contexts"]] == [
            "eu",
            "us",
            "ap",
        ]
        assert _core(fleet["ap"].kubeconfig()).read_namespace("default").metadata.name == "default"
        removed = fleet.remove("eu")
        assert not removed.running and "eu" not in fleet
        with pytest.raises(ValueError):
            fleet.add("us")
        with pytest.raises(KeyError):
            fleet.remove("eu")
        with pytest.raises(KeyError, match=r"no cluster 'eu' in the fleet \['us', 'ap'\]"):
            fleet.freeze("eu")  # named with the fleet's, as the member removed or never added
    stopped = Fleet(1)
    assert not stopped.add("later").running


@pytest.fixture
def cli() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start ``python -m mcruntime.envtest --kubeconfig PATH ...``; killed at the end if still
    running (a failed assertion must not leave servers behind)."""
    started: list[subprocess.Popen[str]] = []

    def start(kubeconfig: object, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcruntime.envtest", "--kubeconfig", str(kubeconfig), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_cli_over_plain_http_offers_no_kubectl_command_that_would_fail(tmp_path, cli) -> None:
    # client-go sends a kubeconfig's credentials over TLS only (clientcmd's ClientConfig):
    # the usual "kubectl ... get ns" hint would answer "You must be logged in"
    kubeconfig = tmp_path / "kc.yaml"
    proc = cli(kubeconfig, "--clusters", "2", "--plain-http")
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("envtest: serving 2 clusters")
    line = proc.stdout.readline()
    assert line.startswith("envtest: plain HTTP: kubectl sends no credentials"), line
    assert "kubectl --kubeconfig" not in line
    proc.terminate()
    rest, _err = proc.communicate(timeout=30)
    assert "kubectl --kubeconfig" not in rest


def test_cli_serves_until_sigterm_then_removes_its_kubeconfig(tmp_path, cli) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    proc = cli(kubeconfig, "--clusters", "2")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == f"envtest: serving 2 clusters, kubeconfig at {kubeconfig}"
    assert proc.stdout.readline().strip() == f"envtest: kubectl --kubeconfig {kubeconfig} get ns"
    assert "--context cluster-1 get ns" in proc.stdout.readline()
    cfg = yaml.safe_load(kubeconfig.read_text())
    assert [c["name"] for c in cfg["contexts"]] == ["cluster-0", "cluster-1"]
    cluster = cfg["clusters"][1]["cluster"]
    assert cluster["server"].startswith("https://") and cluster["certificate-authority-data"]
    core = _core(cfg, "cluster-1")
    core.create_namespaced_config_map("default", {"metadata": {"name": "from-test"}})
    assert core.read_namespaced_config_map("from-test", "default").metadata.name == "from-test"
    # a second envtest must not take over the kubeconfig the first one serves
    second = cli(kubeconfig)
    _out, err = second.communicate(timeout=30)
    assert second.returncode == 2
    assert f"{kubeconfig} is in use by another python -m mcruntime.envtest (pid {proc.pid})" in err
    assert yaml.safe_load(kubeconfig.read_text()) == cfg
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    # its servers and tokens are gone: so is the kubeconfig that pointed at them
    assert proc.stdout.read() == f"envtest: stopped, removed {kubeconfig}\n"
    assert not kubeconfig.exists()


def test_cli_stops_on_a_burst_of_signals(tmp_path, cli) -> None:
    # a handler that set an Event could deadlock on the lock the main thread held when a
    # signal came (a race: seen once in a few dozen runs); the CLI ends whatever the timing
    kubeconfig = tmp_path / "kc.yaml"
    proc = cli(kubeconfig)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("envtest: serving 1 clusters")
    for _ in range(50):
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert not kubeconfig.exists()


def test_cli_writes_its_kubeconfig_only_once_its_servers_serve(tmp_path, cli) -> None:
    # a script that waits for the file and then runs kubectl must find clusters in it, not a
    # claim with none (kubectl then talks to localhost:8080) nor half a file
    kubeconfig = tmp_path / "kc.yaml"
    proc = cli(kubeconfig, "--clusters", "3")

    def first_read() -> str:
        assert proc.poll() is None, f"the CLI exited ({proc.returncode}) before it wrote"
        return kubeconfig.read_text()

    text = wait_for(first_read, 60, "the kubeconfig", interval=0.005, ignore=FileNotFoundError)
    first = [c["name"] for c in yaml.safe_load(text).get("contexts") or ()]
    assert first == ["cluster-0", "cluster-1", "cluster-2"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert not kubeconfig.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no lock or temporary file left


def test_cli_never_overwrites_a_kubeconfig_it_did_not_write(tmp_path, cli) -> None:
    mine = tmp_path / "config"
    text = "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
    mine.write_text(text)
    proc = cli(mine)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert f"{mine} exists and was not written by python -m mcruntime.envtest" in err
    assert mine.read_text() == text


def test_cli_takes_over_the_kubeconfig_of_an_envtest_that_was_killed(tmp_path, cli) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    killed = cli(kubeconfig)
    assert killed.stdout is not None
    assert killed.stdout.readline().startswith("envtest: serving 1 clusters")
    killed.kill()  # SIGKILL: no clean-up, the kubeconfig stays
    killed.communicate()
    assert kubeconfig.exists()
    again = cli(kubeconfig)
    assert again.stdout is not None
    assert again.stdout.readline().startswith("envtest: serving 1 clusters")
    cfg = yaml.safe_load(kubeconfig.read_text())
    assert _core(cfg).read_namespace("default").metadata.name == "default"
    again.send_signal(signal.SIGTERM)
    assert again.wait(timeout=20) == 0
    assert not kubeconfig.exists()


def test_two_clis_started_at_once_on_one_path_do_not_both_serve_it(tmp_path, cli) -> None:
    # the path is claimed before the servers start (which takes a while): the second one
    # refuses it, instead of both writing it and one serving a kubeconfig it no longer holds
    kubeconfig = tmp_path / "kc.yaml"
    procs = [cli(kubeconfig, "--clusters", "3"), cli(kubeconfig, "--clusters", "3")]
    firsts = [p.stdout.readline() for p in procs if p.stdout is not None]
    serving = [
        p for p, line in zip(procs, firsts, strict=True) if line.startswith("envtest: serving")
    ]
    assert len(serving) == 1, firsts
    (refused,) = [p for p in procs if p not in serving]
    _out, err = refused.communicate(timeout=30)
    assert refused.returncode == 2, err
    assert f"--kubeconfig: {kubeconfig} is in use by another python -m mcruntime.envtest" in err
    cfg = yaml.safe_load(kubeconfig.read_text())
    assert cfg["extensions"][0]["extension"]["pid"] == serving[0].pid
    serving[0].send_signal(signal.SIGTERM)
    assert serving[0].wait(timeout=20) == 0
    assert not kubeconfig.exists()
