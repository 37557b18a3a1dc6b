"""The pytest plugin as a suite using it sees it: what it reports about a test's leftovers."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

LOAD_PLUGIN = """
def pytest_configure(config):
    if not config.pluginmanager.has_plugin("mcruntime"):
        from mcruntime.envtest import pytest_plugin
        config.pluginmanager.register(pytest_plugin, "mcruntime")
"""

MANAGER_TESTS = """
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.providers import clusters


def manager(server):
    provider = clusters.Provider()
    provider.add("left", mcruntime.Cluster.from_kubeconfig(server.kubeconfig(), name="left"))
    mgr = mcruntime.Manager(provider=provider)
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    return mgr


def test_forgets_to_stop_its_manager(envtest_server):
    manager(envtest_server).start()


def test_stops_its_manager(make_envtest_fleet):
    with manager(make_envtest_fleet(1)["cluster-0"]):
        pass


@pytest.fixture
def running():  # set up before envtest_server, torn down after it
    from mcruntime.envtest import APIServer

    with APIServer("own") as server:
        mgr = manager(server)
        with mgr:
            yield mgr


def test_engages_a_cluster_with_a_manager_its_fixture_stops(running, envtest_server):
    running.provider.add(
        "late", mcruntime.Cluster.from_kubeconfig(envtest_server.kubeconfig(), name="late")
    )
    wait_for(lambda: "late" in running.engaged_clusters(), what="late engaged")


@pytest.fixture(scope="module")
def shared():  # one manager for the module's tests, stopped after the last
    from mcruntime.envtest import APIServer

    with APIServer("shared") as server:
        with manager(server) as mgr:
            yield mgr


def test_reads_a_new_kind_through_a_manager_the_module_shares(shared, make_envtest_server):
    make_envtest_server("unused")
    # the shared manager starts an informer now, on first read: its thread, not the test's
    shared.get_cluster("left").client.list("v1/Service", "default")


def test_uses_the_shared_manager_last(shared):  # (the module's fixture ends after this test)
    assert shared.engaged_clusters() == ["left"]
"""


@pytest.mark.timeout(60)
def test_a_manager_left_running_is_reported_with_its_threads(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LOAD_PLUGIN)
    pytester.makepyfile(test_leaks=MANAGER_TESTS)
    # (always: a second warning from the plugin's line would be shown once only)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", "-W", "always::pytest.PytestWarning"
    )
    result.assert_outcomes(passed=5, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*test_leaks.py::test_forgets_to_stop_its_manager",
            "*LeakedThreadsWarning: the test left * mcruntime thread(s) running: "
            "*mcruntime/controller/*mcruntime/informer/left/ConfigMap*"
            "Stop what it started before it ends (a Manager: `with mgr:` or mgr.stop()*",
        ]
    )
    assert "test_stops_its_manager" not in result.stdout.str()
    # threads a test's body started, stopped by a fixture torn down after the envtest ones
    assert "test_engages_a_cluster_with_a_manager_its_fixture_stops" not in result.stdout.str()
    # threads a module-scoped fixture's manager starts on first use are not the test's
    assert "test_reads_a_new_kind_through_a_manager_the_module_shares" not in result.stdout.str()


@pytest.mark.timeout(60)
def test_a_leak_can_be_made_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LOAD_PLUGIN)
    pytester.makepyfile(test_leaks=MANAGER_TESTS)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-q",
        "-W",
        "error::mcruntime.envtest.pytest_plugin.LeakedThreadsWarning",
    )
    result.assert_outcomes(passed=5, errors=1)


def test_the_fleet_factory_takes_names_without_a_number(make_envtest_fleet: Any) -> None:
    fleet = make_envtest_fleet(names=["eu-1", "us-1"])
    assert fleet.names == ["eu-1", "us-1"]
    assert make_envtest_fleet().names == ["cluster-0", "cluster-1", "cluster-2"]


def test_loading_the_plugin_does_not_import_the_api_server() -> None:
    # pytest loads the plugin in every run where mcruntime is installed (each xdist worker
    # too): a suite that never starts a server should not pay for importing one
    code = (
        "import sys, mcruntime.envtest.pytest_plugin, mcruntime.envtest as e\n"
        "assert 'mcruntime.envtest._api' not in sys.modules, 'imported at load'\n"
        "assert e.APIServer.__module__ == 'mcruntime.envtest'\n"
        "assert 'mcruntime.envtest._api' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _files_holding(secret: bytes, paths: list[str]) -> list[str]:
    holding = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                if secret in f.read():
                    holding.append(path)
        except OSError:
            pass  # gone meanwhile, or not ours
    return holding


def test_the_backends_clients_keep_the_client_key_off_disk(
    envtest_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the kubernetes loader wrote the key to a temp file (mkstemp, removed at exit only):
    # a run killed by pytest-timeout's thread method, SIGKILL or a cancelled CI job left it
    import base64
    import os
    import tempfile

    from kubernetes import client as k8s
    from kubernetes.config import kube_config

    from mcruntime.envtest.pytest_plugin import KubeBackend

    cfg = envtest_server.kubeconfig(auth="certificate")
    key = base64.b64decode(cfg["users"][0]["user"]["client-key-data"])
    assert b"PRIVATE KEY" in key
    backend = KubeBackend("kubeconfig", cfg)
    # a temp directory of this test's own: what other processes (xdist workers) write to
    # /tmp meanwhile is not ours; the loader's files of earlier tests are left out too
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    earlier = set(kube_config._temp_files.values())
    with backend.api_client() as api:
        assert k8s.CoreV1Api(api).read_namespace("default").metadata.name == "default"
        written = [os.path.join(tmp_path, n) for n in os.listdir(tmp_path)]
        written += [f for f in kube_config._temp_files.values() if f not in earlier]
        assert _files_holding(key, written) == []


AUTOUSE_CONFTEST = (
    LOAD_PLUGIN
    + """
import logging

import pytest


@pytest.fixture(scope="session", autouse=True)
def quiet_logs():  # a suite's ordinary set-up: it runs nothing of mcruntime's
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    yield
"""
)

UNCHECKED_BEFORE = """
import pytest

import mcruntime
from mcruntime.providers import clusters


def manager(kubeconfig):
    provider = clusters.Provider()
    provider.add("left", mcruntime.Cluster.from_kubeconfig(kubeconfig, name="left"))
    mgr = mcruntime.Manager(provider=provider)
    mcruntime.controller_managed_by(mgr).for_("v1/ConfigMap").complete(lambda req: None)
    return mgr


def test_leaks_beside_a_session_autouse_fixture(envtest_server):
    manager(envtest_server.kubeconfig()).start()


def test_leaks_against_the_backend(kube_backend):
    manager(kube_backend.kubeconfig()).start()


@pytest.fixture(scope="module")
def shared_fleet():  # the docs' way to share a fleet: its servers run no thread of the test's
    from mcruntime.envtest import Fleet

    with Fleet(1) as fleet:
        yield fleet


def test_leaks_against_a_shared_fleet(shared_fleet):
    manager(shared_fleet["cluster-0"].kubeconfig()).start()
"""


@pytest.mark.timeout(90)
def test_a_session_autouse_fixture_the_backend_and_a_shared_fleet_leave_the_check_on(
    pytester: pytest.Pytester,
) -> None:
    # an autouse session fixture (log levels) turned the check off for every test, and a
    # test of kube_backend, or of a fleet of the suite's own, was never checked
    pytester.makeconftest(AUTOUSE_CONFTEST)
    pytester.makepyfile(test_leaks=UNCHECKED_BEFORE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-q", "-W", "always::pytest.PytestWarning"
    )
    result.assert_outcomes(passed=3, warnings=3)
    # (pytest lists the two under one message when they left the same threads)
    out = result.stdout.str()
    summary = out[out.index("warnings summary") :]
    assert "test_leaks.py::test_leaks_beside_a_session_autouse_fixture" in summary, out
    assert "test_leaks.py::test_leaks_against_the_backend" in summary, out
    assert "test_leaks.py::test_leaks_against_a_shared_fleet" in summary, out
    assert "LeakedThreadsWarning: the test left " in summary, out
