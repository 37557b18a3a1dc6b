"""The ``kind`` provider plugin with a stand-in ``kind`` executable serving embedded API servers,
and (slow, Docker) with the real kind."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcruntime.envtest import wait_for

pytest.importorskip(
    "mcruntime_kind", reason="the provider is not installed: pip install -e providers/kind"
)

from mcruntime_kind import KindCLI, KindError, KindNotFound, Options, Provider  # noqa: E402

from mcruntime.envtest import APIServer, Fleet  # noqa: E402
from mcruntime.envtest.pytest_plugin import docker_unavailable_reason  # noqa: E402
from mcruntime.plugins import ProviderError, available_providers, load_provider  # noqa: E402

from .._support import ConfigMapManager, RecordingAware, Running, create_configmap  # noqa: E402

pytestmark = pytest.mark.timeout(60)

STAND_IN = '''#!{python}
"""A stand-in for kind: clusters and their kubeconfigs come from {state}."""
import json, sys
with open({state!r}) as fh:
    state = json.load(fh)
args = sys.argv[1:]
if state.get("fail"):
    print(state["fail"], file=sys.stderr)
    sys.exit(1)
if args[:2] == ["get", "clusters"]:
    if not state["clusters"]:
        print("No kind clusters found.", file=sys.stderr)
    for name in state["clusters"]:
        print(name)
elif args[:2] == ["get", "kubeconfig"] and "--name" in args:
    name = args[args.index("--name") + 1]
    if name not in state["clusters"]:
        print(f'ERROR: could not locate any control plane nodes for cluster named "{{name}}"', file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(state["clusters"][name])
else:
    print("unknown command", args, file=sys.stderr)
    sys.exit(2)
'''


class FakeKind:
    """Writes the stand-in ``kind`` into a directory on PATH and controls what it reports."""

    def __init__(self, bin_dir: Path) -> None:
        bin_dir.mkdir(parents=True, exist_ok=True)
        self.state_file = bin_dir / "state.json"
        self.clusters: dict[str, str] = {}
        self.fail = ""
        self._write()
        self.path = bin_dir / "kind"
        self.path.write_text(STAND_IN.format(python=sys.executable, state=str(self.state_file)))
        self.path.chmod(0o755)

    def _write(self) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"clusters": self.clusters, "fail": self.fail}))
        os.replace(tmp, self.state_file)

    def set(self, name: str, server: APIServer | str) -> None:
        text = (
            server if isinstance(server, str) else yaml.safe_dump(server.kubeconfig(f"kind-{name}"))
        )
        self.clusters[name] = text
        self._write()

    def delete(self, name: str) -> None:
        self.clusters.pop(name, None)
        self._write()

    def failing(self, message: str) -> None:
        self.fail = message
        self._write()


@pytest.fixture
def kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKind:
    fake = FakeKind(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.path.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return fake


@pytest.fixture
def fleet(make_envtest_fleet: Callable[..., Fleet]) -> Fleet:
    return make_envtest_fleet(3)


def fast(**kw: Any) -> Options:
    return Options(interval=0.2, **kw)


def test_manager_reconciles_configmaps_in_every_kind_cluster(
    kind: FakeKind,
    fleet: Fleet,
    configmap_manager: Callable[[Any], ConfigMapManager],
    thread_baseline: Callable[[], None],
) -> None:
    kind.set("dev", fleet["cluster-0"])
    kind.set("test", fleet["cluster-1"])
    m = configmap_manager(Provider(fast()))
    wait_for(lambda: m.engaged() == ["dev", "test"])
    from mcruntime.cluster import Cluster

    test = Cluster.from_kubeconfig(fleet["cluster-1"].kubeconfig())
    try:
        create_configmap(test, "default", "cm")
        wait_for(lambda: m.saw("test", "default/cm"))
        assert not m.saw("dev", "default/cm")
    finally:
        test.stop()
    m.mgr.stop()
    thread_baseline()


def test_polling_engages_new_clusters_drops_deleted_ones_and_re_engages_recreated_ones(
    kind: FakeKind,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    thread_baseline: Callable[[], None],
) -> None:
    aware = RecordingAware()
    kind.set("a", fleet["cluster-0"])
    run = run_provider(Provider(fast(resync=0.2)), aware)
    first = wait_for(lambda: aware.cluster("a"))

    kind.set("b", fleet["cluster-1"])
    wait_for(lambda: aware.names() == ["a", "b"])
    assert aware.count("engage", "a") == 1

    # "a" recreated under the same name (another address): re-read on resync, re-engaged
    kind.set("a", fleet["cluster-2"])
    wait_for(lambda: aware.count("engage", "a") == 2)
    second = aware.cluster("a")
    assert second is not None and second.rest.host.rstrip("/") == fleet["cluster-2"].url
    assert first.stopped

    kind.delete("b")
    wait_for(lambda: aware.names() == ["a"])
    run.stop()
    assert aware.names() == [] and run.error is None
    thread_baseline()


def test_prefix_filters_clusters(
    kind: FakeKind, fleet: Fleet, run_provider: Callable[[Any, Any], Running]
) -> None:
    kind.set("fleet-eu", fleet["cluster-0"])
    kind.set("scratch", fleet["cluster-1"])
    kind.set("fleet-us", fleet["cluster-2"])
    aware = RecordingAware()
    provider = load_provider("kind", prefix="fleet-", interval=0.2)
    run_provider(provider, aware)
    wait_for(lambda: aware.names() == ["fleet-eu", "fleet-us"])
    assert aware.count("engage", "scratch") == 0


def test_kind_failures_are_logged_and_retried_without_dropping_clusters(
    kind: FakeKind,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.kind")
    kind.set("good", fleet["cluster-0"])
    token = fleet["cluster-0"].token
    kind.set("garbled", f"clusters: [{{token: {token}")
    aware = RecordingAware()
    run_provider(Provider(fast()), aware)
    wait_for(lambda: aware.names() == ["good"])
    wait_for(lambda: "cluster=garbled skipped" in caplog.text)
    assert token not in caplog.text

    kind.failing("Cannot connect to the Docker daemon at unix:///var/run/docker.sock")
    wait_for(lambda: "Cannot connect to the Docker daemon" in caplog.text)
    assert "kind get clusters failed (exit 1)" in caplog.text
    assert aware.names() == ["good"]
    failures = sum(1 for r in caplog.records if "Docker daemon" in r.getMessage())

    kind.fail = ""
    kind.set("garbled", fleet["cluster-1"])
    wait_for(lambda: aware.names() == ["garbled", "good"])
    assert sum(1 for r in caplog.records if "Docker daemon" in r.getMessage()) == failures == 1


def test_a_misspelled_cluster_options_key_is_refused_at_construction() -> None:
    """Before kind is looked for: else every kind cluster would fail to build."""
    with pytest.raises(ValueError) as err:
        Provider(fast(binary="/nonexistent/kind"), cluster_options={"uncahced": []})
    assert str(err.value) == (
        "provider 'kind': option 'cluster_options': unknown key 'uncahced'; did you mean "
        "'uncached'? (known: cache_options, uncached, allow_exec, allow_files)"
    )


def test_missing_kind_binary_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert "kind" in available_providers()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(KindNotFound) as err:
        load_provider("kind")
    msg = str(err.value)
    assert "'kind'" in msg and "https://kind.sigs.k8s.io" in msg and "'binary'" in msg
    with pytest.raises(ProviderError) as err2:
        load_provider("kind", binary=str(tmp_path / "no-kind"))
    assert "no-kind" in str(err2.value)
    with pytest.raises(ProviderError) as err3:
        load_provider("kind", interval=0)
    assert "'interval'" in str(err3.value)


def test_binary_option_names_the_executable(
    kind: FakeKind,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    kind.set("x", fleet["cluster-0"])
    aware = RecordingAware()
    run_provider(load_provider("kind", binary=str(kind.path), interval=0.2), aware)
    wait_for(lambda: aware.names() == ["x"])


HUNG_KIND = """#!/bin/sh
# kind waiting for docker: its child holds kind's stdout and never answers
sleep 30 &
echo $! > "$0.child"
wait
"""


@pytest.mark.timeout(15)
@pytest.mark.parametrize("how", ["timeout", "stop"])
def test_a_hung_kind_and_what_it_started_are_killed_at_the_deadline_or_stop(
    tmp_path: Path, how: str
) -> None:
    binary = tmp_path / "kind"
    binary.write_text(HUNG_KIND)
    binary.chmod(0o755)
    child = tmp_path / "kind.child"
    stop = threading.Event()
    cli = KindCLI(str(binary), timeout=1.0 if how == "timeout" else 60.0)
    if how == "stop":
        # stopped once the child runs (its pid written)
        threading.Thread(
            target=lambda: (wait_for(lambda: child.exists() and child.read_text()), stop.set()),
            daemon=True,
        ).start()
    began = time.monotonic()
    with pytest.raises(KindError) as err:
        cli.clusters(stop)
    assert time.monotonic() - began < 5, "kind was waited for past its deadline"
    assert ("no answer within 1s" if how == "timeout" else "interrupted") in str(err.value)
    pid = int(child.read_text())
    wait_for(lambda: not _alive(pid), what=f"kind's child {pid} killed", timeout=5)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(600)
def test_real_kind_cluster_is_engaged_and_dropped(
    run_provider: Callable[[Any, Any], Running],
) -> None:
    if shutil.which("kind") is None:
        pytest.skip(
            "kind is not installed (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)"
        )
    reason = docker_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    name = f"mcrt-e2e-{uuid.uuid4().hex[:6]}"
    subprocess.run(
        ["kind", "create", "cluster", "--name", name, "--wait", "120s"], check=True, timeout=400
    )
    try:
        aware = RecordingAware()
        run_provider(Provider(Options(prefix=name, interval=1.0)), aware)
        cluster = wait_for(lambda: aware.cluster(name), timeout=60)
        assert cluster.api_reader.get("v1/Namespace", "kube-system")
    finally:
        subprocess.run(["kind", "delete", "cluster", "--name", name], timeout=300)
    wait_for(lambda: aware.names() == [], timeout=60)
