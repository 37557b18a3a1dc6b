"""``python -m mcruntime_kubeconfig create-secret`` against embedded API servers."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcruntime.envtest import wait_for

pytest.importorskip(
    "mcruntime_kubeconfig",
    reason="the provider is not installed: pip install -e providers/kubeconfig",
)

from mcruntime_kubeconfig import (  # noqa: E402
    DEFAULT_LABEL,
    DEFAULT_SERVICE_ACCOUNT,
    Provider,
    create_kubeconfig_secret,
)
from mcruntime_kubeconfig.__main__ import main  # noqa: E402

from mcruntime.client import deadline  # noqa: E402
from mcruntime.cluster import Cluster  # noqa: E402
from mcruntime.envtest import APIServer  # noqa: E402
from mcruntime.errors import DeadlineExceeded, Forbidden, MCRuntimeError  # noqa: E402

from .._support import RecordingAware, Running  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def serves(cluster: Cluster, path: str, field: str, name: str) -> bool:
    doc = cluster.rest.request("GET", path) or {}
    return any(e.get("name") == name for e in doc.get(field) or ())


@pytest.fixture
def servers(make_envtest_server: Callable[..., APIServer], tmp_path: Path) -> dict[str, Any]:
    target = make_envtest_server("target")
    management = make_envtest_server("management")
    return {
        "target": target,
        "management": management,
        "src": target.write_kubeconfig(tmp_path / "src.yaml", context="prod-eu"),
        "mgmt": management.write_kubeconfig(tmp_path / "mgmt.yaml"),
    }


def test_create_secret_writes_a_labelled_kubeconfig_the_provider_engages(
    servers: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    run_provider: Callable[[Any, Any], Running],
) -> None:
    target: APIServer = servers["target"]
    management: APIServer = servers["management"]
    code = main(
        [
            "create-secret",
            "--kubeconfig",
            str(servers["src"]),
            "--context",
            "prod-eu",
            "--namespace",
            "fleet",
            "--management-kubeconfig",
            str(servers["mgmt"]),
            "--token-timeout",
            "0.2",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "secret fleet/prod-eu created" in out
    for token in (target.token, management.token):
        assert token not in out and token not in err

    tgt = Cluster.from_kubeconfig(target.kubeconfig(), name="check-target")
    mgmt = Cluster.from_kubeconfig(management.kubeconfig(), name="check-management")
    try:
        tgt.api_reader.get("v1/ServiceAccount", DEFAULT_SERVICE_ACCOUNT, "fleet")
        # RBAC where the server serves it, else a clear warning
        if serves(tgt, "/apis", "groups", "rbac.authorization.k8s.io"):
            role = tgt.api_reader.get("rbac.authorization.k8s.io/v1/ClusterRole", "prod-eu")
            assert role["rules"][0]["resources"] == ["configmaps"]
            binding = tgt.api_reader.get(
                "rbac.authorization.k8s.io/v1/ClusterRoleBinding", "prod-eu-binding"
            )
            assert binding["subjects"][0]["name"] == DEFAULT_SERVICE_ACCOUNT
            assert "rbac: clusterrole" in out
        else:
            assert "does not serve rbac.authorization.k8s.io" in err and "rbac: not-served" in out
        # a token of the service account, from the TokenRequest API
        assert "credentials: token-request" in out
        assert "reuses the credentials" not in err
        secret = mgmt.api_reader.get("v1/Secret", "prod-eu", "fleet")
        assert secret["metadata"]["labels"] == {DEFAULT_LABEL: "true"}
        config = yaml.safe_load(base64.b64decode(secret["data"]["kubeconfig"]))
        assert config["current-context"] == "prod-eu"
        assert config["clusters"] == [
            {"name": "prod-eu", "cluster": target.kubeconfig()["clusters"][0]["cluster"]}
        ]

        aware = RecordingAware()
        run_provider(Provider(mgmt, namespace="fleet"), aware)
        engaged = wait_for(lambda: aware.cluster("prod-eu"))
        # the provider's client is the service account, with the rules' rights and no more
        assert engaged.api_reader.list("v1/ConfigMap", "fleet") == []
        with pytest.raises(
            Forbidden, match=f"system:serviceaccount:fleet:{DEFAULT_SERVICE_ACCOUNT}"
        ):
            engaged.api_reader.get("v1/ServiceAccount", DEFAULT_SERVICE_ACCOUNT, "fleet")
    finally:
        tgt.stop()

    # running it again updates the Secret in place; a Role with the rules of a rules file
    rules = Path(servers["src"]).parent / "rules.yaml"
    rules.write_text(
        yaml.safe_dump(
            {"rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]}
        )
    )
    assert (
        main(
            [
                "create-secret",
                "--kubeconfig",
                str(servers["src"]),
                "--context",
                "prod-eu",
                "--namespace",
                "fleet",
                "--management-kubeconfig",
                str(servers["mgmt"]),
                "--token-timeout",
                "0",
                "--label-value",
                "yes",
                "--role-type",
                "role",
                "--rules-file",
                str(rules),
            ]
        )
        == 0
    )
    again = mgmt.api_reader.get("v1/Secret", "prod-eu", "fleet")
    assert again["metadata"]["labels"][DEFAULT_LABEL] == "yes"
    if serves(mgmt, "/apis", "groups", "rbac.authorization.k8s.io"):
        tgt = Cluster.from_kubeconfig(target.kubeconfig(), name="check-target")
        role = tgt.api_reader.get("rbac.authorization.k8s.io/v1/Role", "prod-eu", "fleet")
        assert role["rules"][0]["resources"] == ["deployments"]
        tgt.stop()
    mgmt.stop()


def test_without_the_token_request_api_the_source_credentials_are_kept_with_a_warning(
    servers: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a server without TokenRequest and without a token controller: envtest serves the
    # first, so the discovery answer is what this test takes away
    import mcruntime_kubeconfig._secret as secret_module

    monkeypatch.setattr(secret_module, "_serves_token_request", lambda cluster: False)
    args = ["create-secret", "--kubeconfig", str(servers["src"]), "--context", "prod-eu"]
    code = main([*args, "--management-kubeconfig", str(servers["mgmt"]), "--token-timeout", "0.2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "credentials: source-credentials" in out
    assert "reuses the credentials of context 'prod-eu'" in err
    assert servers["target"].token not in out + err
    tgt = Cluster.from_kubeconfig(servers["target"].kubeconfig(), name="check-target")
    try:
        # the placeholder token Secret nobody filled in is cleaned up
        names = [s["metadata"]["name"] for s in tgt.api_reader.list("v1/Secret", "default")]
        assert f"{DEFAULT_SERVICE_ACCOUNT}-token" not in names
    finally:
        tgt.stop()


def test_create_secret_errors_name_the_problem_without_credentials(
    servers: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "create-secret",
            "--kubeconfig",
            str(servers["src"]),
            "--context",
            "nope",
            "--management-kubeconfig",
            str(servers["mgmt"]),
        ]
    )
    _, err = capsys.readouterr()
    assert code == 1
    assert "'nope'" in err and "prod-eu" in err
    assert servers["target"].token not in err


def test_a_management_context_that_does_not_load_fails_before_the_target_is_changed(
    servers: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["create-secret", "--kubeconfig", str(servers["src"]), "--context", "prod-eu"]
    code = main(
        [*args, "--namespace", "fleet", "--management-kubeconfig", str(servers["mgmt"])]
        + ["--management-context", "nope"]
    )
    _, err = capsys.readouterr()
    assert code == 1
    assert "'nope'" in err, err
    tgt = Cluster.from_kubeconfig(servers["target"].kubeconfig(), name="check-target")
    try:
        # nothing was written to the target: no namespace, no ServiceAccount, no role
        names = [n["metadata"]["name"] for n in tgt.api_reader.list("v1/Namespace")]
        assert "fleet" not in names
        roles = tgt.api_reader.list("rbac.authorization.k8s.io/v1/ClusterRole")
        assert "prod-eu" not in [r["metadata"]["name"] for r in roles]
    finally:
        tgt.stop()


def test_module_entry_point_runs_the_command(servers: dict[str, Any]) -> None:
    env = {**os.environ, "KUBECONFIG": str(servers["mgmt"])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcruntime_kubeconfig",
            "create-secret",
            "--kubeconfig",
            str(servers["src"]),
            "--name",
            "via-module",
            "--token-timeout",
            "0",
            "--skip-create-rbac",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "secret default/via-module created (credentials: token-request, rbac: skipped)"
        in proc.stdout
    )
    assert servers["target"].token not in proc.stdout + proc.stderr


def test_create_secret_ends_by_its_timeout_on_a_hung_cluster(servers: dict[str, Any]) -> None:
    target: APIServer = servers["target"]
    target.freeze()  # connections taken, nothing answered
    began = time.monotonic()
    try:
        with pytest.raises(DeadlineExceeded) as err:
            create_kubeconfig_secret(
                kubeconfig=str(servers["src"]),
                context="prod-eu",
                management_kubeconfig=str(servers["mgmt"]),
                timeout=1,
            )
    finally:
        target.thaw()
    assert time.monotonic() - began < 2.0
    message = str(err.value)
    assert message.startswith(
        "reading the target cluster's discovery in cluster prod-eu failed: "
        "create_kubeconfig_secret did not finish in time (timeout=1s): [cluster prod-eu] GET /apis"
    ), message
    assert target.token not in message


def test_a_shorter_deadline_of_the_caller_is_the_one_the_error_names(
    servers: dict[str, Any],
) -> None:
    # the command's own 60 s default did not run out: saying "timeout=60s" after a second would
    # send the reader looking for the wrong bound
    target: APIServer = servers["target"]
    target.freeze()
    began = time.monotonic()
    try:
        with pytest.raises(DeadlineExceeded) as err, deadline(1):
            create_kubeconfig_secret(
                kubeconfig=str(servers["src"]),
                context="prod-eu",
                management_kubeconfig=str(servers["mgmt"]),
            )
    finally:
        target.thaw()
    assert time.monotonic() - began < 2.0
    message = str(err.value)
    assert "create_kubeconfig_secret did not finish in time (the caller's deadline: " in message
    assert "timeout=" not in message, message


def test_the_timeout_of_create_secret_bounds_all_its_calls_together(
    servers: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    # a slow cluster: each call well within a call's own default timeout, a dozen of them not
    # within the command's
    target: APIServer = servers["target"]
    target.latency = 0.25
    args = ["create-secret", "--kubeconfig", str(servers["src"]), "--context", "prod-eu"]
    began = time.monotonic()
    code = main([*args, "--management-kubeconfig", str(servers["mgmt"]), "--timeout", "1.5"])
    took = time.monotonic() - began
    _, err = capsys.readouterr()
    assert code == 1, err
    assert took < 2.5
    assert "create_kubeconfig_secret did not finish in time (timeout=1.5s)" in err, err
    assert target.token not in err


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (["--timeout", "0"], "argument --timeout: 0 seconds: must be more than 0"),
        (["--token-duration", "60"], "argument --token-duration: 60 seconds: must be at least 600"),
        (["--token-timeout", "-1"], "argument --token-timeout: -1 seconds: must be at least 0"),
        (["--timeout", "soon"], "argument --timeout: 'soon' is not a number of seconds"),
    ],
)
def test_a_number_of_seconds_out_of_range_is_refused_before_any_call(
    option: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # a token shorter than the TokenRequest API allows, or a deadline already over, would
    # only fail later, against the cluster
    with pytest.raises(SystemExit) as exit_:
        main(["create-secret", "--kubeconfig", "/nowhere", "--name", "x", *option])
    assert exit_.value.code == 2
    assert said in capsys.readouterr().err


ARN = "arn:aws:eks:eu-west-1:123456789012:cluster/prod"


def test_a_context_name_that_is_no_secret_name_is_refused_before_anything_is_written(
    servers: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # an EKS context is named by its ARN: the Secret (and role) named after it would be
    # refused by the server, after the namespace and the ServiceAccount were made
    src = servers["target"].write_kubeconfig(tmp_path / "eks.yaml", context=ARN)
    code = main(
        ["create-secret", "--kubeconfig", str(src), "--namespace", "fleet"]
        + ["--management-kubeconfig", str(servers["mgmt"])]
    )
    _, err = capsys.readouterr()
    assert code == 1
    assert f"Secret name {ARN!r} (the context's name; choose another with --name)" in err, err
    assert "nothing was written" in err
    assert servers["target"].token not in err
    tgt = Cluster.from_kubeconfig(servers["target"].kubeconfig(), name="check-target")
    try:
        names = [n["metadata"]["name"] for n in tgt.api_reader.list("v1/Namespace")]
        assert "fleet" not in names
    finally:
        tgt.stop()
    # with --name, the same context works
    assert (
        main(
            ["create-secret", "--kubeconfig", str(src), "--name", "prod", "--namespace", "fleet"]
            + ["--management-kubeconfig", str(servers["mgmt"])]
        )
        == 0
    )


def test_a_refusal_says_the_servers_message(servers: dict[str, Any]) -> None:
    with pytest.raises(MCRuntimeError) as err:
        create_kubeconfig_secret(
            kubeconfig=str(servers["src"]),
            management_kubeconfig=str(servers["mgmt"]),
            token_duration=10,
        )
    assert "requesting a service account token in cluster prod-eu failed: HTTP 422" in str(
        err.value
    )
    assert "may not specify a duration less than 10 minutes" in str(err.value), str(err.value)


ADMISSION = "admissionregistration.k8s.io/v1"


def test_a_server_message_that_echoes_the_secret_never_shows_its_token(
    servers: dict[str, Any],
) -> None:
    # an admission policy of the management cluster quotes the kubeconfig it refuses
    writer = Cluster.from_kubeconfig(servers["management"].kubeconfig(), name="writer")
    try:
        writer.client.create(
            {
                "apiVersion": ADMISSION,
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "echo.example.com"},
                "spec": {
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["CREATE"],
                                "resources": ["secrets"],
                            }
                        ]
                    },
                    "validations": [
                        {
                            "expression": "false",
                            "messageExpression": "'refused: ' + string(object.data['kubeconfig'])",
                        }
                    ],
                },
            }
        )
        writer.client.create(
            {
                "apiVersion": ADMISSION,
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": "echo-binding.example.com"},
                "spec": {"policyName": "echo.example.com", "validationActions": ["Deny"]},
            }
        )
    finally:
        writer.stop()
    with pytest.raises(MCRuntimeError) as err:
        create_kubeconfig_secret(
            kubeconfig=str(servers["src"]), management_kubeconfig=str(servers["mgmt"])
        )
    text = str(err.value)
    assert "writing secret default/prod-eu to the management cluster failed: HTTP 422" in text
    assert "denied request: refused: <redacted>" in text, text
    assert "current-context" not in text and "token:" not in text


def test_source_credentials_take_a_token_file_over_a_token_as_client_go(tmp_path: Path) -> None:
    # kubectl acts as the file's identity (BearerTokenFile takes precedence over BearerToken):
    # the Secret must carry the same; a relative file is read beside the kubeconfig
    from mcruntime_kubeconfig._secret import _flatten

    (tmp_path / "token").write_text("from-file\n")
    user = {"token": "stale", "tokenFile": "token"}
    assert _flatten(user, tmp_path) == {"token": "from-file"}
    # unreadable: the token, as client-go sends it while the file was never read
    assert _flatten({"token": "stale", "tokenFile": "missing"}, tmp_path) == {"token": "stale"}
