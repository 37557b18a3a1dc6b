"""envtest's service account tokens: readable claims, and nothing but an unexpired, untouched token of
the same server verifies."""

from __future__ import annotations

import base64
import json

import pytest

from mcruntime.envtest._tokens import ISSUER, Issuer

pytestmark = pytest.mark.timeout(10)

SA = {"metadata": {"name": "robot", "namespace": "apps", "uid": "u-1"}}
SECRET = {"kind": "Secret", "metadata": {"name": "bound", "uid": "u-2"}}


def claims_of(token: str) -> dict[str, object]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))  # type: ignore[no-any-return]


def test_a_token_carries_kube_apiservers_claims_and_verifies() -> None:
    issuer = Issuer()
    token, expires = issuer.issue(SA, [ISSUER], 600, SECRET)
    claims = claims_of(token)
    assert claims["sub"] == "system:serviceaccount:apps:robot"
    assert claims["aud"] == [ISSUER] and claims["exp"] == expires
    assert claims["kubernetes.io"] == {
        "namespace": "apps",
        "serviceaccount": {"name": "robot", "uid": "u-1"},
        "secret": {"name": "bound", "uid": "u-2"},
    }
    verified = issuer.verify(token)
    assert verified is not None
    assert (verified.namespace, verified.service_account, verified.uid) == ("apps", "robot", "u-1")
    assert verified.bound == ("Secret", "bound", "u-2")


@pytest.mark.parametrize(
    "spoil",
    [
        lambda t: t[:-10] + ("B" if t[-10] == "A" else "A") + t[-9:],  # signature
        lambda t: ".".join([t.split(".")[0], t.split(".")[1][:-2] + "xx", t.split(".")[2]]),
        lambda t: t.rpartition(".")[0],  # no signature
        lambda t: "not a token",
        lambda t: t + ".extra",
    ],
    ids=["signature", "claims", "unsigned", "garbage", "four-parts"],
)
def test_a_changed_token_does_not_verify(spoil: object) -> None:
    issuer = Issuer()
    token, _ = issuer.issue(SA, [ISSUER], 600)
    assert issuer.verify(spoil(token)) is None  # type: ignore[operator]


@pytest.mark.parametrize("kind", ["Pod", "Secret", "Node"])
def test_the_bound_object_is_read_back(kind: str) -> None:
    issuer = Issuer()
    obj = {"kind": kind, "metadata": {"name": "x", "uid": "u-3"}}
    verified = issuer.verify(issuer.issue(SA, [ISSUER], 600, obj)[0])
    assert verified is not None and verified.bound == (kind, "x", "u-3")


def test_another_servers_token_does_not_verify() -> None:
    token, _ = Issuer().issue(SA, [ISSUER], 600)
    assert Issuer().verify(token) is None


def test_a_token_for_other_audiences_does_not_verify() -> None:
    issuer = Issuer()
    token, _ = issuer.issue(SA, ["https://vault.example.com"], 600)
    assert issuer.verify(token) is None


def test_an_expired_token_does_not_verify() -> None:
    now = [1_800_000_000.0]
    issuer = Issuer(clock=lambda: now[0])
    token, expires = issuer.issue(SA, [ISSUER], 600)
    assert expires == now[0] + 600
    now[0] = expires - 1
    assert issuer.verify(token) is not None
    now[0] = expires
    assert issuer.verify(token) is None
