"""Credentials that change: exec plugins run within each call's deadline, token files re-read.

A kubeconfig user's ``exec`` plugin (``aws eks get-token``, ``gke-gcloud-auth-plugin``,
``kubelogin``, ``tsh``) is a process that may hang: on its network, or waiting for a
login in a browser. The `kubernetes` loader runs it with no time bound; these tests
hold mcruntime's own runs to the rules every blocking call follows. The plugins are
small Python scripts; the server is envtest over TLS, reached with the real client.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import CoreV1Api

from mcruntime import Cluster, _credentials
from mcruntime._kubeconfig import load_config, new_api_client
from mcruntime.client import RESTClient, cancelled_by
from mcruntime.envtest import APIServer, wait_for
from mcruntime.errors import (
    ClusterLeft,
    ConfigError,
    CredentialError,
    DeadlineExceeded,
    Unauthorized,
)
from tests._blocked import ended_at_once
from tests._issuer import Issuer
from tests._logs import logged
from tests._proxy import ConnectProxy
from tests.integration.client._calls import listing

pytestmark = pytest.mark.timeout(60)

#: the plugin: each run appends its pid to runs.txt, then does what plan.json says for
#: that run (the last entry repeats): print a token or certificate, sleep, or fail
PLUGIN = textwrap.dedent(
    """
    import datetime, json, os, pathlib, subprocess, sys, time
    here = pathlib.Path(sys.argv[1])
    with open(here / "runs.txt", "a") as f:
        f.write(f"{os.getpid()}\\n")
    runs = len((here / "runs.txt").read_text().split())
    plan = json.loads((here / "plan.json").read_text())
    step = plan[min(runs, len(plan)) - 1]
    if "info" in step:
        (here / "info.json").write_text(os.environ["KUBERNETES_EXEC_INFO"])
    if "sleep" in step:
        if step.get("child"):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            (here / "child.txt").write_text(str(child.pid))
        time.sleep(step["sleep"])
    if "flood" in step:  # a plugin printing in a loop (its debug output, say)
        while True:
            sys.stdout.write("x" * 65536)
    if "fail" in step:
        sys.stderr.write("getting a token\\n" + step["fail"] + "\\n")
        sys.exit(3)
    status = {k: step[k] for k in ("token", "clientCertificateData", "clientKeyData") if k in step}
    if "ttl" in step:
        at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=step["ttl"])
        status["expirationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if "expires" in step:
        status["expirationTimestamp"] = step["expires"]
    print(json.dumps({"apiVersion": step.get("apiVersion", "client.authentication.k8s.io/v1"),
                      "kind": "ExecCredential", "status": status}))
    """
)


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    with APIServer("exec-plugins") as s:
        yield s


class Plugin:
    """One plugin's folder: its plan, and the runs it made."""

    def __init__(self, folder: Path, server: APIServer) -> None:
        self.folder = folder
        self.server = server
        (folder / "plugin.py").write_text(PLUGIN)

    def plan(self, *steps: dict[str, Any]) -> None:
        (self.folder / "plan.json").write_text(json.dumps(list(steps)))

    @property
    def runs(self) -> list[int]:
        path = self.folder / "runs.txt"
        return [int(x) for x in path.read_text().split()] if path.exists() else []

    def kubeconfig(self, **exec_fields: Any) -> dict[str, Any]:
        doc = self.server.kubeconfig("exec-ctx")
        doc["users"][0]["name"] = "exec-user"
        doc["contexts"][0]["context"]["user"] = "exec-user"
        doc["users"][0]["user"] = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": sys.executable,
                "args": [str(self.folder / "plugin.py"), str(self.folder)],
                "interactiveMode": "Never",
                **exec_fields,
            }
        }
        return doc

    def cluster(self, **exec_fields: Any) -> Cluster:
        return Cluster.from_config(load_config(path=self.kubeconfig(**exec_fields)), name="exec-a")


@pytest.fixture
def plugin(tmp_path: Path, server: APIServer) -> Plugin:
    return Plugin(tmp_path, server)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0): it is dead once its state says so (or once it was
    # reaped meanwhile, between the two looks)
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _list(cluster: Cluster, **kw: Any) -> list[dict[str, Any]]:
    return cluster.api_reader.list("v1/ConfigMap", namespace="default", **kw)


def test_the_plugin_runs_at_the_first_call_and_its_token_serves_until_it_expires(
    plugin: Plugin, server: APIServer
) -> None:
    plugin.plan({"token": server.token, "ttl": 3600})
    cluster = plugin.cluster()
    assert plugin.runs == [], "loading the context runs no plugin"
    for _ in range(5):
        _list(cluster)
    assert len(plugin.runs) == 1, "one run serves every call until the token expires"


def test_an_expiring_token_is_fetched_again(plugin: Plugin, server: APIServer) -> None:
    # a token within the expiry margin (10 s) counts as expired: each call gets a new one
    plugin.plan({"token": server.token, "ttl": 5})
    cluster = plugin.cluster()
    _list(cluster)
    _list(cluster)
    assert len(plugin.runs) == 2


def test_a_hung_plugin_fails_the_call_at_its_deadline_and_dies_with_its_children(
    plugin: Plugin,
) -> None:
    plugin.plan({"sleep": 600, "child": True})
    cluster = plugin.cluster()
    threads = threading.active_count()
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded) as err:
        _list(cluster, timeout=1.0)
    took = time.monotonic() - began
    assert took < 3.0, f"the call ended {took:.1f}s after it began, its deadline is 1s"
    text = str(err.value)
    assert "[cluster exec-a]" in text and "exec plugin 'python" in text
    assert "user 'exec-user' of context 'exec-ctx'" in text and "it was stopped" in text
    assert str(plugin.folder) not in text, "the plugin's arguments are not quoted"
    (pid,) = plugin.runs
    child = int((plugin.folder / "child.txt").read_text())
    wait_for(lambda: _gone(pid) and _gone(child), timeout=5, what="the plugin and its child dead")
    assert threading.active_count() == threads, "no thread was left behind"


@pytest.mark.parametrize("call", ["request", "watch"])
def test_a_call_on_a_hung_server_has_one_deadline_for_its_credential_and_its_request(
    plugin: Plugin, server: APIServer, call: str
) -> None:
    # the plugin answers after 1 s, then the frozen server never does: the call's one
    # deadline covers both (a fresh one for the request would end it at 2.5 s)
    plugin.plan({"sleep": 1.0, "token": server.token, "ttl": 3600})
    rest = plugin.cluster().client.rest
    path = "/api/v1/namespaces/default/configmaps"
    server.freeze()
    try:
        began = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            if call == "request":
                rest.request("GET", path, timeout=1.5)
            else:
                rest.watch(path, open_timeout=1.5)
        took = time.monotonic() - began
        assert 1.4 < took < 2.2, f"the call took {took:.1f}s for a deadline of 1.5s"
    finally:
        server.thaw()
        rest.close()


def test_a_call_with_a_short_deadline_does_not_stop_the_run_others_wait_for(
    plugin: Plugin, server: APIServer
) -> None:
    # a health probe (0.5 s) starts the plugin as the token expires; a call with 30 s
    # joins it: the probe fails at its deadline, the run goes on for the other call
    plugin.plan({"sleep": 1.5, "token": server.token, "ttl": 3600})
    cluster = plugin.cluster()
    first, probe = listing(cluster, "test-probe", timeout=0.5)
    wait_for(lambda: plugin.runs, timeout=10, what="the plugin started")
    t, raised = listing(cluster, "test-patient-call")
    first.join(5)
    assert len(probe) == 1 and isinstance(probe[0], DeadlineExceeded), probe
    t.join(10)
    assert not t.is_alive() and raised == []
    assert len(plugin.runs) == 1, "the run the probe started served the call that joined it"
    wait_for(
        lambda: (
            not [x for x in threading.enumerate() if x.name.startswith("mcruntime/credential/")]
        ),
        timeout=5,
        what="the run's thread gone",
    )


def test_a_cluster_leaving_kills_a_hung_plugin_at_once(plugin: Plugin) -> None:
    plugin.plan({"sleep": 600})
    cluster = plugin.cluster()
    rest: RESTClient = cluster.client.rest
    t, raised = listing(cluster, "test-hung-plugin-call")
    wait_for(lambda: plugin.runs, timeout=10, what="the plugin started")
    began = time.monotonic()
    rest.close()
    t.join(5)
    assert not t.is_alive()
    assert time.monotonic() - began < 2.0
    assert len(raised) == 1 and isinstance(raised[0], ClusterLeft), raised
    wait_for(lambda: _gone(plugin.runs[0]), timeout=5, what="the plugin dead")


def test_a_call_its_caller_cuts_leaves_a_hung_plugin_at_once_and_the_plugin_dies(
    plugin: Plugin,
) -> None:
    # a cancelled AsyncClient call, a cancelled_by event: the call waiting for the plugin
    # ends now, not at its deadline, and the run nobody waits for any more is stopped
    plugin.plan({"sleep": 600})
    cluster = plugin.cluster()
    stop = threading.Event()

    def call() -> None:
        with cancelled_by(stop, "the test cancelled it"):
            _list(cluster)

    try:
        raised = ended_at_once(call, stop.set, "test-cut-plugin-call")
        assert isinstance(raised, DeadlineExceeded), raised
        assert str(raised).endswith(
            "GET /api/v1/namespaces/default/configmaps: cut: the test cancelled it"
        )
        assert raised.by_caller and not raised.sent
        wait_for(lambda: _gone(plugin.runs[0]), timeout=5, what="the plugin dead")
    finally:
        cluster.stop()


def test_a_cluster_leaving_cuts_a_call_with_a_plugin_credential_on_a_hung_server(
    plugin: Plugin, server: APIServer
) -> None:
    plugin.plan({"token": server.token, "ttl": 3600})
    cluster = plugin.cluster()
    assert _list(cluster) == []
    server.freeze()
    try:
        t, raised = listing(cluster, "test-frozen-call")
        t.join(0.3)
        assert t.is_alive(), "not blocked on the frozen server"
        left_at = time.monotonic()
        cluster.client.rest.close()
        t.join(5)
        assert not t.is_alive() and time.monotonic() - left_at < 1.0
        assert len(raised) == 1 and isinstance(raised[0], ClusterLeft), raised
        assert len(plugin.runs) == 1, "the credential of the first call served the second"
    finally:
        server.thaw()


def _list_at_once(cluster: Cluster, calls: int) -> list[BaseException]:
    """Make ``calls`` calls on as many threads at once; the errors they raised."""
    errors: list[BaseException] = []

    def call() -> None:
        try:
            _list(cluster)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, name=f"test-call-{i}") for i in range(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return errors


def test_concurrent_calls_share_one_run(plugin: Plugin, server: APIServer) -> None:
    plugin.plan({"sleep": 0.5, "token": server.token, "ttl": 3600})
    assert _list_at_once(plugin.cluster(), 8) == []
    assert len(plugin.runs) == 1, "eight calls waited for one run"


def test_concurrent_calls_share_a_failure_instead_of_running_the_plugin_each(
    plugin: Plugin,
) -> None:
    plugin.plan({"sleep": 0.5, "fail": "no network"})
    errors = _list_at_once(plugin.cluster(), 6)
    assert len(errors) == 6 and all(isinstance(e, CredentialError) for e in errors), errors
    assert len(plugin.runs) == 1, "the calls that waited for the run share its failure"


def test_a_failing_plugin_is_not_run_again_by_every_call_and_recovers_after_a_moment(
    plugin: Plugin, server: APIServer
) -> None:
    # an unhealthy cluster is probed each second, and each informer and reconcile retries:
    # a plugin that failed (an expired SSO session) ran for every one of those calls,
    # printing its error each time; its failure is shared for a moment (1 s, doubling)
    plugin.plan({"fail": "the SSO session has expired"}, {"token": server.token, "ttl": 3600})
    cluster = plugin.cluster()
    for _ in range(5):
        with pytest.raises(CredentialError):
            _list(cluster)
    assert len(plugin.runs) == 1, "calls right after a failed run share its failure"
    # fixed (the user logged in again): a call after the hold runs the plugin and goes on
    wait_for(lambda: isinstance(_list(cluster), list), timeout=5, ignore=(CredentialError,))
    assert len(plugin.runs) == 2


def test_a_failing_plugin_is_named_and_what_it_says_goes_to_standard_error_not_to_errors(
    plugin: Plugin, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # what a plugin says of a failure may hold a secret no kubeconfig names (a refresh
    # token it was refused): it reaches this process's standard error, as client-go passes
    # it, never an error or a log line
    caplog.set_level(logging.DEBUG)
    secret = "rt-s3cr3t-refresh-9f2c"
    plugin.plan({"fail": f"refresh token {secret} rejected: the SSO session has expired"})
    cluster = plugin.cluster()
    with pytest.raises(CredentialError) as err:
        _list(cluster)
    text = str(err.value)
    assert text.startswith("[cluster exec-a] the exec plugin 'python")
    assert "exited with status 3 (what it wrote to standard error is this process's)" in text
    assert err.value.cluster_name == "exec-a"
    assert secret not in text and secret not in caplog.text
    assert f"refresh token {secret} rejected" in capfd.readouterr().err


def test_a_plugin_flooding_its_standard_output_is_stopped_at_a_mebibyte(plugin: Plugin) -> None:
    """A plugin that writes without end to its standard output is stopped once it wrote
    more than 1 MiB (an ExecCredential is a few KiB), with a CredentialError saying so, long
    before the call's deadline: its output was read whole, hundreds of MB a second, until
    then."""
    plugin.plan({"flood": True})
    began = time.monotonic()
    with pytest.raises(CredentialError) as err:
        _list(plugin.cluster(), timeout=30)
    assert time.monotonic() - began < 10
    text = str(err.value)
    assert text.startswith("[cluster exec-a] the exec plugin 'python")
    assert text.endswith(
        "wrote more than 1 MiB to its standard output (an ExecCredential is a few KiB); "
        "it was stopped"
    )
    (pid,) = plugin.runs
    wait_for(lambda: _gone(pid), timeout=5, what="the plugin dead")


def test_a_missing_plugin_says_how_to_install_it(plugin: Plugin) -> None:
    cluster = plugin.cluster(
        command="kubectl-no-such-plugin",
        args=[],
        installHint="Install it with: brew install no-such-plugin",
    )
    with pytest.raises(CredentialError) as err:
        _list(cluster)
    assert "'kubectl-no-such-plugin'" in str(err.value)
    assert "was not found; Install it with: brew install no-such-plugin" in str(err.value)


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ({"token": "x", "apiVersion": "client.authentication.k8s.io/v1beta1"}, "its apiVersion"),
        ({"clientKeyData": "k"}, "without the other"),
        ({}, "neither a token nor a client certificate"),
    ],
)
def test_a_plugin_that_writes_no_credential_says_what_is_wrong(
    plugin: Plugin, output: dict[str, Any], why: str
) -> None:
    plugin.plan(output)
    with pytest.raises(CredentialError, match=why):
        _list(plugin.cluster())


def test_a_plugin_output_that_is_no_api_version_is_not_quoted(plugin: Plugin) -> None:
    # a plugin that writes its token where the apiVersion goes (a template's slip) had it
    # quoted in the error ("its apiVersion is 'eyJhbGci...'"), and so in every log line of it;
    # a version is still quoted, as client-go quotes it
    plugin.plan({"token": "t0ken-s3cret", "apiVersion": "t0ken-s3cret"})
    with pytest.raises(CredentialError) as err:
        _list(plugin.cluster())
    assert "t0ken-s3cret" not in str(err.value)
    assert "its apiVersion is not a version, such as client.authentication.k8s.io/v1" in str(
        err.value
    )
    plugin.plan({"token": "x", "apiVersion": "client.authentication.k8s.io/v1beta1"})
    with pytest.raises(
        CredentialError, match="its apiVersion is 'client.authentication.k8s.io/v1beta1'"
    ):
        _list(plugin.cluster())


@pytest.mark.parametrize(
    "stamp", ["2030-01-01T00:00:00", "2030-01-01", "20300101T000000Z", "2030-01-01 00:00:00Z"]
)
def test_an_expiration_timestamp_without_a_zone_or_not_rfc_3339_is_refused_as_client_go_does(
    plugin: Plugin, server: APIServer, stamp: str
) -> None:
    # Python's fromisoformat took these, one without a zone as this machine's local time:
    # the token's lifetime then depended on TZ; client-go's metav1.Time refuses them
    plugin.plan({"token": server.token, "expires": stamp})
    with pytest.raises(CredentialError, match="its expirationTimestamp is not an RFC 3339") as e:
        _list(plugin.cluster())
    assert server.token not in str(e.value)
    assert stamp not in str(e.value)


@pytest.mark.parametrize("stamp", ["2999-01-01T00:00:00Z", "2999-01-01T09:00:00.123456789+09:00"])
def test_an_rfc_3339_expiration_timestamp_with_a_zone_serves_until_then(
    plugin: Plugin, server: APIServer, stamp: str
) -> None:
    plugin.plan({"token": server.token, "expires": stamp})
    cluster = plugin.cluster()
    for _ in range(3):
        _list(cluster)
    assert len(plugin.runs) == 1


def test_a_refused_token_is_replaced_then_the_call_goes_on(
    plugin: Plugin, server: APIServer
) -> None:
    # a revoked token with no expiry: the 401 makes the next run's token replace it, for
    # calls and watches alike
    plugin.plan({"token": "revoked"}, {"token": server.token}, {"token": "revoked"})
    cluster = plugin.cluster()
    assert _list(cluster) == []
    assert len(plugin.runs) == 2
    cluster.client.rest.watch("/api/v1/namespaces/default/configmaps").close()
    assert len(plugin.runs) == 2, "the token that works is kept"


def test_a_watch_refused_with_the_plugins_token_opens_with_the_next(
    plugin: Plugin, server: APIServer
) -> None:
    plugin.plan({"token": "revoked"}, {"token": server.token})
    cluster = plugin.cluster()
    cluster.client.rest.watch("/api/v1/namespaces/default/configmaps").close()
    assert len(plugin.runs) == 2


def test_a_token_refused_again_is_an_error_after_one_more_run(plugin: Plugin) -> None:
    plugin.plan({"token": "revoked"})
    with pytest.raises(Unauthorized):
        _list(plugin.cluster())
    assert len(plugin.runs) == 2, "a 401 runs the plugin again once, not in a loop"


def test_the_plugin_gets_the_cluster_when_it_asks(plugin: Plugin, server: APIServer) -> None:
    plugin.plan({"token": server.token, "info": True})
    doc = plugin.kubeconfig(provideClusterInfo=True)
    doc["clusters"][0]["cluster"]["extensions"] = [
        {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "fleet"}}
    ]
    _list(Cluster.from_config(load_config(path=doc), name="exec-a"))
    info = json.loads((plugin.folder / "info.json").read_text())
    assert info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    cluster = info["spec"]["cluster"]
    assert cluster["server"] == server.url
    assert (
        cluster["certificate-authority-data"]
        == doc["clusters"][0]["cluster"]["certificate-authority-data"]
    )
    assert cluster["config"] == {"audience": "fleet"}


@pytest.mark.parametrize("via", ["direct", "socks-proxy"])
def test_a_client_certificate_from_the_plugin_authenticates(
    plugin: Plugin, server: APIServer, via: str
) -> None:
    user = server.kubeconfig(auth="certificate")["users"][0]["user"]
    cert = base64.b64decode(user["client-certificate-data"]).decode()
    key = base64.b64decode(user["client-key-data"]).decode()
    plugin.plan({"clientCertificateData": cert, "clientKeyData": key, "ttl": 3600})
    doc = plugin.kubeconfig()
    proxy = ConnectProxy()
    if via == "socks-proxy":  # urllib3's SOCKS connections present it too
        doc["clusters"][0]["cluster"]["proxy-url"] = proxy.socks_url
    cluster = Cluster.from_config(load_config(path=doc), name="exec-a")
    try:
        review = cluster.client.create(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
        )
    finally:
        cluster.stop()
        proxy.close()
    assert review["status"]["userInfo"]["username"] == "kubernetes-admin"
    assert len(plugin.runs) == 1
    assert len(proxy.targets) == (1 if via == "socks-proxy" else 0)


def _other_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    return (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        ("key-of-another", "its clientKeyData does not match its clientCertificateData"),
        ("no-certificate", "its clientCertificateData holds no PEM certificate"),
        ("certificate-as-key", "its clientKeyData holds a certificate rather than a key"),
    ],
)
def test_a_client_certificate_from_the_plugin_that_cannot_be_used_is_said_at_once(
    plugin: Plugin, server: APIServer, caplog: pytest.LogCaptureFixture, broken: str, why: str
) -> None:
    caplog.set_level(logging.DEBUG)
    user = server.kubeconfig(auth="certificate")["users"][0]["user"]
    cert = base64.b64decode(user["client-certificate-data"]).decode()
    key = base64.b64decode(user["client-key-data"]).decode()
    if broken == "key-of-another":
        key = _other_key()
    elif broken == "no-certificate":
        cert = "certificate: pending"
    else:
        key = cert
    plugin.plan({"clientCertificateData": cert, "clientKeyData": key, "ttl": 3600})
    with pytest.raises(CredentialError) as err:
        _list(plugin.cluster())
    text = str(err.value)
    assert text.startswith("[cluster exec-a] the exec plugin 'python"), text
    assert text.endswith(f"returned a client certificate that cannot be used: {why}"), text
    for pem in (cert, key):
        if body := "".join(pem.splitlines()[1:-1])[:40]:  # (a PEM's, never said)
            assert body not in text and body not in caplog.text


def test_the_kubernetes_api_classes_get_the_token_through_the_refresh_hook(
    plugin: Plugin, server: APIServer
) -> None:
    plugin.plan({"token": server.token, "ttl": 3600})
    api = CoreV1Api(new_api_client(load_config(path=plugin.kubeconfig())))
    assert api.list_namespaced_config_map("default").items == []
    assert len(plugin.runs) == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"interactiveMode": "Always"}, "needs an interactive terminal"),
        # client-go defaults interactiveMode for v1beta1 only; kubectl refuses this too
        ({"interactiveMode": None}, "sets no interactiveMode, which client.authentication"),
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "is not one of"),
        ({"command": ""}, "names no command"),
        ({"env": [{"name": "A"}]}, "env must be a list of {name, value} strings"),
    ],
)
def test_a_broken_exec_entry_is_refused_at_load(
    plugin: Plugin, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(path=plugin.kubeconfig(**fields))
    assert message in str(err.value)
    assert "user 'exec-user' of context 'exec-ctx'" in str(err.value)
    assert plugin.runs == []


def test_a_v1beta1_entry_without_interactive_mode_runs(plugin: Plugin, server: APIServer) -> None:
    v1beta1 = "client.authentication.k8s.io/v1beta1"
    plugin.plan({"token": server.token, "ttl": 3600, "apiVersion": v1beta1})
    rest = plugin.cluster(apiVersion=v1beta1, interactiveMode=None).client.rest
    try:
        rest.request("GET", "/api/v1/namespaces/default/configmaps", timeout=10)
        assert len(plugin.runs) == 1
    finally:
        rest.close()


# -- token files --------------------------------------------------------------------------
#
# A ``tokenFile`` is rotated by another process (the kubelet for a projected service
# account token, a sidecar). The ``kubernetes`` loader reads it once: a rotated token is
# then refused until the process restarts. mcruntime reads it again as client-go does.


def _token_file_cluster(server: APIServer, path: Path) -> Cluster:
    doc = server.kubeconfig("file-ctx")
    doc["users"][0]["user"] = {"tokenFile": str(path)}
    return Cluster.from_config(load_config(path=doc), name="file-a")


def _whoami(cluster: Cluster) -> str:
    review = cluster.client.create(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    )
    name: str = review["status"]["userInfo"]["username"]
    return name


def test_a_token_file_rotated_after_a_refusal_is_read_again_at_once(
    server: APIServer, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("not-yet-valid\n")
    cluster = _token_file_cluster(server, token)
    with pytest.raises(Unauthorized):
        _list(cluster)
    token.write_text(server.token)  # rotated
    assert _list(cluster) == [], "the 401 made the call read the file again"


def test_a_token_file_is_read_again_once_its_token_is_a_period_old(
    server: APIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text(server.token)
    cluster = _token_file_cluster(server, token)
    assert _whoami(cluster) == "kubernetes-admin"
    monkeypatch.setattr(_credentials, "TOKEN_FILE_PERIOD", 0.2)
    token.write_text(server.service_account_token("default/rotated"))
    wait_for(
        lambda: _whoami(cluster) == "system:serviceaccount:default:rotated",
        timeout=10,
        what="the rotated token in use",
    )


def test_a_token_file_that_cannot_be_read_again_keeps_its_token_with_one_warning(
    server: APIServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcruntime.client")
    token = tmp_path / "token"
    token.write_text(server.token)
    cluster = _token_file_cluster(server, token)
    monkeypatch.setattr(_credentials, "TOKEN_FILE_PERIOD", 0.0)
    token.unlink()  # a rotation half done
    for _ in range(3):
        assert _list(cluster) == []
    warnings = logged(caplog, logging.WARNING, containing=str(token))
    assert len(warnings) == 1, warnings
    assert "failed: No such file or directory; keeping the token read before" in warnings[0]
    token.write_text(server.token)
    assert _list(cluster) == []
    assert logged(caplog, logging.INFO, containing="works again")
    assert server.token not in caplog.text


@pytest.mark.parametrize("bad", ["\u20ac", "\nX-Injected: yes"])
def test_a_token_file_whose_token_no_header_can_carry_is_no_network_failure(
    server: APIServer, tmp_path: Path, bad: str
) -> None:
    # read at each call (it rotates): refused then, as a credential problem, never the token
    token = tmp_path / "token"
    token.write_text(f"{server.token[:8]}{bad}{server.token[8:]}", encoding="utf-8")
    cluster = _token_file_cluster(server, token)
    try:
        with pytest.raises(CredentialError) as err:
            _list(cluster)
    finally:
        cluster.stop()
    text = str(err.value)
    assert "not sent: a request header cannot be sent" in text, text
    assert "mid-answer" not in text and "cannot reach" not in text
    assert server.token[:8] not in text


def test_a_token_file_that_cannot_be_read_at_load_is_a_config_error(
    server: APIServer, tmp_path: Path
) -> None:
    doc = server.kubeconfig("file-ctx")
    doc["users"][0]["user"] = {"tokenFile": str(tmp_path / "missing")}
    with pytest.raises(ConfigError) as err:
        load_config(path=doc)
    assert f"token file {tmp_path / 'missing'} cannot be read" in str(err.value)


def test_a_token_file_beside_a_token_wins_as_in_client_go(
    server: APIServer, tmp_path: Path
) -> None:
    # client-go: BearerTokenFile "takes precedence over BearerToken"; kubectl acts as the
    # file's identity, and so must mcruntime (a stale static token beside a rotated file)
    token = tmp_path / "token"
    token.write_text(server.service_account_token("default/from-file"))
    doc = server.kubeconfig("file-ctx")
    doc["users"][0]["user"] = {"token": server.token, "tokenFile": str(token)}
    cluster = Cluster.from_config(load_config(path=doc), name="file-and-token")
    try:
        assert _whoami(cluster) == "system:serviceaccount:default:from-file"
    finally:
        cluster.stop()


def test_a_token_beside_a_token_file_that_cannot_be_read_is_sent(
    server: APIServer, tmp_path: Path
) -> None:
    # client-go sends the token while the file has never been read
    doc = server.kubeconfig("file-ctx")
    doc["users"][0]["user"] = {"token": server.token, "tokenFile": str(tmp_path / "missing")}
    cluster = Cluster.from_config(load_config(path=doc), name="token-no-file")
    try:
        assert _whoami(cluster) == "kubernetes-admin"
    finally:
        cluster.stop()


def _pod(server: APIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pod's view: the service host and port in the environment, the token (``revoked``
    for now; the path is returned) and CA in files."""
    from kubernetes.config import incluster_config

    token, ca = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("revoked")
    ca_data = server.kubeconfig()["clusters"][0]["cluster"]["certificate-authority-data"]
    ca.write_bytes(base64.b64decode(ca_data))
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    return token


def test_the_in_cluster_token_rotated_by_the_kubelet_is_read_again(
    server: APIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = _pod(server, tmp_path, monkeypatch)
    cluster = Cluster.in_cluster(name="local")
    token.write_text(server.service_account_token("default/controller"))  # rotated
    assert _whoami(cluster) == "system:serviceaccount:default:controller"


def test_a_refused_in_cluster_token_names_its_file_not_a_kubeconfig_or_secret(
    server: APIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # expired, the kubelet late to renew it: there is no kubeconfig or Secret to check
    token = _pod(server, tmp_path, monkeypatch)
    cluster = Cluster.in_cluster(name="local")
    try:
        with pytest.raises(Unauthorized) as err:
            _list(cluster)
    finally:
        cluster.stop()
    assert str(err.value) == (
        "[cluster local] Unauthorized: the API server does not accept this cluster's "
        "credentials (a token revoked, expired or of another cluster?): check the token "
        f"file {token} of the in-cluster config"
    )


def test_a_plugin_still_running_when_the_process_exits_is_killed(
    plugin: Plugin, tmp_path: Path
) -> None:
    # a call on a daemon thread waits for a plugin that never ends (a login in a browser);
    # the process exits: the plugin, in a session of its own, must not outlive it
    plugin.plan({"sleep": 600})
    kubeconfig = tmp_path / "kubeconfig.json"
    kubeconfig.write_text(json.dumps(plugin.kubeconfig()))
    script = textwrap.dedent(
        f"""
        import threading, time
        from mcruntime import Cluster
        cluster = Cluster.from_kubeconfig({str(kubeconfig)!r}, name="exiting")
        call = lambda: cluster.api_reader.list("v1/ConfigMap", namespace="default", timeout=600)
        threading.Thread(target=call, daemon=True).start()
        runs = {str(plugin.folder / "runs.txt")!r}
        import os
        while not os.path.exists(runs):
            time.sleep(0.05)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=30)
    (pid,) = plugin.runs
    wait_for(lambda: _gone(pid), timeout=5, what="the plugin killed at exit")


# -- oidc auth-provider ---------------------------------------------------------------------
#
# ``auth-provider: oidc`` (dex, keycloak) carries an id-token and a refresh token. The
# `kubernetes` loader refreshes with no deadline and, without an IdP CA in the kubeconfig,
# without checking the issuer's certificate. The issuer here is a scripted HTTPS server.


@pytest.fixture
def issuer(tmp_path: Path, server: APIServer) -> Iterator[Issuer]:
    found = Issuer(tmp_path, server.token)
    yield found
    found.stop()


def _jwt(exp: float) -> str:
    def part(doc: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part({'sub': 'me', 'exp': int(exp)})}.sig"


def _oidc_cluster(server: APIServer, issuer: Issuer, **config: str | None) -> Cluster:
    """A cluster whose user has ``auth-provider: oidc`` at ``issuer``, a client secret and
    an id-token that expired a minute ago (``config`` changes fields; None removes one)."""
    doc = server.kubeconfig("oidc-ctx")
    fields: dict[str, str | None] = {
        "client-secret": "client-s3cret",
        "id-token": _jwt(time.time() - 60),
    }
    doc["users"][0]["user"] = issuer.user(**{**fields, **config})
    return Cluster.from_config(load_config(path=doc), name="oidc-a")


def test_an_expired_oidc_id_token_is_refreshed_at_the_verified_issuer(
    server: APIServer, issuer: Issuer
) -> None:
    cluster = _oidc_cluster(server, issuer)
    assert _list(cluster) == []
    assert _list(cluster) == []
    assert len(issuer.forms) == 1, "the refreshed token serves the next calls"
    assert issuer.forms[0] == {"grant_type": ["refresh_token"], "refresh_token": ["refresh-1"]}
    expected = base64.b64encode(b"mcruntime:client-s3cret").decode()
    assert issuer.authorizations == [f"Basic {expected}"]


def test_an_issuer_whose_certificate_is_not_trusted_gets_no_refresh_token(
    server: APIServer, issuer: Issuer
) -> None:
    # no CA in the kubeconfig: the system's CAs, which do not know the test issuer
    cluster = _oidc_cluster(server, issuer, **{"idp-certificate-authority-data": None})
    with pytest.raises(CredentialError) as err:
        _list(cluster)
    assert "cannot refresh its id-token: cannot reach 127.0.0.1" in str(err.value)
    assert "its certificate is not trusted (unable to get local issuer" in str(err.value)
    assert issuer.forms == [], "nothing was sent to an issuer that was not verified"


def test_a_hung_issuer_fails_the_call_at_its_deadline(server: APIServer, issuer: Issuer) -> None:
    issuer.hang = True
    cluster = _oidc_cluster(server, issuer)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded) as err:
        _list(cluster, timeout=1.0)
    assert time.monotonic() - began < 3.0
    assert "the oidc auth-provider of user 'oidc-ctx'" in str(err.value)
    assert "its request to the issuer was abandoned" in str(err.value)


def test_a_cluster_leaving_ends_a_call_waiting_for_a_hung_issuer_at_once(
    server: APIServer, issuer: Issuer
) -> None:
    issuer.hang = True
    cluster = _oidc_cluster(server, issuer)
    t, raised = listing(cluster, "test-hung-issuer-call")
    wait_for(lambda: issuer.forms, timeout=10, what="the refresh sent")
    left_at = time.monotonic()
    cluster.client.rest.close()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - left_at < 1.0
    assert len(raised) == 1 and isinstance(raised[0], ClusterLeft), raised
    # the request in flight is not cut: it ends with the issuer's answer, or its deadline
    issuer.release.set()
    wait_for(
        lambda: (
            not [x for x in threading.enumerate() if x.name.startswith("mcruntime/credential/")]
        ),
        timeout=5,
        what="the refresh's thread gone",
    )


def test_an_issuer_that_trickles_its_answer_in_is_abandoned_at_the_deadline(
    server: APIServer, issuer: Issuer
) -> None:
    # each byte well within a read's timeout: the refresh's deadline bounds its whole answer,
    # so the refresh ends with the call and the next call is not left waiting for it
    issuer.drip = True
    cluster = _oidc_cluster(server, issuer)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded, match="its request to the issuer was abandoned"):
        _list(cluster, timeout=1.0)
    assert time.monotonic() - began < 3.0
    wait_for(
        lambda: (
            not [x for x in threading.enumerate() if x.name.startswith("mcruntime/credential/")]
        ),
        timeout=2,
        what="the refresh's thread gone",
    )
    issuer.drip = False
    assert _list(cluster, timeout=5) == []
    assert len(issuer.forms) == 2


def test_an_issuer_is_named_without_the_password_or_query_of_its_url(
    server: APIServer, issuer: Issuer
) -> None:
    # "cannot reach idp-user:idp-pa55@127.0.0.1:PORT", and the source's repr (in the locals
    # of a failed refresh's frames) showed the whole URL, its query too
    url = issuer.url.replace("https://", "https://idp-user:idp-pa55@") + "/realm?key=q-pa55"
    cluster = _oidc_cluster(
        server, issuer, **{"idp-issuer-url": url, "idp-certificate-authority-data": None}
    )
    with pytest.raises(CredentialError) as err:
        _list(cluster)
    assert f"cannot reach {issuer.url.removeprefix('https://')}: its certificate" in str(err.value)
    source = _credentials.credential_of(cluster.config)
    assert source is not None and "/realm" in repr(source)
    for text in (str(err.value), repr(source)):
        assert "pa55" not in text and "idp-user" not in text, text


def test_an_oidc_token_that_cannot_be_refreshed_says_why(server: APIServer, issuer: Issuer) -> None:
    cluster = _oidc_cluster(server, issuer, **{"refresh-token": None})
    with pytest.raises(CredentialError, match="there is no refresh-token"):
        _list(cluster)
