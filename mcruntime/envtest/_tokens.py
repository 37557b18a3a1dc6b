"""Service account tokens: what a TokenRequest issues and what authenticates its bearer.

A token is a JWT with kube-apiserver's claims (``iss``, ``sub``, ``aud``,
``exp``, ``iat``, ``nbf``, ``jti`` and ``kubernetes.io``: the namespace, the
service account and the object it is bound to), so a test can read them as it
would a real one. envtest signs it with HMAC-SHA256 under a key of its own
server, where kube-apiserver signs with its service account key; nothing but
that server needs to verify it.

As kube-apiserver's validator does, a token stops authenticating when it
expires, when its service account or bound object is deleted (or replaced by
one with another UID), and when none of its audiences is the API server's.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mcruntime import _json

__all__ = ["ISSUER", "Claims", "Issuer"]

#: the issuer and the API server's audience, as kind and kubeadm clusters set them
ISSUER = "https://kubernetes.default.svc.cluster.local"
_HEADER = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")


@dataclass(frozen=True, slots=True)
class Claims:
    """What a valid token says: whose it is and the object it is bound to."""

    namespace: str
    service_account: str
    uid: str
    audiences: tuple[str, ...]
    #: (kind, name, uid) of the Pod, Secret or Node the token is bound to, if any
    bound: tuple[str, str, str] | None


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def _unb64(data: str) -> bytes:
    return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))


class Issuer:
    """Issues the tokens of one API server and verifies them."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._key = secrets.token_bytes(32)
        self._clock = clock

    def issue(
        self,
        sa: dict[str, Any],
        audiences: list[str],
        expiration_seconds: int,
        bound: dict[str, Any] | None = None,
    ) -> tuple[str, float]:
        """A token for ServiceAccount ``sa`` and the time it expires."""
        meta = sa["metadata"]
        now = int(self._clock())
        exp = now + expiration_seconds
        private: dict[str, Any] = {
            "namespace": meta["namespace"],
            "serviceaccount": {"name": meta["name"], "uid": meta["uid"]},
        }
        if bound is not None:
            bmeta = bound["metadata"]
            private[bound["kind"].lower()] = {"name": bmeta["name"], "uid": bmeta["uid"]}
        claims = {
            "iss": ISSUER,
            "sub": f"system:serviceaccount:{meta['namespace']}:{meta['name']}",
            "aud": audiences,
            "exp": exp,
            "iat": now,
            "nbf": now,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": private,
        }
        signing_input = _HEADER + b"." + _b64(_json.dumps(claims))
        signature = hmac.new(self._key, signing_input, hashlib.sha256).digest()
        return (signing_input + b"." + _b64(signature)).decode(), float(exp)

    def verify(self, token: str, audiences: Iterable[str] = (ISSUER,)) -> Claims | None:
        """The claims of a token this issuer signed, unexpired and meant for one of
        ``audiences`` (the API server's, unless a TokenReview names others)."""
        head, dot, signature = token.rpartition(".")
        if not dot or head.count(".") != 1:
            return None
        try:
            expected = hmac.new(self._key, head.encode(), hashlib.sha256).digest()
            if not hmac.compare_digest(_unb64(signature), expected):
                return None
            claims = _json.loads(_unb64(head.partition(".")[2]))
        except (ValueError, binascii.Error, UnicodeEncodeError):
            return None
        now = self._clock()
        if claims.get("iss") != ISSUER or not claims["nbf"] - 60 <= now < claims["exp"]:
            return None
        if not set(claims["aud"]).intersection(audiences):
            return None
        private = claims["kubernetes.io"]
        bound = next(
            (
                (kind, private[key]["name"], private[key]["uid"])
                for kind, key in (("Pod", "pod"), ("Secret", "secret"), ("Node", "node"))
                if key in private
            ),
            None,
        )
        sa = private["serviceaccount"]
        return Claims(private["namespace"], sa["name"], sa["uid"], tuple(claims["aud"]), bound)
