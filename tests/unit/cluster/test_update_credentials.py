"""`Cluster.update_credentials`: a kubeconfig rotated in its credentials only is taken in place;
anything that says what the cluster is or how it is reached is not (the cluster is engaged again)."""

from __future__ import annotations

import base64
import copy
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from kubernetes.client import Configuration

from mcruntime import Cluster
from mcruntime._certs import CertificateAuthority
from mcruntime.cache import CacheOptions
from mcruntime.envtest import _tls
from tests._client_keys import client_certificate, pem

TOKEN, OTHER_TOKEN = "rotating-token-before-1234", "rotating-token-after-5678"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _pair(user: str) -> dict[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    return {
        "client-certificate-data": _b64(client_certificate(key, user=user)),
        "client-key-data": _b64(pem(key)),
    }


def _kubeconfig(user: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    entry = {"server": "https://127.0.0.1:6443"}
    entry["certificate-authority-data"] = _b64(_tls.authority().cert_pem)
    entry.update(cluster)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "m1",
        "clusters": [{"name": "m1", "cluster": {k: v for k, v in entry.items() if v is not None}}],
        "users": [{"name": "m1", "user": {"token": TOKEN} if user is None else user}],
        "contexts": [{"name": "m1", "context": {"cluster": "m1", "user": "m1"}}],
    }


def _cluster(doc: dict[str, Any], **options: Any) -> Cluster:
    return Cluster.from_kubeconfig(doc, name="m1", **options)


@pytest.fixture
def clusters() -> Any:
    made: list[Cluster] = []

    def make(doc: dict[str, Any], **options: Any) -> Cluster:
        made.append(_cluster(doc, **options))
        return made[-1]

    yield make
    for c in made:
        c.stop()


def _other_user(field: str, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The user before and after a rotation of ``field``, and what is said to have changed."""
    exec_of: Callable[[str], dict[str, Any]] = lambda arg: {  # noqa: E731
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "credential-helper",
            "args": [arg],
            "interactiveMode": "Never",
        }
    }
    for name in ("before", "after"):
        (tmp_path / name).write_text(name)
    return {
        "token": ({"token": TOKEN}, {"token": OTHER_TOKEN}, ["its token"]),
        "tokenFile": (
            {"tokenFile": str(tmp_path / "before")},
            {"tokenFile": str(tmp_path / "after")},
            ["its token file"],
        ),
        "client certificate": (_pair("old"), _pair("new"), ["its client certificate"]),
        "token to certificate": (
            {"token": TOKEN},
            _pair("new"),
            ["its token", "its client certificate"],
        ),
        "exec": (exec_of("--before"), exec_of("--after"), ["its exec plugin"]),
        "basic": (
            {"username": "admin", "password": "before-pw"},
            {"username": "admin", "password": "after-pw"},
            ["its username and password"],
        ),
    }[field]


@pytest.mark.parametrize(
    "field",
    ["token", "tokenFile", "client certificate", "token to certificate", "exec", "basic"],
)
def test_a_change_of_credentials_only_is_taken_in_place_and_said_in_words(
    field: str, clusters: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    before, after, words = _other_user(field, tmp_path)
    engaged = clusters(_kubeconfig(before))
    rotated = clusters(_kubeconfig(after))
    host = engaged.config.host
    with caplog.at_level(logging.INFO, "mcruntime.cluster"):
        assert engaged.update_credentials(rotated) == words
    assert engaged.config.host == host
    assert engaged.config.cert_file == rotated.config.cert_file
    assert engaged.config.api_key == rotated.config.api_key
    said = [r.getMessage() for r in caplog.records if "new credentials" in r.getMessage()]
    assert said == [
        f"cluster=m1 took new credentials in place ({' and '.join(words)} changed): it is not "
        "engaged again, its informers and caches go on"
    ]
    text = caplog.text
    for secret in (TOKEN, OTHER_TOKEN, "before-pw", "after-pw", "--after"):
        assert secret not in text
    # taken: the same credentials again are no change
    assert engaged.update_credentials(clusters(_kubeconfig(after))) == []


@pytest.mark.parametrize(
    "cluster",
    [
        {"server": "https://127.0.0.1:6444"},
        {"certificate-authority-data": _b64(CertificateAuthority("another-ca").cert_pem)},
        {"certificate-authority-data": None, "insecure-skip-tls-verify": True},
        {"tls-server-name": "kubernetes.default"},
        {"proxy-url": "http://127.0.0.1:3128"},
        {"disable-compression": True},
    ],
    ids=["server", "CA", "insecure", "tls-server-name", "proxy-url", "disable-compression"],
)
def test_a_change_of_how_the_cluster_is_reached_is_not_taken(
    cluster: dict[str, Any], clusters: Any
) -> None:
    engaged = clusters(_kubeconfig())
    token = copy.deepcopy(engaged.config.api_key)
    assert (
        engaged.update_credentials(clusters(_kubeconfig({"token": OTHER_TOKEN}, **cluster))) is None
    )
    assert engaged.config.api_key == token  # nothing taken


def test_impersonating_another_user_is_not_a_change_of_credentials(clusters: Any) -> None:
    engaged = clusters(_kubeconfig())
    other = clusters(_kubeconfig({"token": OTHER_TOKEN, "as": "someone-else"}))
    assert engaged.update_credentials(other) is None


def test_a_cluster_of_other_options_or_a_configuration_built_in_code_is_not_taken(
    clusters: Any,
) -> None:
    engaged = clusters(_kubeconfig())
    rotated = _kubeconfig({"token": OTHER_TOKEN})
    assert engaged.update_credentials(clusters(rotated, uncached=["v1/Secret"])) is None
    assert engaged.update_credentials(clusters(rotated, cache_options=CacheOptions())) is None
    built = Configuration(host="https://127.0.0.1:6443", api_key={"BearerToken": OTHER_TOKEN})
    assert engaged.update_credentials(built) is None
    # a Configuration loaded from the kubeconfig is as good as its Cluster
    assert engaged.update_credentials(clusters(rotated).config) == ["its token"]
    with pytest.raises(TypeError, match="takes a Cluster or a kubernetes.client.Configuration"):
        engaged.update_credentials(rotated)  # type: ignore[arg-type]


def test_a_stopped_cluster_takes_nothing(clusters: Any) -> None:
    engaged = clusters(_kubeconfig())
    engaged.stop()
    assert engaged.update_credentials(clusters(_kubeconfig({"token": OTHER_TOKEN}))) is None


def test_clones_share_what_was_taken(clusters: Any) -> None:
    engaged = clusters(_kubeconfig())
    clone = engaged.clone()
    try:
        assert engaged.update_credentials(clusters(_kubeconfig({"token": OTHER_TOKEN}))) == [
            "its token"
        ]
        assert clone.config.api_key["BearerToken"] == f"Bearer {OTHER_TOKEN}"
    finally:
        clone.stop()
