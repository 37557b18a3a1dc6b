"""``python -m mcruntime.examples.crd_status``: a FleetJob's Jobs in every cluster, their states rolled up."""

from __future__ import annotations

import io
import pathlib
import re
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client, config

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.controllerutil import LABEL_OWNER_UID
from mcruntime.envtest import APIServer, Fleet
from mcruntime.examples import crd_status as example
from mcruntime.manager import ManagerOptions
from mcruntime.providers import clusters
from tests.e2e.examples._example_support import ExampleProcess, exists, leaked_threads, wait_until

GROUP, VERSION, PLURAL = example.GROUP, example.VERSION, "fleetjobs"


@pytest.mark.timeout(30)
def test_demo_without_arguments_rolls_up_success_and_names_the_failing_cluster(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert example.main(["--duration", "7"]) == 0
    out = capsys.readouterr().out
    fleetjobs = {
        name: (phase, failed, message)
        for name, phase, failed, message in re.findall(
            r"^state: fleetjob default/(\S+) phase=(\S+) failedClusters=(\S+) message=(.*)$",
            out,
            re.M,
        )
    }
    assert set(fleetjobs) == {"flaky", "after-join"}, out  # hello was deleted
    assert fleetjobs["after-join"][:2] == ("Succeeded", "-"), out
    phase, failed, message = fleetjobs["flaky"]
    assert (phase, failed) == ("Failed", "cluster-1"), out
    assert "cluster-1" in message and "BackoffLimitExceeded" in message
    jobs = dict(re.findall(r"^state: cluster=(\S+) jobs: (.*)$", out, re.M))
    # the cluster that joined got the Job of the FleetJob created after it, not those already final
    assert jobs == {
        "cluster-0": "after-join, flaky",
        "cluster-1": "after-join, flaky",
        "cluster-2": "after-join, flaky",
        "cluster-3": "after-join",
    }, out
    assert re.search(r"^simulation: cluster=cluster-1 job default/flaky failed$", out, re.M)
    wait_until(lambda: not leaked_threads(), timeout=5, what=f"threads ended: {leaked_threads()}")


def _fleetjob(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "FleetJob",
        "metadata": {"name": name},
        "spec": {
            "jobTemplate": {
                "metadata": {"labels": {"team": "ci"}},
                "spec": {
                    "backoffLimit": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        }
                    },
                },
            }
        },
    }


def _finish(batch: client.BatchV1Api, name: str, outcome: str) -> None:
    """The test plays the Job controller: mark the Job Complete or Failed."""
    now = "2030-01-01T00:00:00Z"
    if outcome == "Complete":
        status = {
            "succeeded": 1,
            "completionTime": now,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True"},
                {"type": "Complete", "status": "True"},
            ],
        }
    else:
        status = {
            "failed": 2,
            "conditions": [
                {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded"},
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "pod crashed",
                },
            ],
        }
    batch.patch_namespaced_job_status(name, "default", {"status": {"startTime": now, **status}})


@pytest.mark.timeout(45)
def test_fleetjob_status_follows_the_jobs_of_a_changing_fleet(
    tmp_path: pathlib.Path,
    make_envtest_server: Callable[..., APIServer],
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    mgmt = make_envtest_server("management")
    fleet = make_envtest_fleet(2, prefix="remote")
    fleet_dir = tmp_path / "fleet"
    for server in fleet:
        server.write_kubeconfig(fleet_dir / f"{server.name}.yaml")
    mgmt.write_kubeconfig(tmp_path / "mgmt.yaml")
    objects = client.CustomObjectsApi(config.new_client_from_config_dict(mgmt.kubeconfig()))
    batch = {
        s.name: client.BatchV1Api(config.new_client_from_config_dict(s.kubeconfig())) for s in fleet
    }

    def status(name: str) -> dict[str, Any]:
        fj = objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, name)
        return fj.get("status") or {}

    def has_job(cluster: str, name: str) -> bool:
        return exists(lambda: batch[cluster].read_namespaced_job(name, "default"))

    with ExampleProcess(
        "crd_status",
        "--kubeconfig",
        str(tmp_path / "mgmt.yaml"),
        "--provider",
        "file",
        "--provider-option",
        f"paths={fleet_dir}",
        "--provider-option",
        "interval=0.2",
        "--duration",
        "120",
    ) as proc:
        proc.wait_for(r"manager started")
        assert "SIMULATION" not in proc.output  # real clusters' Jobs are not simulated
        objects.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, _fleetjob("build")
        )
        for cluster in batch:
            wait_until(lambda cluster=cluster: has_job(cluster, "build"), what=f"job in {cluster}")
        job = batch["remote-0"].read_namespaced_job("build", "default")
        fj_uid = objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "build")[
            "metadata"
        ]["uid"]
        assert job.metadata.labels["team"] == "ci"
        assert job.metadata.labels[example.MANAGED_LABEL] == "true"
        assert job.metadata.labels[LABEL_OWNER_UID] == fj_uid  # its cross-cluster owner
        assert job.metadata.annotations[example.FLEETJOB_ANNOTATION] == "default/build"
        assert job.spec.backoff_limit == 1
        wait_until(
            lambda: status("build").get("phase") == "Running" and status("build").get("total") == 2,
            what="build Running in 2 clusters",
        )

        # Succeeded only when every cluster's Job succeeded
        _finish(batch["remote-0"], "build", "Complete")
        wait_until(lambda: status("build").get("succeeded") == 1, what="one cluster succeeded")
        assert status("build")["phase"] == "Running"
        _finish(batch["remote-1"], "build", "Complete")
        wait_until(lambda: status("build").get("phase") == "Succeeded", what="build Succeeded")
        assert status("build")["failedClusters"] == []

        # a cluster joining a running FleetJob gets its Job; a failure names the failing cluster
        objects.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, _fleetjob("deploy")
        )
        wait_until(
            lambda: has_job("remote-0", "deploy") and has_job("remote-1", "deploy"),
            what="deploy jobs",
        )
        joined = fleet.add("remote-2")
        batch["remote-2"] = client.BatchV1Api(
            config.new_client_from_config_dict(joined.kubeconfig())
        )
        joined.write_kubeconfig(fleet_dir / "remote-2.yaml")
        wait_until(lambda: has_job("remote-2", "deploy"), what="deploy job in the joined cluster")
        wait_until(lambda: status("deploy").get("total") == 3, what="deploy rolls up 3 clusters")
        assert not has_job("remote-2", "build")  # build had finished before remote-2 joined
        _finish(batch["remote-0"], "deploy", "Complete")
        _finish(batch["remote-1"], "deploy", "Failed")
        wait_until(lambda: status("deploy").get("phase") == "Failed", what="deploy Failed")
        st = status("deploy")
        assert len(st["failedClusters"]) == 1 and st["failedClusters"][0].endswith(
            "remote-1.yaml+remote-1"
        )
        assert st["failedClusters"][0] in st["message"] and "pod crashed" in st["message"]
        rows = {r["name"].rsplit("+", 1)[1]: r["phase"] for r in st["clusters"]}
        assert rows == {"remote-0": "Succeeded", "remote-1": "Failed", "remote-2": "Pending"}

        # deleting a FleetJob deletes its Jobs everywhere, then the FleetJob goes
        objects.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "build")
        for cluster in ("remote-0", "remote-1"):
            wait_until(
                lambda cluster=cluster: not has_job(cluster, "build"),
                what=f"build job gone from {cluster}",
            )
        wait_until(lambda: not exists(lambda: status("build")), what="FleetJob build gone")
        assert all(has_job(c, "deploy") for c in batch)

        assert proc.interrupt() == 0, proc.output
        assert "manager stopped" in proc.output


@pytest.mark.timeout(60)
def test_a_member_down_since_the_start_keeps_a_fleetjob_from_succeeding_without_it(
    make_envtest_server: Callable[..., APIServer],
    make_envtest_fleet: Callable[..., Fleet],
) -> None:
    # the operator restarted while remote-1 was down: its roll-up walked the engaged members,
    # found remote-0's Job done, and declared the FleetJob Succeeded (final) without remote-1
    mgmt = make_envtest_server("management")
    fleet = make_envtest_fleet(2, prefix="remote")
    objects = client.CustomObjectsApi(config.new_client_from_config_dict(mgmt.kubeconfig()))
    batch = {
        s.name: client.BatchV1Api(config.new_client_from_config_dict(s.kubeconfig())) for s in fleet
    }

    def operator() -> mcruntime.Manager:
        provider = clusters.Provider()
        for server in fleet:
            provider.add(
                server.name, Cluster.from_kubeconfig(server.kubeconfig(), name=server.name)
            )
        mgr = mcruntime.Manager(
            mgmt.kubeconfig(), provider=provider, options=ManagerOptions(engage_sync_timeout=1)
        )
        example.build(mgr, out=io.StringIO())
        return mgr

    def status() -> dict[str, Any]:
        fj = objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "build")
        return fj.get("status") or {}

    first = operator()
    example.ensure_crd(first.get_cluster())
    with first:
        objects.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, _fleetjob("build")
        )
        wait_until(lambda: status().get("total") == 2, what="build Running in 2 clusters")
    fleet["remote-1"].stop()
    _finish(batch["remote-0"], "build", "Complete")
    with operator():
        wait_until(lambda: status().get("succeeded") == 1, what="remote-0's Job rolled up")
        st = status()
        assert st["phase"] == "Running"
        assert {r["name"]: r["phase"] for r in st["clusters"]} == {
            "remote-0": "Succeeded",
            "remote-1": "Unknown",
        }
        fleet["remote-1"].start()
        _finish(batch["remote-1"], "build", "Complete")
        wait_until(lambda: status().get("phase") == "Succeeded", timeout=30, what="Succeeded")
    wait_until(lambda: not leaked_threads(), timeout=5, what="threads ended")
