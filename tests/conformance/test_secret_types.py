"""``ValidateSecret``'s checks of the built-in Secret types (``pkg/apis/core/validation``):
the keys each type needs, a docker configuration that is a JSON object, the account of a
service-account token, on create and on update (``ValidateSecretUpdate`` runs
``ValidateSecret`` after its own checks). A controller writing a TLS or pull Secret meets
these on a cluster; envtest refuses the same."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubernetes import client

from ._support import raises_status, unique

pytestmark = pytest.mark.timeout(60)


def secret(name: str, kind: str, data: dict[str, str] | None = None) -> dict[str, Any]:
    """A Secret of type ``kind`` whose ``data`` holds ``data`` (encoded)."""
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in (data or {}).items()}
    return {"metadata": {"name": name}, "type": kind, "data": encoded}


def fields(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in status["details"]["causes"]]


@pytest.mark.parametrize(
    ("kind", "data", "missing"),
    [
        ("kubernetes.io/tls", {"a": "b"}, ["data[tls.crt]", "data[tls.key]"]),
        ("kubernetes.io/tls", {"tls.crt": "c"}, ["data[tls.key]"]),
        ("kubernetes.io/basic-auth", {"a": "b"}, ["data[username]", "data[password]"]),
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": ""}, ["data[ssh-privatekey]"]),
        ("kubernetes.io/dockerconfigjson", {}, ["data[.dockerconfigjson]"]),
        ("kubernetes.io/dockercfg", {}, ["data[.dockercfg]"]),
    ],
)
def test_a_secret_without_the_keys_its_type_needs_is_refused(
    core: client.CoreV1Api, ns: str, kind: str, data: dict[str, str], missing: list[str]
) -> None:
    name = unique("secret")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_secret(ns, secret(name, kind, data))
    required = [f"{at}: Required value" for at in missing]
    listed = required[0] if len(required) == 1 else f"[{', '.join(required)}]"
    assert status["message"] == f'Secret "{name}" is invalid: {listed}'
    assert fields(status) == [(at, "FieldValueRequired") for at in missing]


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("kubernetes.io/tls", {"tls.crt": "", "tls.key": ""}),  # present is enough
        ("kubernetes.io/basic-auth", {"password": ""}),  # either one
        ("kubernetes.io/ssh-auth", {"ssh-privatekey": "k"}),
        ("kubernetes.io/dockerconfigjson", {".dockerconfigjson": '{"auths": {}}'}),
        ("kubernetes.io/dockercfg", {".dockercfg": "null"}),  # a nil map unmarshals
        ("example.com/anything", {}),  # a type of one's own needs nothing
        ("Opaque", {}),
    ],
)
def test_a_secret_with_what_its_type_needs_is_stored(
    core: client.CoreV1Api, ns: str, kind: str, data: dict[str, str]
) -> None:
    created = core.create_namespaced_secret(ns, secret(unique("secret"), kind, data))
    assert created.type == kind


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ("{nope", "invalid character 'n' looking for beginning of object key string"),
        ('{"auths": {}', "unexpected end of JSON input"),
        ("{} {}", "invalid character '{' after top-level value"),
        ("tru", "invalid character ' ' in literal true (expecting 'e')"),
        ("[]", "json: cannot unmarshal array into Go value of type map[string]interface {}"),
        ('"x"', "json: cannot unmarshal string into Go value of type map[string]interface {}"),
    ],
)
def test_a_docker_config_secret_that_is_not_a_json_object_is_refused(
    core: client.CoreV1Api, ns: str, config: str, why: str
) -> None:
    """The value is redacted from the message: only Go's ``json.Unmarshal`` error shows."""
    name = unique("secret")
    body = secret(name, "kubernetes.io/dockerconfigjson", {".dockerconfigjson": config})
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_secret(ns, body)
    assert status["message"] == (
        f'Secret "{name}" is invalid: data[.dockerconfigjson]: Invalid value: '
        f'"<secret contents redacted>": {why}'
    )


def test_a_service_account_token_secret_names_its_account(core: client.CoreV1Api, ns: str) -> None:
    name = unique("secret")
    with raises_status(422, "Invalid") as status:
        core.create_namespaced_secret(ns, secret(name, "kubernetes.io/service-account-token"))
    at = "metadata.annotations[kubernetes.io/service-account.name]"
    assert status["message"] == f'Secret "{name}" is invalid: {at}: Required value'


def test_an_update_keeps_what_the_type_needs_after_the_type_check(
    core: client.CoreV1Api, ns: str
) -> None:
    """``ValidateSecretUpdate``: its own faults (the type changed) first, then
    ``ValidateSecret``'s of the new Secret."""
    name = unique("secret")
    core.create_namespaced_secret(
        ns, secret(name, "kubernetes.io/tls", {"tls.crt": "c", "tls.key": "k"})
    )
    with raises_status(422, "Invalid") as status:
        core.patch_namespaced_secret(name, ns, {"data": {"tls.key": None}})
    assert status["message"] == f'Secret "{name}" is invalid: data[tls.key]: Required value'
    with raises_status(422, "Invalid") as status:
        core.replace_namespaced_secret(name, ns, secret(name, "kubernetes.io/ssh-auth", {"a": "b"}))
    assert status["message"] == (
        f'Secret "{name}" is invalid: [type: Invalid value: "kubernetes.io/ssh-auth": '
        "field is immutable, data[ssh-privatekey]: Required value]"
    )
