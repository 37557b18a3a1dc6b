"""The cluster-inventory provider: ClusterProfiles of an envtest management server engage other envtest servers."""

from __future__ import annotations

import base64
import json
import logging
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import mcruntime
from mcruntime import errors as ci_errors
from mcruntime.cluster import Cluster
from mcruntime.envtest import Proxy, wait_for
from mcruntime.errors import ClusterLeft, ClusterNotFound
from tests.integration.multicluster._mc_helpers import CM, configmap, running
from tests.integration.providers.distributions._support import (
    READ_SECRETS,
    Running,
    check_management_hang_is_said,
    check_refused_list_is_said_and_does_not_hold_start,
    grant,
    stop_while_callers_management_hangs,
    stop_while_management_hangs,
)

ci = pytest.importorskip(
    "mcruntime_cluster_inventory", reason="pip install -e ./providers/cluster-inventory"
)

pytestmark = pytest.mark.timeout(60)

PROFILE = "multicluster.x-k8s.io/v1alpha1/ClusterProfile"
CRD = "apiextensions.k8s.io/v1/CustomResourceDefinition"


@pytest.fixture
def mgmt(make_envtest_server: Any) -> Iterator[Cluster]:
    server = make_envtest_server("mgmt")
    c = Cluster.from_kubeconfig(server.kubeconfig(), name="writer")
    c.client.create(ci.CLUSTER_PROFILE_CRD)

    def established() -> bool:
        crd = c.api_reader.get(CRD, ci.CLUSTER_PROFILE_CRD["metadata"]["name"])
        return any(
            x.get("type") == "Established" and x.get("status") == "True"
            for x in (crd.get("status") or {}).get("conditions") or ()
        )

    wait_for(established, what="ClusterProfile CRD established")
    c.server = server  # type: ignore[attr-defined]
    yield c
    c.stop()


@pytest.fixture
def spokes(make_envtest_server: Any) -> dict[str, Any]:
    out = {}
    for name in ("spoke-a", "spoke-b"):
        s = make_envtest_server(name)
        w = Cluster.from_kubeconfig(s.kubeconfig(), name="writer")
        w.client.create(configmap("whoami", who=name))
        w.stop()
        out[name] = s
    return out


def profile(name: str, healthy: bool | None) -> dict[str, Any]:
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"displayName": name, "clusterManager": {"name": "test"}},
    }


def set_health(mgmt: Cluster, name: str, healthy: bool, **status: Any) -> None:
    cond = {
        "type": "ControlPlaneHealthy",
        "status": "True" if healthy else "False",
        "reason": "Test",
        "message": "set by the test",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    mgmt.client.patch_status(PROFILE, name, {"status": {"conditions": [cond], **status}}, "default")


def kubeconfig_secret(
    name: str, profile_name: str, server: Any, consumer: str = "mcr"
) -> dict[str, Any]:
    raw = yaml.safe_dump(server.kubeconfig()).encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {ci.SECRET_LABEL_CONSUMER: consumer, ci.SECRET_LABEL_PROFILE: profile_name},
        },
        "data": {ci.SECRET_DATA_KEY: base64.b64encode(raw).decode()},
    }


def who(mgr: mcruntime.Manager, cluster: str) -> str | None:
    try:
        return str(mgr.get_cluster(cluster).api_reader.get(CM, "whoami", "default")["data"]["who"])
    except (ClusterNotFound, ClusterLeft):  # not engaged (yet), or being replaced
        return None


def test_a_hung_management_cluster_is_said_once_and_in_discovery_error(
    mgmt: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = Proxy(mgmt.server).start()  # type: ignore[attr-defined]
    try:
        check_management_hang_is_said(
            lambda hub: ci.Provider(hub, ci.SecretStrategy("mcr")), path, monkeypatch, caplog
        )
    finally:
        path.stop()


def test_a_misspelled_cluster_options_key_is_refused_at_construction(mgmt: Cluster) -> None:
    """Else every profile's cluster would fail to build, reported as unusable credentials."""
    with pytest.raises(ValueError) as err:
        ci.Provider(mgmt, ci.SecretStrategy("mcr"), cluster_options={"cache_optons": None})
    assert str(err.value) == (
        "provider 'cluster-inventory': option 'cluster_options': unknown key 'cache_optons'; "
        "did you mean 'cache_options'? (known: cache_options, uncached)"
    )


def test_secret_strategy_engages_healthy_profiles_reengages_on_new_credentials_and_disengages(
    mgmt: Cluster, spokes: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = ci.Provider(
        Cluster.from_kubeconfig(mgmt.server.kubeconfig(), name="management"),  # type: ignore[attr-defined]
        ci.SecretStrategy("mcr"),
        unhealthy_grace_period=1.0,
    )
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        mgmt.client.create(kubeconfig_secret("p1-kubeconfig", "p1", spokes["spoke-a"]))
        mgmt.client.create(profile("p1", None))
        mgmt.client.create(kubeconfig_secret("p2-kubeconfig", "p2", spokes["spoke-b"]))
        mgmt.client.create(profile("p2", None))
        set_health(mgmt, "p2", True)
        wait_for(lambda: who(mgr, "default/p2") == "spoke-b", what="p2 engaged")
        assert "default/p1" not in mgr.engaged_clusters(), (
            "a profile without ControlPlaneHealthy waits"
        )

        set_health(mgmt, "p1", True)
        wait_for(lambda: who(mgr, "default/p1") == "spoke-a", what="p1 engaged once healthy")

        fresh = kubeconfig_secret("p1-kubeconfig", "p1", spokes["spoke-b"])
        mgmt.client.patch("v1/Secret", "p1-kubeconfig", {"data": fresh["data"]}, "default")
        wait_for(lambda: who(mgr, "default/p1") == "spoke-b", what="p1 re-engaged")

        set_health(mgmt, "p1", False)
        unhealthy = time.monotonic()
        wait_for(lambda: "default/p1" not in mgr.engaged_clusters(), what="p1 disengaged")
        assert time.monotonic() - unhealthy >= 0.9, "kept for the grace period"

        mgmt.client.delete(PROFILE, "p2", "default")
        wait_for(lambda: not mgr.engaged_clusters(), what="p2 disengaged when deleted")

        mgmt.client.create(
            {
                **kubeconfig_secret("p3-kubeconfig", "p3", spokes["spoke-a"]),
                # base64 (kube-apiserver refuses a Secret's data that is not), but no YAML
                "data": {ci.SECRET_DATA_KEY: base64.b64encode(b"{not: [yaml").decode()},
            }
        )
        mgmt.client.create(profile("p3", None))
        set_health(mgmt, "p3", True)
        wait_for(
            lambda: any(
                "default/p3" in r.getMessage() and "skipped" in r.getMessage()
                for r in caplog.records
            ),
            what="broken Secret reported",
        )
    text = "\n".join(r.getMessage() for r in caplog.records)
    for s in spokes.values():
        assert s.token not in text, "no token in the logs"


def test_profiles_whose_secrets_exist_at_start_are_not_reported_as_having_none(
    mgmt: Cluster, spokes: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # the profiles' first list was judged before the Secrets' was in: "skipped: no Secret
    # labelled ..." for every profile at every start
    caplog.set_level(logging.INFO, logger="mcruntime.providers.cluster_inventory")
    names = [f"p{i}" for i in range(6)]
    for i, name in enumerate(names):
        server = spokes["spoke-a" if i % 2 else "spoke-b"]
        mgmt.client.create(kubeconfig_secret(f"{name}-kubeconfig", name, server))
        mgmt.client.create(profile(name, None))
        set_health(mgmt, name, True)
    provider = ci.Provider(
        Cluster.from_kubeconfig(mgmt.server.kubeconfig(), name="management"),  # type: ignore[attr-defined]
        ci.SecretStrategy("mcr"),
    )
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        # start() returned: the profiles present at start are engaged
        assert sorted(mgr.engaged_clusters()) == [f"default/{n}" for n in names]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not warnings, warnings


def test_a_management_cluster_refusing_the_secrets_list_is_said_and_does_not_hold_start(
    mgmt: Cluster, spokes: dict[str, Any], run_provider: Callable[[Any, Any], Running]
) -> None:
    mgmt.client.create(kubeconfig_secret("a-kubeconfig", "a", spokes["spoke-a"]))
    mgmt.client.create(profile("a", None))
    set_health(mgmt, "a", True)
    verbs = ["get", "list", "watch"]
    profiles = {"apiGroups": ["multicluster.x-k8s.io"], "resources": ["clusterprofiles"]}
    grant(mgmt, "ci-provider", [{**profiles, "verbs": verbs}], "default/ci-provider")
    kubeconfig = mgmt.server.kubeconfig(service_account="default/ci-provider")  # type: ignore[attr-defined]
    check_refused_list_is_said_and_does_not_hold_start(
        ci.Provider(
            Cluster.from_kubeconfig(kubeconfig, name="management"), ci.SecretStrategy("mcr")
        ),
        run_provider,
        lambda: grant(
            mgmt, "ci-provider", [{**profiles, "verbs": verbs}, READ_SECRETS], "default/ci-provider"
        ),
        "default/a",
    )


def test_start_returns_once_the_ready_profiles_present_at_start_are_engaged(
    mgmt: Cluster, spokes: dict[str, Any]
) -> None:
    for name, spoke in (("p1", "spoke-a"), ("p2", "spoke-b")):
        mgmt.client.create(kubeconfig_secret(f"{name}-kubeconfig", name, spokes[spoke]))
        mgmt.client.create(profile(name, None))
        set_health(mgmt, name, True)
    mgmt.client.create(profile("p3", None))  # not ready: not waited for
    provider = ci.Provider(
        Cluster.from_kubeconfig(mgmt.server.kubeconfig(), name="management"),  # type: ignore[attr-defined]
        ci.SecretStrategy("mcr"),
    )
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        # as with the file, namespace and kubeconfig providers: get_cluster works right after
        # start()
        assert sorted(mgr.engaged_clusters()) == ["default/p1", "default/p2"]
        assert who(mgr, "default/p1") == "spoke-a" and who(mgr, "default/p2") == "spoke-b"


def test_without_the_clusterprofile_crd_start_is_not_held_and_the_crd_installed_later_is_watched(
    make_envtest_server: Any, spokes: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.providers.cluster_inventory")
    server = make_envtest_server("bare-hub")  # no ClusterProfile CRD (yet)
    provider = ci.Provider(
        Cluster.from_kubeconfig(server.kubeconfig(), name="management"), ci.SecretStrategy("mcr")
    )
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(engage_sync_timeout=20)
    )
    began = time.monotonic()
    with running(mgr):
        # no profile can exist before the CRD: start() does not wait for a first list
        assert time.monotonic() - began < 5
        # said by the provider's own thread, which start() no longer waits for
        warned = wait_for(
            lambda: [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING],
            what="the missing CRD said",
        )
        assert len(warned) == 1 and "install the Cluster Inventory API's CRD" in warned[0], warned
        writer = Cluster.from_kubeconfig(server.kubeconfig(), name="writer")
        try:
            writer.client.create(ci.CLUSTER_PROFILE_CRD)
            wait_for(lambda: "serves multicluster.x-k8s.io" in caplog.text, timeout=30)
            writer.client.create(kubeconfig_secret("p1-kubeconfig", "p1", spokes["spoke-a"]))
            wait_for(lambda: _created(writer, profile("p1", None)), what="profile p1 created")
            set_health(writer, "p1", True)
            assert wait_for(lambda: who(mgr, "default/p1"), timeout=30) == "spoke-a"
        finally:
            writer.stop()


def _created(cluster: Cluster, obj: dict[str, Any]) -> bool:
    """Create ``obj``; False while its kind is not served yet (a CRD just created)."""
    try:
        cluster.client.create(obj)
    except ci_errors.NoKindMatch:
        return False
    return True


def test_a_readiness_check_that_keeps_failing_is_logged_once_until_it_works_again(
    mgmt: Cluster, spokes: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    # an engaged profile whose check fails is checked again about every second of its grace
    # period: one warning, then debug lines, and one line when the check works again
    caplog.set_level(logging.DEBUG, logger="mcruntime.providers.cluster_inventory")
    failing, calls = [False], [0]

    def ready(profile: dict[str, Any]) -> bool:
        calls[0] += 1
        if failing[0]:
            raise KeyError("status")
        return ci.control_plane_healthy(profile)

    provider = ci.Provider(
        Cluster.from_kubeconfig(mgmt.server.kubeconfig(), name="management"),  # type: ignore[attr-defined]
        ci.SecretStrategy("mcr"),
        ready=ready,
        unhealthy_grace_period=30.0,
    )
    mgr = mcruntime.Manager(provider=provider)
    prefix = "cluster=default/p1 provider=cluster-inventory: readiness check "

    def lines(level: int) -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno == level and r.getMessage().startswith(prefix)
        ]

    with running(mgr):
        mgmt.client.create(kubeconfig_secret("p1-kubeconfig", "p1", spokes["spoke-a"]))
        mgmt.client.create(profile("p1", None))
        set_health(mgmt, "p1", True)
        wait_for(lambda: who(mgr, "default/p1") == "spoke-a", what="p1 engaged")
        failing[0] = True
        before = calls[0]
        set_health(mgmt, "p1", True, version={"kubernetes": "1.31"})  # an update: checked
        wait_for(lambda: calls[0] >= before + 4, timeout=20, what="the check run again")
        (warning,) = lines(logging.WARNING)
        assert warning == (
            f"{prefix}failed: KeyError; treated as not ready; further failures are logged at "
            "debug level until it recovers"
        )
        assert any("still failing (3)" in m for m in lines(logging.DEBUG))
        assert "default/p1" in mgr.engaged_clusters(), "kept for its grace period"
        failing[0] = False
        wait_for(lambda: lines(logging.INFO), what="the check works again")
        assert lines(logging.INFO)[0].startswith(f"{prefix}works again after ")
        assert len(lines(logging.WARNING)) == 1


@pytest.mark.parametrize("allow_files", [False, True])
def test_a_secret_kubeconfig_may_read_local_files_only_when_the_strategy_allows(
    mgmt: Cluster,
    spokes: dict[str, Any],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    allow_files: bool,
) -> None:
    # the pod's own token, named by whoever can write the Secret, must not be sent to the
    # server they name
    caplog.set_level(logging.WARNING)
    token_file = tmp_path / "token"
    token_file.write_text(spokes["spoke-a"].token)
    doc = spokes["spoke-a"].kubeconfig()
    doc["users"][0]["user"] = {"tokenFile": str(token_file)}
    secret = kubeconfig_secret("p4-kubeconfig", "p4", spokes["spoke-a"])
    secret["data"] = {ci.SECRET_DATA_KEY: base64.b64encode(yaml.safe_dump(doc).encode()).decode()}
    provider = ci.Provider(
        Cluster.from_kubeconfig(mgmt.server.kubeconfig(), name="management"),  # type: ignore[attr-defined]
        ci.SecretStrategy("mcr", allow_files=allow_files),
    )
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        mgmt.client.create(secret)
        mgmt.client.create(profile("p4", None))
        set_health(mgmt, "p4", True)
        if allow_files:
            wait_for(lambda: who(mgr, "default/p4") == "spoke-a", what="p4 engaged")
        else:
            wait_for(lambda: "allow_files is off" in caplog.text, what="the Secret refused")
            assert f"reads the local file '{token_file}' (tokenFile)" in caplog.text
            assert "default/p4" not in mgr.engaged_clusters()
    assert spokes["spoke-a"].token not in caplog.text


PLUGIN = textwrap.dedent(
    """
    import json, pathlib, sys
    token = pathlib.Path(sys.argv[1]).read_text().strip()
    print(json.dumps({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }))
    """
)


def _server_of(server: Any) -> dict[str, Any]:
    """The ``cluster`` entry a platform publishes: the server and its CA (envtest serves TLS)."""
    entry: dict[str, Any] = server.kubeconfig()["clusters"][0]["cluster"]
    return {k: v for k, v in entry.items() if k in ("server", "certificate-authority-data")}


def test_access_provider_strategy_takes_the_server_from_the_profile_and_the_token_from_the_plugin(
    mgmt: Cluster, spokes: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    token_file = tmp_path / "token"
    token_file.write_text(spokes["spoke-a"].token)
    token_file.chmod(0o600)
    options = ci.Options(
        strategy="access-provider",
        access_providers=[
            {
                "name": "test-platform",
                "exec": {"command": sys.executable, "args": [str(script), str(token_file)]},
            }
        ],
        kubeconfig=None,
    )
    strategy = ci.AccessProviderStrategy(options.access_providers)
    provider = ci.Provider(
        Cluster.from_kubeconfig(mgmt.server.kubeconfig(), name="management"),  # type: ignore[attr-defined]
        strategy,
    )
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        mgmt.client.create(profile("a", None))
        set_health(
            mgmt,
            "a",
            True,
            accessProviders=[{"name": "test-platform", "cluster": _server_of(spokes["spoke-a"])}],
        )
        mgmt.client.create(profile("b", None))
        set_health(
            mgmt,
            "b",
            True,
            accessProviders=[{"name": "someone-else", "cluster": _server_of(spokes["spoke-b"])}],
        )
        wait_for(
            lambda: who(mgr, "default/a") == "spoke-a", what="a engaged with the plugin's token"
        )
        wait_for(
            lambda: any(
                "default/b" in r.getMessage() and "someone-else" in r.getMessage()
                for r in caplog.records
            ),
            what="b reported: its access provider is not configured here",
        )
        assert "default/b" not in mgr.engaged_clusters()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert spokes["spoke-a"].token not in text


RECORDING_PLUGIN = textwrap.dedent(
    """
    import json, os, pathlib, sys
    pathlib.Path(sys.argv[2]).write_text(os.environ.get("KUBERNETES_EXEC_INFO", ""))
    token = pathlib.Path(sys.argv[1]).read_text().strip()
    print(json.dumps({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }))
    """
)


def test_an_access_provider_plugin_that_asks_for_the_cluster_info_is_told_the_profiles_cluster(
    mgmt: Cluster, spokes: dict[str, Any], tmp_path: Path
) -> None:
    # as OCM's cp-creds needs: provideClusterInfo passes the server, the CA and the
    # client.authentication.k8s.io/exec extension (its clusterName) as spec.cluster
    script = tmp_path / "plugin.py"
    script.write_text(RECORDING_PLUGIN)
    token_file = tmp_path / "token"
    token_file.write_text(spokes["spoke-a"].token)
    token_file.chmod(0o600)
    seen = tmp_path / "exec-info.json"
    options = ci.Options(
        strategy="access-provider",
        access_providers=[
            {
                "name": "open-cluster-management",
                "exec": {
                    "command": sys.executable,
                    "args": [str(script), str(token_file), str(seen)],
                    "provideClusterInfo": True,
                },
            }
        ],
        kubeconfig=None,
    )
    provider = ci.Provider(
        Cluster.from_kubeconfig(mgmt.server.kubeconfig(), name="management"),  # type: ignore[attr-defined]
        ci.AccessProviderStrategy(options.access_providers),
    )
    published = {
        **_server_of(spokes["spoke-a"]),
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"clusterName": "a"}}
        ],
    }
    mgr = mcruntime.Manager(provider=provider)
    with running(mgr):
        mgmt.client.create(profile("a", None))
        set_health(
            mgmt,
            "a",
            True,
            accessProviders=[{"name": "open-cluster-management", "cluster": published}],
        )
        wait_for(lambda: who(mgr, "default/a") == "spoke-a", what="a engaged")
    info = json.loads(seen.read_text())
    assert info["spec"]["cluster"]["server"] == published["server"]
    assert (
        info["spec"]["cluster"]["certificate-authority-data"]
        == published["certificate-authority-data"]
    )
    assert info["spec"]["cluster"]["config"] == {"clusterName": "a"}


def test_an_access_provider_plugin_is_told_no_cluster_unless_it_asks() -> None:
    strategy = ci.AccessProviderStrategy(
        [ci.AccessProvider(name="p", exec=ci.ExecConfig(command="tool"))]
    )
    doc = strategy.kubeconfig(
        _with_status("a", accessProviders=[{"name": "p", "cluster": {"server": "https://a"}}]),
        {},
    )
    assert doc["users"][0]["user"]["exec"]["provideClusterInfo"] is False


@pytest.mark.timeout(20)
def test_stop_cuts_the_list_of_a_hung_management_cluster(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, thread_baseline: Callable[[], None]
) -> None:
    caplog.set_level(logging.WARNING)
    stop_while_management_hangs("cluster-inventory", tmp_path, strategy="secret", consumer="mcr")
    assert "did not stop" not in caplog.text
    thread_baseline()


def test_stop_cuts_the_list_of_a_hung_management_cluster_the_caller_passed_in(
    caplog: pytest.LogCaptureFixture, thread_baseline: Callable[[], None]
) -> None:
    caplog.set_level(logging.WARNING)
    stop_while_callers_management_hangs(
        lambda cluster: ci.Provider(cluster, ci.SecretStrategy("mcr"))
    )
    assert not caplog.records, caplog.text
    thread_baseline()


def test_options_name_what_each_strategy_needs() -> None:
    with pytest.raises(ValueError, match="consumer"):
        ci.Options(strategy="secret")
    with pytest.raises(ValueError, match="access_providers"):
        ci.Options(strategy="access-provider")


def test_a_check_across_options_is_reported_in_its_own_words() -> None:
    # the model's validator, not one option: no "option '(options)': Value error, ..."
    from mcruntime.plugins import ProviderError, validate_options

    with pytest.raises(ProviderError) as err:
        validate_options("cluster-inventory", strategy="secret")
    assert str(err.value).startswith(
        "provider 'cluster-inventory': strategy 'secret' needs consumer"
    ), str(err.value)
    assert "Value error" not in str(err.value) and "(options)" not in str(err.value)


def test_the_plugin_is_registered_under_cluster_inventory() -> None:
    from mcruntime.plugins import available_providers

    assert "cluster-inventory" in available_providers()


def _with_status(name: str, **status: Any) -> dict[str, Any]:
    return {**profile(name, None), "status": status}


def test_the_secret_strategy_refuses_two_secrets_for_one_profile_without_showing_them(
    spokes: dict[str, Any],
) -> None:
    s1 = kubeconfig_secret("one", "p", spokes["spoke-a"])
    s2 = kubeconfig_secret("two", "p", spokes["spoke-b"])
    strategy = ci.SecretStrategy("mcr")
    with pytest.raises(ci_errors.ConfigError, match=r"2 kubeconfig Secrets \(one, two\)") as err:
        strategy.kubeconfig(profile("p", None), {("default", "one"): s1, ("default", "two"): s2})
    assert spokes["spoke-a"].token not in str(err.value)
    other = kubeconfig_secret("three", "p", spokes["spoke-a"], consumer="someone-else")
    with pytest.raises(ci_errors.ConfigError, match="no Secret labelled"):
        strategy.kubeconfig(profile("p", None), {("default", "three"): other})


def test_the_access_provider_strategy_reads_the_older_credential_providers_field() -> None:
    strategy = ci.AccessProviderStrategy(
        [ci.AccessProvider(name="p", exec=ci.ExecConfig(command="tool", args=["x"]))]
    )
    doc = strategy.kubeconfig(
        _with_status("a", credentialProviders=[{"name": "p", "cluster": {"server": "https://a"}}]),
        {},
    )
    assert doc["clusters"][0]["cluster"] == {"server": "https://a"}
    assert doc["users"][0]["user"]["exec"]["command"] == "tool"
    with pytest.raises(ci_errors.ConfigError, match="names no cluster server"):
        strategy.kubeconfig(_with_status("b", accessProviders=[{"name": "p", "cluster": {}}]), {})


def test_the_secret_strategy_says_an_empty_data_key_is_empty(spokes: dict[str, Any]) -> None:
    strategy = ci.SecretStrategy("mcr")
    empty = kubeconfig_secret("kc", "p", spokes["spoke-a"])
    empty["data"] = {ci.SECRET_DATA_KEY: ""}
    with pytest.raises(ci_errors.ConfigError, match="data key 'Config' is empty"):
        strategy.kubeconfig(profile("p", None), {("default", "kc"): empty})
    missing = {**empty, "data": {}}
    with pytest.raises(ci_errors.ConfigError, match="has no data key 'Config'"):
        strategy.kubeconfig(profile("p", None), {("default", "kc"): missing})


def test_a_namespace_that_is_no_name_is_refused_at_construction(mgmt: Cluster) -> None:
    # its profiles would be none, silently
    from mcruntime.plugins import ProviderError, load_provider

    with pytest.raises(ProviderError, match="option 'namespace': 'Fleet_NS' is not a valid"):
        load_provider("cluster-inventory", consumer="mcr", namespace="Fleet_NS")
    with pytest.raises(ValueError, match="option 'namespace': 'Fleet_NS' is not a valid"):
        ci.Provider(mgmt, ci.SecretStrategy("mcr"), namespace="Fleet_NS")


def test_the_consumers_order_of_access_providers_wins_over_the_profiles() -> None:
    # as the ClusterProfile API's access package: the first configured provider the
    # profile offers, not the first the profile lists
    strategy = ci.AccessProviderStrategy(
        [
            ci.AccessProvider(name="preferred", exec=ci.ExecConfig(command="preferred-plugin")),
            ci.AccessProvider(name="fallback", exec=ci.ExecConfig(command="fallback-plugin")),
        ]
    )
    offered = [
        {"name": "fallback", "cluster": {"server": "https://fallback"}},
        {"name": "preferred", "cluster": {"server": "https://preferred"}},
    ]
    doc = strategy.kubeconfig(_with_status("a", accessProviders=offered), {})
    assert doc["users"][0]["user"]["exec"]["command"] == "preferred-plugin"
    assert doc["clusters"][0]["cluster"]["server"] == "https://preferred"
    # the newer field replaces the older one's entry of the same name
    doc = strategy.kubeconfig(
        _with_status(
            "b",
            credentialProviders=[{"name": "preferred", "cluster": {"server": "https://old"}}],
            accessProviders=[{"name": "preferred", "cluster": {"server": "https://new"}}],
        ),
        {},
    )
    assert doc["clusters"][0]["cluster"]["server"] == "https://new"


#: an access-provider file as Go consumers read it (``--clusterprofile-provider-file``)
PROVIDER_FILE = {
    "providers": [
        {
            "name": "secretreader",
            "execConfig": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "secretreader-plugin",
                "args": ["--mode", "token"],
                "env": [{"name": "PLUGIN_TOKEN", "value": "s3cr3t-env-value"}],
                "installHint": "install secretreader-plugin",
                "interactiveMode": "Never",
                "provideClusterInfo": True,
            },
            "profileSourcedCLIArgsPolicy": "Append",
            "profileSourcedEnvVarsPolicy": "AppendIfNotExists",
        }
    ]
}


def test_the_access_provider_file_of_the_cluster_profile_api_is_read(tmp_path: Path) -> None:
    from mcruntime.plugins import validate_options

    path = tmp_path / "clusterprofile-provider-file.json"
    path.write_text(json.dumps(PROVIDER_FILE))
    options = validate_options(
        "cluster-inventory", strategy="access-provider", access_providers_file=str(path)
    )
    strategy = ci.AccessProviderStrategy(options.access_providers)  # type: ignore[attr-defined]
    cluster = {
        "server": "https://a",
        "extensions": [
            {"name": ci.EXTENSION_ADDITIONAL_ARGS, "extension": ["--cluster", "a"]},
            {
                "name": ci.EXTENSION_ADDITIONAL_ENVS,
                "extension": {"PLUGIN_TOKEN": "from-profile", "REGION": "eu"},
            },
        ],
    }
    doc = strategy.kubeconfig(
        _with_status("a", accessProviders=[{"name": "secretreader", "cluster": cluster}]), {}
    )
    exec_cfg = doc["users"][0]["user"]["exec"]
    assert exec_cfg["command"] == "secretreader-plugin"
    assert exec_cfg["args"] == ["--mode", "token", "--cluster", "a"]
    # AppendIfNotExists: the consumer's own variable is kept, the profile's new one added
    assert sorted((e["name"], e["value"]) for e in exec_cfg["env"]) == [
        ("PLUGIN_TOKEN", "s3cr3t-env-value"),
        ("REGION", "eu"),
    ]
    assert exec_cfg["provideClusterInfo"] is True
    assert exec_cfg["installHint"] == "install secretreader-plugin"
    assert exec_cfg["interactiveMode"] == "Never"


def test_what_a_profile_adds_to_the_plugin_follows_the_consumers_policies() -> None:
    def run_of(**policies: str) -> dict[str, Any]:
        strategy = ci.AccessProviderStrategy(
            [
                ci.AccessProvider.model_validate(
                    {
                        "name": "p",
                        "exec": {"command": "tool", "args": ["own"], "env": {"A": "own"}},
                        **policies,
                    }
                )
            ]
        )
        cluster = {
            "server": "https://a",
            "extensions": [
                {"name": ci.EXTENSION_ADDITIONAL_ARGS, "extension": ["added"]},
                {"name": ci.EXTENSION_ADDITIONAL_ENVS, "extension": {"A": "profile", "B": "b"}},
            ],
        }
        doc = strategy.kubeconfig(
            _with_status("a", accessProviders=[{"name": "p", "cluster": cluster}]), {}
        )
        exec_cfg: dict[str, Any] = doc["users"][0]["user"]["exec"]
        return {
            "args": exec_cfg["args"],
            "env": {e["name"]: e["value"] for e in exec_cfg["env"]},
        }

    # by default the profile adds nothing to a command run in this process
    assert run_of() == {"args": ["own"], "env": {"A": "own"}}
    assert run_of(profileSourcedEnvVarsPolicy="Replace") == {
        "args": ["own"],
        "env": {"A": "profile", "B": "b"},
    }
    assert run_of(profileSourcedCLIArgsPolicy="Append")["args"] == ["own", "added"]
    bad = ci.AccessProviderStrategy(
        [
            ci.AccessProvider.model_validate(
                {"name": "p", "exec": {"command": "t"}, "profileSourcedCLIArgsPolicy": "Append"}
            )
        ]
    )
    cluster = {
        "server": "https://a",
        "extensions": [{"name": ci.EXTENSION_ADDITIONAL_ARGS, "extension": "--one-string"}],
    }
    with pytest.raises(ci_errors.ConfigError, match="is not a list of strings") as err:
        bad.kubeconfig(_with_status("a", accessProviders=[{"name": "p", "cluster": cluster}]), {})
    assert "--one-string" not in str(err.value)


def test_a_bad_access_provider_file_is_named_without_its_values(tmp_path: Path) -> None:
    from mcruntime.plugins import ProviderError, validate_options

    path = tmp_path / "providers.json"
    entry = dict(PROVIDER_FILE["providers"][0])
    entry["execConfig"] = {**entry["execConfig"], "interactiveMode": "Sometimes"}
    path.write_text(json.dumps({"providers": [entry]}))
    with pytest.raises(ProviderError, match=r"providers\[0\]: execConfig.interactiveMode") as err:
        validate_options(
            "cluster-inventory", strategy="access-provider", access_providers_file=str(path)
        )
    assert "s3cr3t-env-value" not in str(err.value) and str(path) in str(err.value)
    with pytest.raises(ProviderError, match="cannot be read"):
        validate_options(
            "cluster-inventory",
            strategy="access-provider",
            access_providers_file=str(tmp_path / "missing.json"),
        )


def test_a_failing_access_provider_plugin_is_named_by_the_access_provider_and_profile() -> None:
    from mcruntime.plugins import cluster_from_kubeconfig

    strategy = ci.AccessProviderStrategy(
        [
            ci.AccessProvider(
                name="corp-sso",
                exec=ci.ExecConfig(command=sys.executable, args=["-c", "raise SystemExit(3)"]),
            )
        ]
    )
    doc = strategy.kubeconfig(
        _with_status(
            "b",
            accessProviders=[{"name": "corp-sso", "cluster": {"server": "https://127.0.0.1:9"}}],
        ),
        {},
    )
    cluster = cluster_from_kubeconfig(doc, name="default/b", allow_exec=True)
    try:
        with pytest.raises(ci_errors.CredentialError) as err:
            cluster.api_reader.get("v1/Namespace", "default")
    finally:
        cluster.stop()
    assert "of user 'corp-sso' of context 'default/b'" in str(err.value), str(err.value)
