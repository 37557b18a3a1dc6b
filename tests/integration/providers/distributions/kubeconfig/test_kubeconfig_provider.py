"""The ``kubeconfig`` provider plugin against embedded API servers over real HTTP."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization

from mcruntime.envtest import wait_for

pytest.importorskip(
    "mcruntime_kubeconfig",
    reason="the provider is not installed: pip install -e providers/kubeconfig",
)

from mcruntime_kubeconfig import DEFAULT_LABEL, Provider  # noqa: E402

from mcruntime.cluster import Cluster  # noqa: E402
from mcruntime.envtest import APIServer, Fleet  # noqa: E402
from mcruntime.errors import MCRuntimeError  # noqa: E402
from mcruntime.plugins import ProviderError, available_providers, load_provider  # noqa: E402
from tests._rbac import username_of  # noqa: E402

from .._support import (  # noqa: E402
    READ_SECRETS,
    ConfigMapManager,
    RecordingAware,
    Running,
    check_refused_list_is_said_and_does_not_hold_start,
    create_configmap,
    delete_secret,
    ensure_namespace,
    grant,
    put_secret,
    stop_while_callers_management_hangs,
    stop_while_management_hangs,
)

pytestmark = pytest.mark.timeout(60)

NS = "fleet"
ON = {DEFAULT_LABEL: "true"}


def kubeconfig_of(server: APIServer) -> str:
    return yaml.safe_dump(server.kubeconfig())


@pytest.fixture
def writer(management: APIServer) -> Iterator[Cluster]:
    """Writes Secrets into the management cluster (the provider only reads)."""
    cluster = Cluster.from_kubeconfig(management.kubeconfig(), name="writer")
    ensure_namespace(cluster, NS)
    yield cluster
    cluster.stop()


@pytest.fixture
def fleet(make_envtest_fleet: Callable[..., Fleet]) -> Fleet:
    return make_envtest_fleet(2)


def new_provider(management: APIServer, **kwargs: Any) -> Provider:
    return Provider(
        Cluster.from_kubeconfig(management.kubeconfig(), name="management"), namespace=NS, **kwargs
    )


def test_manager_reconciles_configmaps_in_every_cluster_a_labelled_secret_names(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    configmap_manager: Callable[[Any], ConfigMapManager],
    thread_baseline: Callable[[], None],
) -> None:
    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)
    put_secret(writer, NS, "us", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, ON)
    put_secret(writer, NS, "unlabelled", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])})
    put_secret(
        writer,
        NS,
        "switched-off",
        {"kubeconfig": kubeconfig_of(fleet["cluster-0"])},
        {DEFAULT_LABEL: "false"},
    )
    put_secret(
        writer, "default", "elsewhere", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON
    )

    m = configmap_manager(new_provider(management))
    wait_for(lambda: m.engaged() == ["eu", "us"])
    eu = Cluster.from_kubeconfig(fleet["cluster-0"].kubeconfig())
    us = Cluster.from_kubeconfig(fleet["cluster-1"].kubeconfig())
    try:
        create_configmap(eu, "default", "in-eu")
        create_configmap(us, "default", "in-us")
        wait_for(lambda: m.saw("eu", "default/in-eu") and m.saw("us", "default/in-us"))
        assert not m.saw("eu", "default/in-us") and not m.saw("us", "default/in-eu")

        delete_secret(writer, NS, "us")
        wait_for(lambda: m.engaged() == ["eu"])
    finally:
        eu.stop()
        us.stop()
    m.mgr.stop()
    assert m.mgr.engaged_clusters() == []
    thread_baseline()


def test_start_returns_once_the_clusters_of_the_secrets_present_at_start_are_engaged(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    configmap_manager: Callable[[Any], ConfigMapManager],
) -> None:
    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)
    put_secret(writer, NS, "us", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, ON)
    m = configmap_manager(new_provider(management))  # started
    # as with the file and namespace providers: get_cluster works right after start()
    assert m.engaged() == ["eu", "us"]
    assert m.mgr.get_cluster("eu").client.get("v1/Namespace", "default")


def test_a_management_cluster_refusing_the_secrets_list_is_said_and_does_not_hold_start(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
) -> None:
    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)
    kubeconfig = management.kubeconfig(service_account="default/kubeconfig-provider")
    check_refused_list_is_said_and_does_not_hold_start(
        Provider(Cluster.from_kubeconfig(kubeconfig, name="management"), namespace=NS),
        run_provider,
        lambda: grant(writer, "kubeconfig-provider", [READ_SECRETS], "default/kubeconfig-provider"),
        "eu",
    )


def test_changed_kubeconfig_re_engages_and_label_removal_or_deletion_disengages(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    thread_baseline: Callable[[], None],
) -> None:
    aware = RecordingAware()
    run = run_provider(new_provider(management), aware)
    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)
    first = wait_for(lambda: aware.cluster("eu"))
    assert first.rest.host.rstrip("/") == fleet["cluster-0"].url

    # same content (another field changed): no re-engagement; a second Secret marks the point
    # after which the informer has handled the update
    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-0"]), "note": "x"}, ON)
    put_secret(writer, NS, "marker", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, ON)
    wait_for(lambda: aware.cluster("marker"))
    assert aware.count("engage", "eu") == 1 and aware.count("end", "eu") == 0

    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, ON)
    wait_for(lambda: aware.count("engage", "eu") == 2 and aware.count("end", "eu") == 1)
    second = aware.cluster("eu")
    assert (
        second is not None
        and second is not first
        and second.rest.host.rstrip("/") == fleet["cluster-1"].url
    )
    # (stopped by a thread of its own: the handler runs on the thread that reads every watch)
    wait_for(lambda: first.stopped, timeout=5, what="the first cluster stopped")

    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, {})
    wait_for(lambda: "eu" not in aware.names())
    wait_for(lambda: second.stopped, timeout=5, what="the second cluster stopped")

    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, ON)
    wait_for(lambda: "eu" in aware.names())
    delete_secret(writer, NS, "eu")
    wait_for(lambda: aware.names() == ["marker"])

    run.stop()
    assert aware.names() == []
    assert run.error is None
    thread_baseline()


def test_a_kubeconfig_whose_token_alone_changed_is_taken_in_place_not_re_engaged(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    aware = RecordingAware()
    run = run_provider(new_provider(management), aware)
    member = fleet["cluster-0"]
    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(member)}, ON)
    engaged = wait_for(lambda: aware.cluster("eu"))

    assert username_of(engaged.rest) != "system:serviceaccount:default:rotated"
    rotated = yaml.safe_dump(member.kubeconfig(service_account="default/rotated"))

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if "credentials" in r.getMessage()]

    with caplog.at_level(logging.INFO):
        put_secret(writer, NS, "eu", {"kubeconfig": rotated}, ON)
        wait_for(lambda: username_of(engaged.rest) == "system:serviceaccount:default:rotated")
        wait_for(said)  # (said once the swap returned, on the provider's thread)
    assert aware.count("engage", "eu") == 1 and aware.count("end", "eu") == 0
    assert aware.cluster("eu") is engaged
    assert said() == [
        "cluster=eu took new credentials in place (its token changed): it is not engaged "
        "again, its informers and caches go on"
    ]
    run.stop()
    assert run.error is None


def test_broken_kubeconfig_is_logged_without_its_content_and_skipped(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.kubeconfig")
    secret_token = "TOPSECRET-token-4f9a1c"
    bad_context = fleet["cluster-0"].kubeconfig()
    bad_context["users"][0]["user"]["token"] = secret_token
    bad_context["current-context"] = "missing"
    put_secret(writer, NS, "good", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)
    put_secret(writer, NS, "not-yaml", {"kubeconfig": f"clusters: [{{token: {secret_token}"}, ON)
    put_secret(writer, NS, "no-context", {"kubeconfig": yaml.safe_dump(bad_context)}, ON)
    put_secret(writer, NS, "no-key", {"config": kubeconfig_of(fleet["cluster-1"])}, ON)
    put_secret(writer, NS, "empty-key", {"kubeconfig": ""}, ON)

    aware = RecordingAware()
    run_provider(new_provider(management), aware)
    wait_for(lambda: aware.names() == ["good"])

    def warned_about(name: str) -> bool:
        return any(f"/{name} " in r.getMessage() for r in caplog.records)

    wait_for(
        lambda: all(warned_about(n) for n in ("not-yaml", "no-context", "no-key", "empty-key"))
    )
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "not valid YAML" in text and "'missing'" in text
    assert f"{NS}/no-key skipped: has no data key 'kubeconfig'" in text, text
    # present but empty: said so, not "no data key"
    assert f"{NS}/empty-key skipped: data key 'kubeconfig' is empty" in text, text
    for secret in (secret_token, fleet["cluster-0"].token, fleet["cluster-1"].token):
        assert secret not in caplog.text and secret not in text

    # fixing a broken Secret engages it
    put_secret(writer, NS, "not-yaml", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, ON)
    wait_for(lambda: aware.names() == ["good", "not-yaml"])

    # breaking an engaged Secret keeps the running cluster until it is fixed or removed
    good = aware.cluster("good")
    put_secret(writer, NS, "good", {"kubeconfig": "][" + secret_token}, ON)
    wait_for(lambda: sum(1 for r in caplog.records if "/good " in r.getMessage()) == 1)
    assert aware.cluster("good") is good and aware.count("end", "good") == 0
    assert secret_token not in caplog.text


def test_a_secret_whose_client_key_kubectl_cannot_use_is_reported_not_engaged(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # an encrypted key: kubectl refuses it before it connects. Before, the cluster was
    # engaged, and every call of it failed as "TLS handshake failed", retried as unreachable
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.kubeconfig")
    doc = fleet["cluster-0"].kubeconfig(auth="certificate")
    user = doc["users"][0]["user"]
    key = serialization.load_pem_private_key(base64.b64decode(user["client-key-data"]), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pass-phrase"),
    )
    user["client-key-data"] = base64.b64encode(encrypted).decode()
    put_secret(writer, NS, "encrypted", {"kubeconfig": yaml.safe_dump(doc)}, ON)
    put_secret(writer, NS, "plain", {"kubeconfig": kubeconfig_of(fleet["cluster-1"])}, ON)

    aware = RecordingAware()
    run_provider(new_provider(management), aware)
    wait_for(lambda: aware.names() == ["plain"])
    wait_for(lambda: any("/encrypted " in r.getMessage() for r in caplog.records))
    warning = next(r.getMessage() for r in caplog.records if "/encrypted " in r.getMessage())
    assert "its client-key-data is encrypted with a passphrase" in warning
    assert user["client-key-data"] not in caplog.text and "pass-phrase" not in caplog.text
    assert aware.names() == ["plain"]


def test_a_secret_may_neither_run_commands_nor_read_local_files_unless_allowed(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    tmp_path: Path,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # whoever can write a labelled Secret must not run commands in the controller, or make
    # it send a file of its own (the pod's service account token) to a server of theirs
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.kubeconfig")
    marker = tmp_path / "ran"
    with_exec = fleet["cluster-0"].kubeconfig()
    with_exec["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "touch",
            "args": [str(marker)],
            "interactiveMode": "Never",
        }
    }
    token_file = tmp_path / "pod-token"
    token_file.write_text(fleet["cluster-1"].token)
    with_file = fleet["cluster-1"].kubeconfig()
    with_file["users"][0]["user"] = {"tokenFile": str(token_file)}
    put_secret(writer, NS, "runs", {"kubeconfig": yaml.safe_dump(with_exec)}, ON)
    put_secret(writer, NS, "reads", {"kubeconfig": yaml.safe_dump(with_file)}, ON)
    put_secret(writer, NS, "plain", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)

    aware = RecordingAware()
    refusing = run_provider(new_provider(management), aware)
    wait_for(lambda: aware.names() == ["plain"])

    def warning(name: str) -> str:
        return next((m for r in caplog.records if f"/{name} " in (m := r.getMessage())), "")

    wait_for(lambda: warning("runs") and warning("reads"), what="both Secrets refused")
    assert "runs the exec plugin 'touch'" in warning("runs")
    assert "may not run commands (allow_exec is off)" in warning("runs")
    assert f"reads the local file '{token_file}' (tokenFile)" in warning("reads")
    assert "allow_files is off; carry the content in token" in warning("reads")
    assert not marker.exists()
    assert fleet["cluster-1"].token not in caplog.text
    refusing.stop()

    allowed = RecordingAware()
    run_provider(new_provider(management, allow_exec=True, allow_files=True), allowed)
    wait_for(lambda: allowed.names() == ["plain", "reads", "runs"])


def test_plugin_is_found_by_name_and_owns_its_management_cluster(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    tmp_path: Path,
    run_provider: Callable[[Any, Any], Running],
    thread_baseline: Callable[[], None],
) -> None:
    assert "kubeconfig" in available_providers()
    path = management.write_kubeconfig(tmp_path / "management.yaml", context="mgmt")
    provider = load_provider("kubeconfig", kubeconfig=str(path), context="mgmt", namespace=NS)
    assert isinstance(provider, Provider)
    assert provider.management.rest.host.rstrip("/") == management.url

    put_secret(writer, NS, "eu", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)
    aware = RecordingAware()
    run = run_provider(provider, aware)
    wait_for(lambda: aware.names() == ["eu"])
    run.stop()
    assert aware.names() == [] and provider.management.stopped
    thread_baseline()


@pytest.mark.timeout(20)
def test_stop_cuts_the_list_of_a_hung_management_cluster(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, thread_baseline: Callable[[], None]
) -> None:
    caplog.set_level(logging.WARNING)
    stop_while_management_hangs("kubeconfig", tmp_path, namespace=NS)
    assert "did not stop" not in caplog.text
    thread_baseline()


@pytest.mark.timeout(20)
def test_stop_cuts_the_list_of_a_hung_management_cluster_the_caller_passed_in(
    caplog: pytest.LogCaptureFixture, thread_baseline: Callable[[], None]
) -> None:
    # the caller's cluster is theirs to stop: the run reads it through its own connections
    caplog.set_level(logging.WARNING)
    stop_while_callers_management_hangs(lambda cluster: Provider(cluster, namespace=NS))
    assert not caplog.records, caplog.text  # a stop is no failure, and nothing lingers
    thread_baseline()


def test_plugin_options_are_validated_with_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ProviderError) as err:
        load_provider("kubeconfig", label="not a label!")
    assert "'label'" in str(err.value) and "'kubeconfig'" in str(err.value)
    with pytest.raises(ProviderError) as err:
        load_provider("kubeconfig", namspace="x")
    assert "unknown option 'namspace'" in str(err.value)
    with pytest.raises(MCRuntimeError) as err2:
        load_provider("kubeconfig", kubeconfig=str(tmp_path / "nope.yaml"))
    assert "nope.yaml" in str(err2.value)


def test_a_bad_label_value_namespace_or_key_is_refused_at_construction_naming_the_option(
    management: APIServer,
) -> None:
    # refused before any list: the API server would refuse the Secrets' selector for ever
    with pytest.raises(ProviderError) as err:
        load_provider("kubeconfig", label_value="prod eu")
    assert str(err.value).startswith(
        "provider 'kubeconfig': option 'label_value': 'prod eu' is not a valid label value"
    ), str(err.value)
    cluster = Cluster.from_kubeconfig(management.kubeconfig(), name="management")
    with pytest.raises(ValueError) as err3:
        Provider(cluster, label="bad label!")
    assert str(err3.value).startswith(
        "provider 'kubeconfig': option 'label': 'bad label!' is not a valid label key: name part"
    ), str(err3.value)
    with pytest.raises(ValueError, match="option 'label_value': 'prod eu' is not a valid label"):
        Provider(cluster, label_value="prod eu")
    assert Provider(cluster, label="team/fleet", label_value="").label_value == ""
    # a namespace or key that is no name would find nothing, silently
    with pytest.raises(ProviderError, match="option 'namespace': 'Fleet_NS' is not a valid"):
        load_provider("kubeconfig", namespace="Fleet_NS")
    with pytest.raises(ValueError, match="option 'key': '' is not a valid Secret data key"):
        Provider(cluster, key="")


def test_a_misspelled_cluster_options_key_is_refused_at_construction_not_blamed_on_secrets(
    management: APIServer,
) -> None:
    """``cluster_options`` go to every cluster the provider builds: a key the `Cluster` does
    not take would fail each Secret's cluster, logged as though its kubeconfig were
    unusable. Refused when the provider is built, naming the key it meant."""
    with pytest.raises(ValueError) as err:
        new_provider(management, cluster_options={"cache_optons": None})
    assert str(err.value) == (
        "provider 'kubeconfig': option 'cluster_options': unknown key 'cache_optons'; did you "
        "mean 'cache_options'? (known: cache_options, uncached)"
    )
    with pytest.raises(ValueError, match="'cluster_options': key 'allow_exec' is set by the"):
        new_provider(management, cluster_options={"allow_exec": True})
    with pytest.raises(ValueError, match="'cluster_options': ValueError: cannot read kind 'X'"):
        new_provider(management, cluster_options={"uncached": ["X"]})


def test_a_cluster_its_options_do_not_build_is_not_reported_as_an_unusable_kubeconfig(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="mcruntime.providers.kubeconfig")
    provider = new_provider(management, cluster_options={"uncached": ["v1/Secret"]})
    provider.cluster_options = {"uncached": ["NoSuch"]}  # as if the options had changed since
    put_secret(writer, NS, "m0", {"kubeconfig": kubeconfig_of(fleet["cluster-0"])}, ON)
    run_provider(provider, RecordingAware())
    wait_for(lambda: any("/m0 " in r.getMessage() for r in caplog.records))
    (line,) = [r.getMessage() for r in caplog.records if "/m0 " in r.getMessage()]
    assert line.startswith(
        f"provider=kubeconfig cluster=m0 secret {NS}/m0 skipped: the provider's option "
        "'cluster_options' does not build a cluster: ValueError: cannot read kind 'NoSuch'"
    ), line
    assert "unusable kubeconfig" not in line


def test_label_value_none_accepts_any_value(
    management: APIServer,
    writer: Cluster,
    fleet: Fleet,
    run_provider: Callable[[Any, Any], Running],
) -> None:
    put_secret(
        writer, NS, "eu", {"config": kubeconfig_of(fleet["cluster-0"])}, {"team/fleet": "blue"}
    )
    put_secret(writer, NS, "us", {"config": kubeconfig_of(fleet["cluster-1"])}, {"team/fleet": ""})
    aware = RecordingAware()
    run_provider(
        new_provider(management, label="team/fleet", label_value=None, key="config"), aware
    )
    wait_for(lambda: aware.names() == ["eu", "us"])


def test_cli_options_that_look_like_json_reach_the_string_options_as_written() -> None:
    from mcruntime.cli import parse_provider_options

    opts = parse_provider_options(["label_value=true", "namespace=2024"], provider="kubeconfig")
    assert opts == {"label_value": "true", "namespace": "2024"}
    # null still means any value, as the options table says
    assert parse_provider_options(["label_value=null"], provider="kubeconfig") == {
        "label_value": None
    }
    consumer = parse_provider_options(["consumer=1234"], provider="cluster-inventory")
    assert consumer == {"consumer": "1234"}
