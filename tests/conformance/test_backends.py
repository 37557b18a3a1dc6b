"""The pytest plugin: backend selection by environment and the envtest fixtures' lifetimes."""

from __future__ import annotations

import os
import pathlib
import time
from collections.abc import Callable

import pytest
from kubernetes import client

from mcruntime.envtest import APIServer
from mcruntime.envtest.pytest_plugin import (
    BACKEND_ENV,
    CONTEXT_ENV,
    FAULT_INJECTION_SKIP,
    KUBECONFIG_ENV,
    KubeBackend,
    backend_from_env,
    docker_unavailable_reason,
)

pytestmark = pytest.mark.timeout(60)

ENV_VARS = (BACKEND_ENV, KUBECONFIG_ENV, CONTEXT_ENV)


def test_embedded_backend_is_the_default(kube_backend: KubeBackend) -> None:
    if any(os.environ.get(v) for v in ENV_VARS):
        pytest.skip("the environment selects another backend")
    assert kube_backend.name == "embedded"
    assert kube_backend.embedded
    assert kube_backend.server is not None and kube_backend.server.running
    config = kube_backend.kubeconfig()
    config["users"].clear()
    assert kube_backend.kubeconfig()["users"], "kubeconfig() must return a copy"


def test_kubeconfig_backend_reaches_the_named_context(
    make_envtest_server: Callable[..., APIServer], tmp_path: pathlib.Path
) -> None:
    server = make_envtest_server("kubeconfig-target")
    path = server.write_kubeconfig(tmp_path / "config", context="conformance")
    backend = backend_from_env({KUBECONFIG_ENV: str(path), CONTEXT_ENV: "conformance"})
    try:
        assert backend.name == "kubeconfig"
        assert backend.server is None and not backend.embedded
        with backend.api_client() as api:
            assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"
        with pytest.raises(pytest.skip.Exception, match=FAULT_INJECTION_SKIP):
            backend.require_server()
        with pytest.raises(pytest.skip.Exception):
            backend.read_only_client()
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({BACKEND_ENV: "minikube"}, "expected 'embedded', 'kubeconfig' or 'k3s'"),
        ({BACKEND_ENV: "kubeconfig"}, KUBECONFIG_ENV),
        ({KUBECONFIG_ENV: "/nonexistent/kubeconfig"}, "cannot read"),
    ],
)
def test_bad_backend_environment_is_a_usage_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(pytest.UsageError, match=message):
        backend_from_env(env)


def test_kubeconfig_without_contexts_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "config"
    path.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(pytest.UsageError, match="not a kubeconfig"):
        backend_from_env({KUBECONFIG_ENV: str(path)})


def test_k3s_backend_skips_with_the_reason_when_no_docker_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    began = time.monotonic()
    reason = docker_unavailable_reason()
    assert reason is not None
    assert reason.startswith("no Docker engine answers at tcp://127.0.0.1:1: ")
    with pytest.raises(pytest.skip.Exception, match="no Docker engine answers at"):
        backend_from_env({BACKEND_ENV: "k3s"})
    assert time.monotonic() - began < 15


FIXTURE_TESTS = """
from kubernetes import client, config

SEEN = {}


def test_envtest_server(envtest_server):
    SEEN["server"] = envtest_server
    assert envtest_server.running
    with config.new_client_from_config_dict(envtest_server.kubeconfig()) as api:
        assert client.CoreV1Api(api).read_namespace("default").metadata.name == "default"


def test_envtest_fleet(envtest_fleet):
    SEEN["fleet"] = envtest_fleet
    assert envtest_fleet.names == ["cluster-0", "cluster-1", "cluster-2"]
    assert all(envtest_fleet[n].running for n in envtest_fleet.names)


def test_factories(make_envtest_server, make_envtest_fleet):
    SEEN["custom"] = make_envtest_server("custom", history=5)
    SEEN["edge"] = make_envtest_fleet(2, prefix="edge")
    assert SEEN["custom"].name == "custom" and SEEN["custom"].history == 5
    assert SEEN["edge"].names == ["edge-0", "edge-1"]


def test_kube_namespace(kube_backend, kube_api_client, kube_namespace):
    SEEN["backend"], SEEN["ns"] = kube_backend, kube_namespace
    core = client.CoreV1Api(kube_api_client)
    assert core.read_namespace(kube_namespace).status.phase == "Active"


def test_teardown_stopped_servers_and_deleted_namespace():
    assert not SEEN["server"].running
    assert not any(s.running for s in SEEN["fleet"])
    assert not SEEN["custom"].running
    assert not any(s.running for s in SEEN["edge"])
    with SEEN["backend"].api_client() as api:
        try:
            ns = client.CoreV1Api(api).read_namespace(SEEN["ns"])
        except client.ApiException as e:
            assert e.status == 404
        else:
            assert ns.metadata.deletion_timestamp is not None
"""

LOAD_PLUGIN = """
def pytest_configure(config):
    if not config.pluginmanager.has_plugin("mcruntime"):
        from mcruntime.envtest import pytest_plugin
        config.pluginmanager.register(pytest_plugin, "mcruntime")
"""


def test_fixtures_start_servers_and_clean_up_after_each_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    pytester.makeconftest(LOAD_PLUGIN)
    pytester.makepyfile(test_fixtures=FIXTURE_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=5)


def test_plugin_registers_its_markers(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LOAD_PLUGIN)
    result = pytester.runpytest_inprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.docker:*", "@pytest.mark.slow:*"])


def test_k3s_backend_selected_without_docker_skips_every_backend_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BACKEND_ENV, "k3s")
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
    pytester.makeconftest(LOAD_PLUGIN)
    pytester.makepyfile(
        test_backend="""
def test_uses_backend(kube_backend):
    raise AssertionError("must not run")

def test_without_backend():
    pass
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*no Docker engine answers at tcp://127.0.0.1:1*"])
