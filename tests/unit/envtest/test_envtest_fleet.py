"""Fleet of servers and the ``python -m mcruntime.envtest`` command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import yaml
from kubernetes import client, config

from mcruntime.envtest import APIServer, Fleet

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
    stopped = Fleet(1)
    assert not stopped.add("later").running


def test_cli_serves_until_sigterm(tmp_path) -> None:
    kubeconfig = tmp_path / "kc.yaml"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mcruntime.envtest",
            "--clusters",
            "2",
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == f"envtest: serving 2 clusters, kubeconfig at {kubeconfig}"
        assert (
            proc.stdout.readline().strip() == f"envtest: kubectl --kubeconfig {kubeconfig} get ns"
        )
        assert "--context cluster-1 get ns" in proc.stdout.readline()
        cfg = yaml.safe_load(kubeconfig.read_text())
        assert [c["name"] for c in cfg["contexts"]] == ["cluster-0", "cluster-1"]
        cluster = cfg["clusters"][1]["cluster"]
        assert cluster["server"].startswith("https://") and cluster["certificate-authority-data"]
        core = _core(cfg, "cluster-1")
        core.create_namespaced_config_map("default", {"metadata": {"name": "from-test"}})
        assert core.read_namespaced_config_map("from-test", "default").metadata.name == "from-test"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert proc.stdout.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
